"""Printing a reproduction's tables at their natural width, never narrower, whatever the
terminal: rich fits a table to the console by cutting cells (``0.21 (0.0…``), and takes a
pipe for 80 columns, so ``pathtwin reproduce thesis-tcp-friendly | cat`` cut its numbers. A
table wider than the terminal wraps as the terminal wraps any long line; no number is lost.

Not here: what the tables hold (each paper module's ``print_*``).
"""

from __future__ import annotations

from typing import Any


def print_table(table: Any, console: Any = None) -> Any:
    """Prints ``table`` on ``console`` (default: one at least as wide as the table's natural
    width) and returns the console used, for what follows it."""
    from rich.console import Console
    from rich.measure import Measurement

    if console is None:
        probe = Console(width=100_000)
        need = Measurement.get(probe, probe.options, table).maximum
        console = Console(width=max(Console().width, need))
    console.print(table)
    return console
