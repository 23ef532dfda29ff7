"""`pathtwin emu ...` and `pathtwin shell` (owned by the emulator work)."""

import typer

app = typer.Typer(help="Run real applications across emulated paths.", no_args_is_help=True)


def register_top_level(root: typer.Typer) -> None:
    """Adds top-level commands that belong to the emulator (e.g. `pathtwin shell`)."""
