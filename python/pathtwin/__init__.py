"""pathtwin: a laboratory for Internet paths.

One network model, run two ways: simulated on a virtual clock (``simulate``) and emulated
with real applications and the Linux TCP in network namespaces (``Emulation``; a config's
``[[flow]]`` workload in both: ``simulate`` and ``emulate``, compared with ``compare_runs``);
captures analysed (``trace``) and their workloads replayed (``replay``).
"""

__version__ = "0.1.0"

from .errors import PathtwinError  # noqa: E402

# Imported on first use: every command, `pathtwin trace analyze` among them, imports this
# package, and the result and simulation modules (with the json, dataclasses and subprocess
# they pull in) cost 30 ms of each command's start-up.
_LAZY = {"Result": ".results", "read_result_dir": ".results", "simulate": ".sim", "compare_runs": ".compare",
         "sweep": ".sweeps", "read_sweep": ".sweeps"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    # The emulator pulls in Linux-only machinery; import it on first use.
    if name in ("Emulation", "emulate"):
        from . import emulation

        return getattr(emulation, name)
    # Sub-packages that pull in pandas: `pathtwin.replay.replay(...)` works after a plain
    # `import pathtwin`.
    if name in ("replay", "trace"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(name)


__all__ = ["PathtwinError", "Result", "read_result_dir", "simulate", "Emulation", "emulate", "compare_runs", "sweep", "read_sweep",
           "__version__"]
