"""pathtwin: a laboratory for Internet paths.

One network model, run two ways: simulated on a virtual clock (``simulate``) and emulated
with real applications and the Linux TCP in network namespaces (``Emulation``).
"""

from .errors import PathtwinError

__all__ = ["PathtwinError"]
__version__ = "0.1.0"
