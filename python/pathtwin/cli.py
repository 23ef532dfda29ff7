"""The `pathtwin` command line: one entry point for every engine and tool.

Sub-commands live beside their engine (``trace_cli``, ``emu_cli``); this module wires them
together and owns the rule that user errors print one line and exit with status 2.
"""

from __future__ import annotations

import sys

import typer

from . import emu_cli, trace_cli
from .errors import PathtwinError

app = typer.Typer(
    name="pathtwin",
    help="A laboratory for Internet paths: simulate, emulate, analyze and replay.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(trace_cli.app, name="trace")
app.add_typer(emu_cli.app, name="emu")
emu_cli.register_top_level(app)


def main(argv: list[str] | None = None) -> int:
    """Runs the CLI; a ``PathtwinError`` becomes one line on stderr and exit status 2."""
    try:
        app(args=argv, prog_name="pathtwin", standalone_mode=True)
    except PathtwinError as e:
        print(f"pathtwin: error: {e}", file=sys.stderr)
        return e.exit_code
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
