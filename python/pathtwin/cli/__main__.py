"""``python -m pathtwin.cli``: the `pathtwin` command, run by the interpreter in use."""

import sys

from . import main

sys.exit(main())
