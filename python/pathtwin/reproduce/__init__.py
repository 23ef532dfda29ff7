"""Reproductions of the papers' experiments: one module per paper, each describing its runs
declaratively and printing the paper's numbers beside ours.

- :mod:`.nsdi09` — "Modeling and Emulation of Internet Paths" (Table 2, Figure 5).
- :mod:`.acc` — "Accumulation-based congestion control" (Monaco and Vegas, §III-C, §IV-A, §IV-B).
- :mod:`.monarch` — Monarch's Figure 12 analog (NewReno, BIC, Vegas; the kernel's controllers).
- :mod:`.thesis` — the TCP-friendly marker thesis's Tables 4.1–4.4 (markers over RIO, FRIO, RED).

The engines never import this package; a reproduction builds configs, runs them through
``pathtwin.simulate`` (or the emulator), and compares.
"""
