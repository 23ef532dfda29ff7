"""Reproductions of the papers' experiments: one module per paper, each registering its
reproductions (``registry``) with the paper's numbers beside ours.

- :mod:`.nsdi09` — "Modeling and Emulation of Internet Paths" (Table 2, Figure 5).
- :mod:`.nsdi09_queues` — the same paper's queue-size and capacity experiments (Table 2's bad
  queues, §4.2's 2.5 KB queue, Figure 6).
- :mod:`.acc` — "Accumulation-based congestion control" (Monaco and Vegas, §III-C, §IV-A, §IV-B).
- :mod:`.monarch` — Monarch's Figure 12 analog (NewReno, BIC, Vegas; the kernel's controllers).
- :mod:`.thesis` — the TCP-friendly marker thesis's Tables 4.1–4.4 (markers over RIO, FRIO, RED).

Importing this package imports every paper module, so ``reproductions()`` lists them all
and ``get(name)`` finds one. The engines never import this package; a reproduction builds
configs, runs them through ``pathtwin.simulate`` (or the emulator), and compares.
"""

from .registry import ENGINES, OPTIONS, PaperValue, Progress, Reproduction, Request, get, reproductions

# Each paper module registers its reproductions as it is imported, in this order.
from . import nsdi09, nsdi09_queues, acc, monarch, thesis  # noqa: E402, F401  isort: skip

__all__ = ["ENGINES", "OPTIONS", "PaperValue", "Progress", "Reproduction", "Request", "get", "reproductions"]
