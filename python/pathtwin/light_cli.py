"""What the light command paths (``sim_cli``, ``trace_analyze_cli``: argparse, no typer) share:
the parser that turns argparse's usage errors into the project's one-line ``PathtwinError``."""

from __future__ import annotations

import argparse

from .errors import PathtwinError


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors follow the project's rule for user errors: one line
    on stderr naming the command, status 2 (plain argparse prints its usage too)."""

    def error(self, message: str):
        message = message.replace("the following arguments are required:", "Missing argument")
        raise PathtwinError(f"{message} (in `{self.prog}`)")
