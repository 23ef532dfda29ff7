"""``python -m pathtwin.cli``: the `pathtwin` command, run by the interpreter in use.

Guarded by ``__main__``: a process that multiprocessing spawns (a sweep's Dask workers)
imports its parent's main module again, and must not run the command a second time."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
