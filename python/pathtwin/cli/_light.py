"""What the light command paths (`pathtwin sim` and `pathtwin trace analyze`: argparse, no
typer) share: the parser that turns argparse's usage errors into the project's one-line
``PathtwinError``, and plain aligned tables (rich's import alone took 40 % of a short run's
wall time)."""

from __future__ import annotations

import argparse
import os

from ..errors import PathtwinError


def terminal_columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` finds it ($COLUMNS, else the
    terminal on stdout, else 80), without importing shutil (and with it bz2 and lzma)."""
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(1).columns or 80
    except OSError:
        return 80


class Formatter(argparse.HelpFormatter):
    """argparse's formatter, given the width it would otherwise ask shutil for: argparse
    builds one for every ``add_argument``, so a parser that never prints help imported shutil
    for nothing (2-3 ms of a command a sweep runs thousands of times)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        super().__init__(prog, indent_increment, max_help_position, terminal_columns() - 2 if width is None else width)


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors follow the project's rule for user errors: one line
    on stderr naming the command, status 2 (plain argparse prints its usage too)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        message = message.replace("the following arguments are required:", "Missing argument")
        raise PathtwinError(f"{message} (in `{self.prog}`)")


def text_table(headers, rows, left: int = 0) -> str:
    """Aligned columns under a header line: the first ``left`` to the left (names,
    addresses), the rest to the right (numbers)."""
    widths = [max(len(h), *(len(r[k]) for r in rows)) if rows else len(h) for k, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.ljust(w) if k < left else c.rjust(w) for k, (c, w) in enumerate(zip(cells, widths)))  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])
