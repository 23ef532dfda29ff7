"""The TCP-friendly marker thesis's Chapter 4 as a user runs it
(`pathtwin reproduce thesis-tcp-friendly`): all four tables, the thesis's numbers beside ours.

Every one of the 32 cells (4 configurations × 4 cases × 50 and 100 flows) and each of its four
metrics is checked against the thesis's number (``PAPER``, Tables 4.1–4.4) with the tolerance
``TOLERANCE`` states for that metric, over ``SEEDS`` seeds; the eight cells of Case 4 (no
marker) also against ns-2.35 on the same scenario (``NS2_CASE_4``), with the same tolerances.
The cells where ours differs by more, and why, are listed in ``KNOWN`` (against the thesis) and
``KNOWN_NS2`` (against ns-2); each of those is checked too: it must still differ (an entry
that has come within the tolerance fails, so that the lists stay true), on the side the entry
says and within the wider bound it gives. Besides the numbers, the thesis's claims that hold
whatever its marker did: inappropriate RED-like parameters raise the loss of every case, SACK
times out less than Reno, 50 flows lose less and time out less than 100.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from conftest import run_cli

#: Six seeds: one seed's metrics spread (standard deviation over 10 seeds, as a share of the
#: mean) by at most 12 % for timeouts, 4 % for loss, 2 % for goodput and 20 % for the CoV; the
#: standard error of a mean of six is 0.41 of that (CoV 8 %, ±0.02 at most), well inside every
#: tolerance below, and the means of seeds 1–6 and 5–10 put the same cells outside the
#: tolerances. One seed of all 32 cells takes about 3.5 s of a core, six about 21 s.
SEEDS = 6

METRICS = ("timeouts", "loss_percent", "goodput_Bps", "cov")
CELLS = [(c, case, n) for c in "ABCD" for case in (1, 2, 3, 4) for n in (100, 50)]


@dataclass(frozen=True)
class Tolerance:
    """How far ours may be from the thesis's number: within a factor (``factor``), or within
    ``absolute`` in the metric's unit, whichever is wider."""

    factor: float | None
    absolute: float | None
    reason: str

    def within(self, ours: float, paper: float) -> bool:
        by_factor = self.factor is not None and paper / self.factor <= ours <= paper * self.factor
        by_absolute = self.absolute is not None and abs(ours - paper) <= self.absolute
        return by_factor or by_absolute


# The thesis states nothing of its own precision: no repetitions, no confidence intervals, no
# run length, no buffer size, no segment size (Ch. 3.3); its numbers are one testbed's. Our
# seed-to-seed spread (SEEDS) is far below each tolerance, so what a tolerance allows for is
# what the thesis leaves unsaid and thesis.py had to choose.
TOLERANCE = {
    "timeouts": Tolerance(2.0, 10, "a count over a run whose length the thesis does not give, and "
                          "a handful (±10) where the thesis counts single digits; RTO rules "
                          "(granularity, minimum) of the testbed's kernels are not given either"),
    "loss_percent": Tolerance(1.5, None, "loss at a RED queue goes as 1/W² of the per-flow window, "
                              "which the unstated buffer and segment size set: ±20 % in W is ×1.5"),
    "goodput_Bps": Tolerance(1.1, None, "mean goodput is the link's share per flow; the headers "
                             "and framing the thesis does not state (10 Mbit/s Ethernet's, TCP "
                             "timestamps) move it by about 3 %, our spread is under 2 %, and the "
                             "thesis states no precision: ±10 % is twice what we can account for"),
    "cov": Tolerance(None, 0.1, "the thesis gives two decimals of a dimensionless spread; ±0.1 is "
                     "over twice one seed's spread of ours (±0.04) and near the sampling error "
                     "of a CoV over 50 flows from one run (CoV/√(2n) ≈ 10 % of up to 0.5)"),
}


@dataclass(frozen=True)
class Known:
    """Cells where one metric of ours is outside its ``TOLERANCE``: ours is ``side`` ("above"
    or "below") the number it is checked against (the thesis's or ns-2's), by at most
    ``bound`` (a factor for timeouts, loss and goodput, a difference for the CoV)."""

    metric: str
    cells: str  # "A1-100 A1-50 ...": configuration, case, flows
    side: str
    bound: float
    reason: str


