"""The TCP-friendly marker thesis's Chapter 4 as a user runs it
(`pathtwin reproduce thesis-tcp-friendly`): all four tables, the thesis's numbers beside ours,
and the claims of the thesis that do not depend on the marker's unpublished details."""

from __future__ import annotations

import json

from conftest import run_cli


def test_thesis_tables_hold_the_claims_about_parameters_sack_and_load():
    """One seed of every cell. The thesis's claims checked here: inappropriate RED-like
    parameters (OUT max_th 30 KB instead of 200 KB) raise the loss of every case; SACK times
    out less than Reno under the same parameters; 50 flows lose less and time out less than
    100. And with SACK the unmarked baseline (RED with the OUT parameters) loses about what the
    thesis measured: within a factor of 1.5 (with Reno ours loses about half the thesis's)."""
    r = run_cli("reproduce", "thesis-tcp-friendly", "--seeds", "1", "--json")
    assert r.returncode == 0, r.stderr
    rows = {(x["configuration"], x["case"], x["flows"]): x for x in json.loads(r.stdout)}
    assert len(rows) == 4 * 4 * 2
    loss = lambda c, case, n: rows[(c, case, n)]["ours"]["loss_percent"]
    timeouts = lambda c, case, n: rows[(c, case, n)]["ours"]["timeouts"]
    for case in (1, 2, 3, 4):
        for n in (50, 100):
            assert loss("C", case, n) > loss("A", case, n) and loss("D", case, n) > loss("B", case, n), (case, n)
            assert timeouts("A", case, n) < timeouts("B", case, n) and timeouts("C", case, n) < timeouts("D", case, n)
        for c in "ABCD":
            assert loss(c, case, 50) < loss(c, case, 100) and timeouts(c, case, 50) < timeouts(c, case, 100)
    for c in "AC":
        ours, paper = loss(c, 4, 100), rows[(c, 4, 100)]["paper"]["loss_percent"]
        assert paper / 1.5 < ours < paper * 1.5, (c, ours, paper)


def test_only_names_a_configuration_the_thesis_has():
    r = run_cli("reproduce", "thesis-tcp-friendly", "--only", "AX")
    assert r.returncode == 2 and "--only" in r.stderr and "X" in r.stderr and "\n" not in r.stderr.strip(), r.stderr


def test_a_table_printed_to_a_pipe_or_a_narrow_terminal_cuts_no_number():
    """`pathtwin reproduce thesis-tcp-friendly | cat` printed `0.21 (0.0…`: rich fits a table
    to its console, and takes a pipe for 80 columns. Every cell of ours and the thesis's must
    be printed whole, as the JSON output gives them."""
    import os

    env = {**os.environ, "COLUMNS": "60"}
    text = run_cli("reproduce", "thesis-tcp-friendly", "--only", "A", "--seeds", "1", env=env)
    data = run_cli("reproduce", "thesis-tcp-friendly", "--only", "A", "--seeds", "1", "--json", env=env)
    assert text.returncode == data.returncode == 0, text.stderr + data.stderr
    assert "…" not in text.stdout, text.stdout
    for row in json.loads(data.stdout):
        o, p = row["ours"], row["paper"]
        for cell in (f"{o['timeouts']:.0f} ({p['timeouts']:g})", f"{o['loss_percent']:.2f} ({p['loss_percent']:g})",
                     f"{o['goodput_Bps']:.0f} ({p['goodput_Bps']:g})", f"{o['cov']:.2f} ({p['cov']:g})"):
            assert cell in text.stdout, (cell, text.stdout)
