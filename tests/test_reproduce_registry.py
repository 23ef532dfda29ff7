"""The registry of reproductions (`pathtwin.reproduce`): every paper module's records, what
`pathtwin reproduce --list` shows of them, and the checks a request goes through."""

from __future__ import annotations

import pytest

import pathtwin
from pathtwin import reproduce as rp

NAMES = ["nsdi09-table2", "nsdi09-figure5", "nsdi09-bad-queue", "nsdi09-small-queue", "nsdi09-figure6", "acc-4a", "acc-4b", "acc-3c", "monarch-fig12", "thesis-tcp-friendly"]


def test_every_paper_registers_its_reproductions_in_order():
    records = rp.reproductions()
    assert [r.name for r in records] == NAMES
    for r in records:
        assert r.description and "\n" not in r.description, r.name
        assert r.engines and set(r.engines) <= set(rp.ENGINES), r.name
        assert set(r.options) <= set(rp.OPTIONS) and set(r.defaults) <= set(r.options), r.name
        for v in r.paper:
            assert v.quantity and v.source and isinstance(v.value, (int, float, str)), (r.name, v)
        assert callable(r.runner) and callable(r.print_text) and callable(r.to_json), r.name


def test_the_papers_numbers_carry_their_source():
    f5 = {v.quantity: v for v in rp.get("nsdi09-figure5").paper}
    assert f5["mean RTT, link emulation"].value == 629.0 and f5["mean RTT, path emulation"].value == 53.2
    assert f5["RTT standard deviation, path emulation"].value == 3.0
    assert all("Figure 5" in v.source for v in f5.values())
    bad = {v.quantity: v.value for v in rp.get("nsdi09-bad-queue").paper}
    assert bad["throughput, row 4, forward"] == 21_012 and bad["throughput, row 7, reverse"] == 2_768
    t2 = {v.quantity: v.value for v in rp.get("nsdi09-table2").paper}
    assert t2["ABW error, row 7, link mode, forward"] == 66.5 and t2["ABW error, row 1, path mode, reverse"] == 1.8
    thesis = {v.quantity: v for v in rp.get("thesis-tcp-friendly").paper}
    assert thesis["configuration A, TCP friendly & FRIO, 100 flows: timeouts"].value == 41
    assert thesis["configuration D, no marker & RED, 50 flows: goodput CoV"].source == "thesis Table 4.4"


def test_requests_are_checked_and_filled_with_defaults():
    table2 = rp.get("nsdi09-table2")
    assert table2.request().seeds == 5 and table2.request(seeds=2).seeds == 2
    assert table2.request(engine="emu").engine == "emu"
    with pytest.raises(pathtwin.PathtwinError, match="--engine: acc-3c runs in the simulator .Monaco and Vegas"):
        rp.get("acc-3c").request(engine="emu")
    with pytest.raises(pathtwin.PathtwinError, match="--engine: expected sim or emu, got 'ns3'"):
        rp.Request(engine="ns3")
    with pytest.raises(pathtwin.PathtwinError, match="--seeds: must be at least 1"):
        rp.Request(seeds=0)
    with pytest.raises(pathtwin.PathtwinError, match="unknown reproduction 'nsdi99': expected one of nsdi09-table2, "):
        rp.get("nsdi99")


def test_a_reproduction_runs_and_prints_through_its_record(capsys):
    f5 = rp.get("nsdi09-figure5")
    request = f5.request(duration="5s")
    result = f5.run(request)
    f5.print_text(result, request)
    text = capsys.readouterr().out
    assert text.startswith("NSDI'09 Figure 5 (sim): base RTT 50 ms") and "(paper: 629 ms vs 53.2 ms)" in text
    f5.print_json(result)
    assert '"mean_rtt_ms"' in capsys.readouterr().out


def test_list_shows_name_engines_and_description(cli):
    r = cli("reproduce", "--list")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["name", "engines", "description"]
    for name, line in zip(NAMES, lines[2:]):
        assert line.startswith(name), line
    assert "sim, emu" in lines[2] and lines[2 + NAMES.index("acc-4a")].split()[1] == "sim"