#: ns-2.35 on Case 4 (no marker, RED with the OUT parameters) of the same scenario,
#: bench/aqm/thesis_case4.tcl, mean of seeds 1–3: (timeouts, loss %, goodput B/s, CoV) for
#: 100 then 50 flows (one seed's spread: under 3 % for loss and goodput, 8 % for timeouts).
#: A second ground truth for those cells, and the evidence for reasons below: like ours and
#: unlike the thesis, ns-2's TCP fills the link, spreads it evenly (CoV about 0.1) and loses no
#: more with Reno than with SACK.
NS2_CASE_4 = {
    "A": ((776, 7.28, 12039, 0.10), (149, 3.50, 24001, 0.09)),
    "B": ((1643, 6.81, 11976, 0.11), (501, 3.20, 23759, 0.10)),
    "C": ((1417, 9.51, 11885, 0.13), (183, 4.69, 22774, 0.09)),
    "D": ((2408, 8.32, 11672, 0.14), (895, 4.38, 20429, 0.12)),
}

# Why the marker cases differ: our TCP-friendly marker (crates/pathtwin-core/src/marker/
# tcp_friendly.rs) follows shared/ALGORITHMS.md §3's proposal, since the thesis does not
# publish its rules. The proposal protects (marks IN while the budget lasts) every packet of a flow whose
# window is under 4 packets. On this path 100 flows share 171 packets of bandwidth-delay
# product and ~120 of queue, 50 flows twice that per flow, so nearly every flow is under 4
# packets, nearly every packet is protected, and the marker spends its budget on the first
# packets of each 400 ms interval exactly as the token bucket does (A2, 100 flows, seed 1: both
# markers mark 49 177 packets IN, 48 824 of them protected). The thesis's marker cut timeouts by
# up to two orders of magnitude against the token bucket; ours changes nothing, so cases 1 and 2
# look like case 3. FRIO has no public definition either (shared/ALGORITHMS.md §2).
MARKER = "our TCP-friendly marker degenerates into the token bucket at these windows (see above)"

KNOWN = [
    Known("timeouts", "A1-100 A1-50 B1-100 B1-50 C1-100 C1-50 D1-100 D1-50 "
          "A2-100 A2-50 B2-100 B2-50 C2-100 C2-50 D2-100 D2-50", "above", 150, MARKER),
    Known("loss_percent", "A1-100 A1-50 B1-100 C1-100 C1-50 D1-100 D1-50 "
          "A2-100 A2-50 C2-100 C2-50 D2-100 D2-50", "above", 4, MARKER),
    Known("cov", "A1-100 B1-100 C1-100 D1-100 D1-50 C2-100 D2-50", "above", 0.35, MARKER),
    Known("goodput_Bps", "D2-50", "below", 1.3,
          MARKER + "; with Reno and the 30 KB OUT threshold, 50 flows time out ~27 times each and "
          "leave the link idle, which the thesis's marker prevented"),
    Known("goodput_Bps", "A2-100 A2-50 B2-100 B2-50 C2-100 A3-100 A3-50 B3-100 B3-50 C3-100 C3-50 "
          "D3-100 A4-100 A4-50 B4-100 B4-50 C4-100 C4-50 D4-100", "above", 1.6,
          "ours fills the link in every cell (utilisation 0.995): with 50–100 flows, while some "
          "wait out a timeout the others take the capacity. The thesis's goodput falls as its "
          "timeouts rise, to 72 % of the link (A, no marker, 100 flows: 100 × 9015 B/s) with "
          "about as many timeouts as ours (1322 against ~1370). ns-2's Reno and Sack1 on the "
          "same scenario fill the link too (NS2_CASE_4), so it is not our TCP; what idled the "
          "thesis's link is not found (a limit of its one sender host running 100 flows would "
          "do it)"),
    Known("cov", "A3-100 B3-100 C3-100 D3-100 D3-50 A4-100 B4-100 B4-50 C4-100 C4-50 D4-100 D4-50",
          "below", 0.45,
          "the same cause as the goodput above: ours keeps the link full and shares it evenly "
          "over 100 s; in the thesis the flows that time out fall behind (its CoV rises with its "
          "timeouts, to 0.5). ns-2 on the same scenario gives 0.09–0.14 as ours does "
          "(NS2_CASE_4)"),
    Known("loss_percent", "B3-100 B3-50 B4-100 B4-50 D4-100", "below", 2.5,
          "the thesis's Reno loses 1.6–1.8 times its SACK's at the same queue (B4 against A4, "
          "100 flows: 16.47 against 9.01 %); ours loses no more than SACK (8.9 against 9.8 %), "
          "as a RED queue's drop rate follows its average, set by the number of flows and the "
          "RED curve, not by how a sender recovers. ns-2's Reno loses less than its Sack1 on "
          "the same scenario too (NS2_CASE_4: 6.8 against 7.3 %), so it is not our TCP; the "
          "cause in the thesis's testbed is not found"),
    Known("loss_percent", "C3-100 C3-50", "above", 2,
          "with the 30 KB OUT threshold the thesis's token bucket lowered loss against no marker "
          "(9.16 against 10.75 %, 100 flows); ours raises it (13.9 against 12.6 %, seed 1), all "
          "of it on OUT packets and mostly forced drops (9164 of 12 668) with the average at "
          "24 KB against RED's 21 KB. Cause not found: RIO-C or RIO-D and the buffer, which "
          "decide how OUT packets meet the 30 KB threshold, are not given in the thesis"),
    Known("timeouts", "C3-50 D3-100 D3-50", "above", 4,
          "the token bucket with the 30 KB OUT threshold: in the thesis it halved timeouts "
          "against no marker (C, 50 flows: 320 against 689; D: 413 against 844); ours times out "
          "as often as without a marker or more (C: ~810 against ~560). Cause not found, as for "
          "C3's loss"),
]


