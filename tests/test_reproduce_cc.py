"""Congestion-control reproductions as a user runs them (`pathtwin reproduce ...`), checked
against what the papers observed."""

from __future__ import annotations

import json

from conftest import run_cli


def test_monarch_figure12_analog_shows_the_papers_three_behaviours(tmp_path):
    """Monarch §5, Fig. 12: over a DSL path NewReno's RTT climbs from 44 ms to well over
    300 ms before it loses; BIC has even higher delays and more losses; Vegas settles near
    100 ms without a single loss."""
    r = run_cli("reproduce", "monarch-fig12", "--json", "-o", tmp_path)
    assert r.returncode == 0, r.stderr
    t = {x["cc"]: x for x in json.loads(r.stdout)}
    assert t["newreno"]["rtt_max_ms"] > 300 and t["newreno"]["retransmits"] > 0
    assert t["bic"]["retransmits"] > t["newreno"]["retransmits"]
    assert t["bic"]["rtt_mean_ms"] > t["newreno"]["rtt_mean_ms"]
    assert t["vegas"]["retransmits"] == 0 and 70 <= t["vegas"]["rtt_mean_ms"] <= 130, t["vegas"]
    assert (tmp_path / "figure12.png").stat().st_size > 10_000
