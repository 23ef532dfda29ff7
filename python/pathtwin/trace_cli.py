"""`pathtwin trace ...` (owned by the trace-analysis work)."""

import typer

app = typer.Typer(help="Analyze packet captures (Monkey See) and diagnose probes (Monarch).", no_args_is_help=True)