#: Where ours differs from ns-2 on Case 4 beyond TOLERANCE: the inappropriate (30 KB) OUT
#: threshold with 50 flows, where the average queue stays under 20 packets and each flow's
#: window is a few packets.
NS2_SMALL_QUEUE = ("with the 30 KB threshold and 50 flows ours loses about twice ns-2's and times "
                   "out three times as often (C: 9.1 against 4.7 %, ~560 against 183), and with "
                   "Reno the link idles more (D: goodput 0.83 of ns-2's); with 100 flows or the "
                   "200 KB threshold the two agree within the tolerances. The RED settings are the "
                   "same on both sides (bench/aqm/thesis_case4.tcl) but for the mean packet size "
                   "of the idle decay (ns-2 1500 B, ours 500 B; ours with 1500 B loses the same, "
                   "9.1 %, C4-50 seed 1); cause not found, the simulators' TCPs at windows of a "
                   "few packets are the suspects")
KNOWN_NS2 = [
    Known("loss_percent", "C4-50 D4-50", "above", 2.5, NS2_SMALL_QUEUE),
    Known("timeouts", "C4-50", "above", 4, NS2_SMALL_QUEUE),
    Known("goodput_Bps", "D4-50", "below", 1.3, NS2_SMALL_QUEUE),
]


def _cells(known: Known) -> list[tuple[str, int, int]]:
    out = []
    for name in known.cells.split():
        config_case, flows = name.split("-")
        out.append((config_case[0], int(config_case[1]), int(flows)))
    return out


@pytest.fixture(scope="module")
def rows():
    r = run_cli("reproduce", "thesis-tcp-friendly", "--seeds", SEEDS, "--json")
    assert r.returncode == 0, r.stderr
    rows = {(x["configuration"], x["case"], x["flows"]): x for x in json.loads(r.stdout)}
    assert sorted(rows) == sorted(CELLS)
    return rows


