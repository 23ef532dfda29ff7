"""The `pathtwin` command line: one entry point for every engine and tool, and the rule that
a user error prints one line and exits with status 2.

Each command group is a module of this package with a ``register(app)`` that adds its
commands to the typer application; ``GROUPS`` lists them in the order `pathtwin --help`
shows them. Two commands are parsed with argparse before typer is even imported (``LIGHT``):
``pathtwin sim``, which a sweep runs thousands of times, and ``pathtwin trace analyze``, the
command compared with tcptrace on large captures; their typer entries only list them in the
help and hand over. ``main`` is the entry point (``pathtwin = "pathtwin.cli:main"``).
"""

from __future__ import annotations

import sys

from ..errors import PathtwinError

# Not `typing.TYPE_CHECKING`: the light commands do not import typing (nor importlib) at all.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

    import typer

#: The command-group modules, each with a ``register(app)``, in the order of `pathtwin --help`
#: (typer lists commands as registered, groups after them).
GROUPS = ("trace", "emu", "replay", "monarch", "measure", "sim", "compare", "sweep", "report", "tools", "reproduce")

#: Command lines that skip typer: leading arguments -> (module, function taking the rest).
LIGHT = {("sim",): ("sim", "main"), ("trace", "analyze"): ("trace", "analyze_main")}


def app() -> "typer.Typer":
    """The typer application with every group registered."""
    import typer

    root = typer.Typer(
        name="pathtwin",
        help="A laboratory for Internet paths: simulate, emulate, analyze and replay.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
        # Help texts quote config syntax ("[[flow]]", "[run] seed"): read them as plain text, not
        # as rich markup, which would swallow the brackets.
        rich_markup_mode=None,
    )
    for group in GROUPS:
        _module(group).register(root)
    return root


def _module(name: str) -> "ModuleType":
    """This package's module ``name``, imported on first use."""
    return __import__(f"{__name__}.{name}", fromlist=["register"])


def _light_command(args: list[str]) -> "tuple[Callable[[list[str]], int], list[str]] | None":
    """The argparse command for ``args``, if it is one of ``LIGHT``, and its arguments."""
    for lead, (module, function) in LIGHT.items():
        if tuple(args[:len(lead)]) == lead:
            return getattr(_module(module), function), args[len(lead):]
    return None


def main(argv: list[str] | None = None) -> int:
    """Runs the CLI; a ``PathtwinError`` becomes one line on stderr and exit status 2."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        light = _light_command(args)
        if light is not None:
            command, rest = light
            return command(rest)
        rc = app()(args=args, prog_name="pathtwin", standalone_mode=False)
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
            ctx = getattr(e, "ctx", None)
            where = f" (in `{ctx.command_path}`)" if ctx is not None else ""
            print(f"pathtwin: error: {e.format_message()}{where}", file=sys.stderr)
            return 2
        raise
    return 0
