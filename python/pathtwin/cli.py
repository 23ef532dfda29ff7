"""The `pathtwin` command line: one entry point for every engine and tool, and the rule that
a user error prints one line and exits with status 2.

``pathtwin sim ...`` goes straight to ``sim_cli`` (argparse, no typer import: it is the
command a sweep runs thousands of times), and ``pathtwin trace analyze ...`` to
``trace_analyze_cli`` (the same, for the command compared with tcptrace on large captures);
everything else goes to the typer application in ``commands``.
"""

from __future__ import annotations

import sys

from .errors import PathtwinError


def main(argv: list[str] | None = None) -> int:
    """Runs the CLI; a ``PathtwinError`` becomes one line on stderr and exit status 2."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        if args[:1] == ["sim"]:
            from . import sim_cli

            return sim_cli.main(args[1:])
        if args[:2] == ["trace", "analyze"]:
            from . import trace_analyze_cli

            return trace_analyze_cli.main(args[2:])
        from .commands import app

        rc = app(args=args, prog_name="pathtwin", standalone_mode=False)
        if isinstance(rc, int):
            return rc
    except PathtwinError as e:
        print(f"pathtwin: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("pathtwin: interrupted", file=sys.stderr)
        return 130
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    except Exception as e:  # the command-line parser's own errors
        # typer vendors click (typer._click), so match its exceptions by shape, not by class.
        kind = type(e).__name__
        if kind == "Exit":
            return getattr(e, "exit_code", 0)
        if kind == "Abort":
            return 130
        if hasattr(e, "format_message"):
            where = f" (in `{e.ctx.command_path}`)" if getattr(e, "ctx", None) is not None else ""
            print(f"pathtwin: error: {e.format_message()}{where}", file=sys.stderr)
            return 2
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