def _differences(expected, ours, cells, known: list[Known], source: str) -> list[str]:
    """Each of ``cells``' metrics of ``ours`` against ``expected`` (both ``(cell, metric) ->
    number``) by ``TOLERANCE``, and every entry of ``known`` held to what it says: outside the
    tolerance, on its side, within its bound."""
    listed = {(cell, k.metric): k for k in known for cell in _cells(k)}
    failures = []
    for cell in cells:
        for metric in METRICS:
            o, e = ours(cell, metric), expected(cell, metric)
            name = f"{cell[0]}{cell[1]}-{cell[2]} {metric}: ours {o:.4g}, {source} {e:g}"
            within = TOLERANCE[metric].within(o, e)
            k = listed.get((cell, metric))
            if k is None:
                if not within:
                    failures.append(f"{name}: outside the tolerance and not listed as a known difference")
                continue
            if within:
                failures.append(f"{name}: listed as a known difference but within the tolerance now; remove it")
                continue
            if (o > e) != (k.side == "above"):
                failures.append(f"{name}: the list says {k.side}")
            beyond = abs(o - e) > k.bound if metric == "cov" else not e / k.bound <= o <= e * k.bound
            if beyond:
                failures.append(f"{name}: beyond the listed bound {k.bound:g}")
    return failures


@pytest.mark.parametrize("known", [KNOWN, KNOWN_NS2], ids=["thesis", "ns-2"])
def test_known_differences_name_each_cell_and_metric_once(known):
    seen = set()
    for k in known:
        assert k.metric in METRICS and k.side in ("above", "below") and k.reason, k
        for cell in _cells(k):
            assert cell in CELLS and (cell, k.metric) not in seen, (cell, k.metric)
            seen.add((cell, k.metric))


def test_every_cell_is_the_thesiss_within_its_tolerance_or_a_listed_difference(rows):
    failures = _differences(lambda cell, m: rows[cell]["paper"][m], lambda cell, m: rows[cell]["ours"][m],
                            CELLS, KNOWN, "thesis")
    assert not failures, "\n".join(failures)


def test_case_4_is_ns2s_on_the_same_scenario_within_the_same_tolerances(rows):
    """The second ground truth: ns-2.35's Reno and Sack1 on Case 4 of the same scenario
    (``NS2_CASE_4``), where no marker or RIO of ours is involved, only RED and the TCP."""
    ns2 = lambda cell, m: NS2_CASE_4[cell[0]][(100, 50).index(cell[2])][METRICS.index(m)]
    failures = _differences(ns2, lambda cell, m: rows[cell]["ours"][m], [c for c in CELLS if c[1] == 4],
                            KNOWN_NS2, "ns-2")
    assert not failures, "\n".join(failures)


def test_thesis_tables_hold_the_claims_about_parameters_sack_and_load(rows):
    """Inappropriate RED-like parameters (OUT max_th 30 KB instead of 200 KB) raise the loss of
    every case; SACK times out less than Reno under the same parameters; 50 flows lose less
    and time out less than 100."""
    loss = lambda c, case, n: rows[(c, case, n)]["ours"]["loss_percent"]
    timeouts = lambda c, case, n: rows[(c, case, n)]["ours"]["timeouts"]
    for case in (1, 2, 3, 4):
        for n in (50, 100):
            assert loss("C", case, n) > loss("A", case, n) and loss("D", case, n) > loss("B", case, n), (case, n)
            assert timeouts("A", case, n) < timeouts("B", case, n) and timeouts("C", case, n) < timeouts("D", case, n)
        for c in "ABCD":
            assert loss(c, case, 50) < loss(c, case, 100) and timeouts(c, case, 50) < timeouts(c, case, 100)


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


def test_the_bar_charts_draw_the_tables_numbers(rows):
    """Figures 4.K.1-4.K.4 (one figure per configuration, four panels): every bar, read back
    from the figure, is the table's number of ours or the thesis's for its case and flows."""
    from pathtwin.reproduce.thesis import FIGURE_METRICS, Metrics, Row, figures

    objs = [Row(x["configuration"], x["case"], x["flows"], Metrics(**x["ours"]), Metrics(**x["paper"]), x["seeds"])
            for x in rows.values()]
    drawn = figures(objs)
    assert [name for name, _c, _f in drawn] == [f"thesis-figure-4.{k}" for k in range(1, 5)]
    for (name, _caption, fig), configuration in zip(drawn, "ABCD"):
        axes = fig.axes
        assert len(axes) == len(FIGURE_METRICS) == 4
        for ax, (attr, _label) in zip(axes, FIGURE_METRICS):
            bars = {p.get_gid(): p.get_height() for p in ax.patches if p.get_gid()}
            want = {}
            for (c, case, flows), x in rows.items():
                if c == configuration:
                    want[f"ours {case} {flows}"] = x["ours"][attr]
                    want[f"thesis {case} {flows}"] = x["paper"][attr]
            assert bars.keys() == want.keys(), (name, attr)
            assert all(bars[k] == pytest.approx(want[k]) for k in want), (name, attr)


def test_reproduce_with_an_output_directory_writes_the_figures(tmp_path):
    r = run_cli("reproduce", "thesis-tcp-friendly", "--only", "A", "--seeds", "1", "--duration", "20s", "-o", tmp_path)
    assert r.returncode == 0, r.stderr
    png = tmp_path / "thesis-figure-4.1.png"
    assert f"figure: {png}" in r.stdout and png.stat().st_size > 10_000
    assert not (tmp_path / "thesis-figure-4.2.png").exists(), "only configuration A ran"


#: The emulated cells: token bucket + RIO (case 3) and RED alone (case 4), 50 flows, 10 s.
EMU_DURATION_S = 10.0


@pytest.fixture(scope="module")
def emulated_and_simulated(tmp_path_factory):
    from pathtwin.reproduce import thesis

    out = tmp_path_factory.mktemp("thesis-emu")
    args = dict(configurations=("A",), cases=(3, 4), flow_counts=(50,), seeds=(1,), duration_s=EMU_DURATION_S)
    return thesis.run(**args, out=out, engine="emu"), thesis.run(**args), out


@pytest.mark.usefixtures("emulator")
def test_the_thesis_network_carries_the_kernels_tcp_in_the_emulator(emulated_and_simulated):
    """`--engine emu` (configuration A: SACK, appropriate thresholds): the kernel's TCP over
    the same markers and RIO/RED. What holds whatever TCP runs: the token bucket marks at most
    its 296 KB of tokens every 400 ms, and nearly that while 50 flows offer more than its
    5.92 Mbit/s; the 10 Mbit/s bottleneck is kept busy but for the flows' start (they start
    in the first second and double their windows every 200 ms), and the mean goodput is the
    simulator's within 10 % (measured: 0.5 % and 4 % at 10 s, 2 % at 20 s). The loss at the
    bottleneck is within ×1.5 of the simulator's (kernel NewReno with PRR and its own window
    growth against the simulator's: measured ×1.2-×1.3 at 10 and 20 s)."""
    import pandas as pd

    from pathtwin.reproduce import thesis

    emulated, simulated, out = emulated_and_simulated
    tokens = parse_size(thesis.TOKENS)
    intervals = EMU_DURATION_S / 0.4
    marker = pd.read_parquet(out / "A3-50-seed1" / "markers.parquet").iloc[0]
    assert marker["kind"] == "token-bucket"
    # At most the tokens of every interval begun, plus the full bucket at the start; at least
    # three quarters of it (the flows ramp up over the first seconds at a 200-ms RTT).
    assert 0.75 * tokens * intervals <= marker["in_bytes"] <= tokens * (intervals + 1), marker
    for emu, sim in zip(emulated, simulated):
        assert (emu.configuration, emu.case) == (sim.configuration, sim.case)
        queues = pd.read_parquet(out / f"A{emu.case}-50-seed1" / "queues.parquet").set_index("queue")
        assert queues.loc[thesis.BOTTLENECK, "utilization"] >= 0.85, queues.loc[thesis.BOTTLENECK]
        assert abs(emu.ours.goodput_Bps / sim.ours.goodput_Bps - 1) <= 0.10, (emu.ours, sim.ours)
        assert sim.ours.loss_percent / 1.5 <= emu.ours.loss_percent <= 1.5 * sim.ours.loss_percent, (emu.ours, sim.ours)
        assert emu.ours.timeouts >= 0 and emu.paper == sim.paper


def parse_size(text: str) -> float:
    from pathtwin.config import parse_quantity

    return parse_quantity("size", text, "size")
