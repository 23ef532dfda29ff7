"""The examples gallery (`examples/`, README "Examples"): every file run with the command its
comments give (and the README lists), as a user types it, and checked against what its
comments promise.

Each check compares a result with an expectation of its own: a rate, threshold, delay or
profile read from the file itself, an equation (a queue's drain time, serialization, a
token bucket's bound), or the paper the file reproduces — never with a number recorded from
an earlier run. ``EXAMPLES_RUN`` maps every file to its command and check, and
``test_every_example_file_has_a_check`` fails for a file added without one.

The simulated examples run in the parallel phase (each a few seconds of CPU at most); the
one that needs the emulator (Monarch's proxy carries kernel TCP) is marked ``needs_root``
and runs about two seconds of emulation.
"""

from __future__ import annotations

import copy
import json
import math
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd
import pytest

import pathtwin
from conftest import EXAMPLES, REPO, needs_root, run_cli
from pathtwin.config import parse_per_direction, parse_quantity
from pathtwin.results import read_result_dir

#: The simulator's segments ("ns2" profile, the default): 1460 bytes of payload in a
#: 1500-byte packet; goodput is that share of the IP rate a path carries.
SIM_MSS = 1460
SIM_PAYLOAD = SIM_MSS / 1500
#: The kernel's (emulator): 12 bytes of TCP timestamps more per segment.
KERNEL_PAYLOAD = 1448 / 1500
#: A full packet on the wire, bytes.
MTU = 1500


# --- helpers -----------------------------------------------------------------------------


def rate(text: str) -> float:
    return parse_quantity("rate", text, "rate")


def seconds(text: str) -> float:
    return parse_quantity("time", text, "time")


def packets(text: str) -> float:
    """A queue size or threshold written in packets ("15p")."""
    v = parse_quantity("queue", text, "queue")
    assert v < 0, f"{text!r} is not in packets"  # the schema's parser: packets as negatives
    return -v


def queue_named(res, name: str) -> pd.Series:
    return res.queues.set_index("queue").loc[name]


def series(res, queue: str, after_s: float) -> pd.DataFrame:
    qs = res.queue_series
    return qs[(qs.queue == queue) & (qs.time_s >= after_s)]


def summed_goodput(res, labels, start_s: float, end_s: float) -> float:
    """The flows' summed goodput, averaged over the samples in [start_s, end_s)."""
    fs = res.flow_series
    fs = fs[fs.label.isin(labels) & (fs.time_s >= start_s) & (fs.time_s < end_s)]
    return float(fs.groupby("time_s").goodput_bps.sum().mean())


# --- the checks, one per file --------------------------------------------------------------


def check_figure5(cfg: dict, res) -> None:
    """Path mode keeps the RTT near the base RTT: NSDI'09 Figure 5's point. The queue
    drains at the capacity (100 Mbit/s by default), so a data packet adds its
    serialization there and little else; the flow still reaches the ABW."""
    path = cfg["path"][0]
    base = seconds(path["rtt"])
    capacity = parse_per_direction("rate", path.get("capacity", "100mbit"), "capacity")[0]
    expected_ms = (base + MTU * 8 / capacity) * 1e3
    f = res.flows.iloc[0]
    assert abs(f.rtt_mean_ms - expected_ms) <= 0.10 * expected_ms, (f.rtt_mean_ms, expected_ms)
    abw = parse_per_direction("rate", path["abw"], "abw")[0]
    assert abs(f.goodput_bps - abw) <= 0.10 * abw, (f.goodput_bps, abw)


def check_table2(cfg: dict, res) -> None:
    """Every flow within 10 % of its direction's ABW: the paper's path-mode accuracy
    (NSDI'09 §4.2, Table 2; goodput against ABW, as it measured)."""
    flows = res.flows.set_index(["src", "dst"])
    assert len(flows) == len(cfg["flow"])
    for p in cfg["path"]:
        a, b = p["between"]
        fwd, rev = parse_per_direction("rate", p["abw"], "abw")
        for (src, dst), abw in (((a, b), fwd), ((b, a), rev)):
            got = flows.loc[(src, dst)].goodput_bps
            assert abs(got - abw) <= 0.10 * abw, (src, dst, got, abw)


def w_max_bits(cfg: dict) -> float:
    return parse_quantity("size", cfg["tcp"]["max_window"], "max_window") * 8


def check_bad_queue(cfg: dict, res) -> None:
    """Queues beyond Eq. 4 let the RTT grow until each flow is window-limited (NSDI'09
    §4.1): every flow's goodput is the smaller of its ABW's payload share and w_max over the
    RTT it saw (Eq. 3), within 10 %, and the RTT is well above the base RTT."""
    flows = res.flows.set_index(["src", "dst"])
    for p in cfg["path"]:
        a, b = p["between"]
        base_ms = seconds(p["rtt"]) * 1e3
        for (src, dst), abw in zip(((a, b), (b, a)), parse_per_direction("rate", p["abw"], "abw")):
            f = flows.loc[(src, dst)]
            want = min(abw * SIM_PAYLOAD, w_max_bits(cfg) / (f.rtt_mean_ms / 1e3))
            assert abs(f.goodput_bps - want) <= 0.10 * want, (src, dst, f.goodput_bps, want)
            assert f.rtt_mean_ms > base_ms + 5, (src, dst, f.rtt_mean_ms, base_ms)


def check_small_queue(cfg: dict, res) -> None:
    """§4.2's 2.5 KB link queue: a forward flow alone comes close to its 409 kbit/s (at least
    80 % of its payload share); with a flow each way the reverse flow gets a small fraction
    of its 4,530 kbit/s, near the paper's "around 200 Kbps" (within 25 %)."""
    flows = res.flows.set_index(["src", "dst"])
    fwd, rev = parse_per_direction("rate", cfg["path"][0]["abw"], "abw")
    alone = flows.loc[("h1", "w1")].goodput_bps
    assert alone >= 0.8 * fwd * SIM_PAYLOAD, (alone, fwd)
    reverse = flows.loc[("w2", "h2")].goodput_bps
    assert reverse <= 0.1 * rev and abs(reverse - 200e3) <= 0.25 * 200e3, (reverse, rev)


def check_figure6(cfg: dict, res) -> None:
    """Figure 6's first point, capacity just above the ABW: the queue Eq. 4 allows (split
    equally) keeps each flow's RTT under w_max/ABW (Eq. 3: not window-limited), and the
    forward flow stays below its ABW's payload share, by at most a fifth."""
    p = cfg["path"][0]
    fwd, rev = parse_per_direction("rate", p["abw"], "abw")
    capacity = parse_per_direction("rate", p["capacity"], "capacity")[0]
    eq4_total = capacity / 8 * (w_max_bits(cfg) / max(fwd, rev) - seconds(p["rtt"]))
    queues = [r for r in res.run["resolved_paths"] if r["path"] == 0]
    assert sum(parse_quantity("size", r["queue"], "queue") for r in queues) <= eq4_total + 2, (queues, eq4_total)
    flows = res.flows.set_index(["src", "dst"])
    for (src, dst), abw in zip((tuple(p["between"]), tuple(reversed(p["between"]))), (fwd, rev)):
        f = flows.loc[(src, dst)]
        assert f.rtt_mean_ms / 1e3 < w_max_bits(cfg) / abw, (src, dst, f.rtt_mean_ms)
    got = flows.loc[tuple(p["between"])].goodput_bps
    assert 0.8 * fwd * SIM_PAYLOAD <= got <= fwd * SIM_PAYLOAD, (got, fwd)


def check_red(cfg: dict, res) -> None:
    """RED's average between its thresholds, a short instantaneous queue and a busy link;
    the same file with DropTail keeps the buffer at least half full."""
    [link] = [ln for ln in cfg["link"] if ln.get("qdisc") == "red"]
    name = "->".join(link["between"])
    min_th, max_th = packets(link["red"]["min_th"]), packets(link["red"]["max_th"])
    limit = packets(link["queue"])
    steady = series(res, name, after_s=10)  # slow start and RED's slow average are over
    avg = steady.avg_queue
    # Below min_th RED drops nothing and the flows grow the queue; above max_th (gentle off)
    # it drops every arrival: the average settles between them.
    assert min_th <= avg.mean() <= max_th, avg.describe()
    assert avg.quantile(0.05) >= min_th and avg.quantile(0.95) <= max_th, avg.describe()
    assert steady.packets.quantile(0.99) < limit / 2, steady.packets.describe()
    q = queue_named(res, name)
    assert q.early_drops > q.forced_drops, q
    assert q.utilization >= 0.95, q
    capacity = rate(link["rate"]) * SIM_PAYLOAD
    assert 0.9 * capacity <= res.flows.goodput_bps.sum() <= capacity, res.flows.goodput_bps.sum()

    droptail = copy.deepcopy(cfg)
    for ln in droptail["link"]:
        if ln["between"] == link["between"]:
            del ln["qdisc"], ln["red"]
    tail = series(pathtwin.simulate(droptail), name, after_s=10)
    # Loss-based flows only back off when the buffer overflows: it stays well filled.
    assert tail.packets.mean() >= limit / 2, tail.packets.describe()
    assert steady.packets.mean() < tail.packets.mean() / 4, (steady.packets.mean(), tail.packets.mean())


def check_cc(cfg: dict, res) -> None:
    """Each controller alone on an identical path: goodput within the link, all filling it
    (a buffer of more than one BDP); the loss-based ones' RTT reaching base + buffer/rate,
    Vegas's staying within its beta packets (+1) of the base, BBR's under two base RTTs."""
    paths = {tuple(p["between"]): p for p in cfg["path"]}
    fs = res.flow_series[res.flow_series.time_s >= 5]  # after slow start
    for f in cfg["flow"]:
        p = paths[(f["from"], f["to"])]
        link_rate = rate(p["abw"])
        base_ms = seconds(p["rtt"]) * 1e3
        packet_ms = MTU * 8 / link_rate * 1e3
        queue = parse_quantity("size", p["queue"], "queue")
        assert queue >= link_rate / 8 * seconds(p["rtt"]), "the file's claim needs a buffer of at least one BDP"
        row = res.flows.set_index("label").loc[f["label"]]
        cap = link_rate * SIM_PAYLOAD
        assert 0.9 * cap <= row.goodput_bps <= cap, (f["cc"], row.goodput_bps, cap)
        srtt = fs[fs.label == f["label"]].srtt_ms
        if f["cc"] in ("newreno", "cubic"):
            full_ms = base_ms + queue * 8 / link_rate * 1e3
            assert srtt.max() >= 0.9 * full_ms, (f["cc"], srtt.max(), full_ms)
            assert row.retransmits > 0, row
        elif f["cc"] == "vegas":
            beta = 3  # the "ns2" preset (README: alpha 1, beta 3), as the file says
            assert srtt.max() <= base_ms + (beta + 1) * packet_ms, (srtt.max(), base_ms)
            lost = fs[fs.label == f["label"]].retransmits  # cumulative
            assert lost.max() == lost.min(), "Vegas lost packets after slow start"
        elif f["cc"] == "bbr":
            assert srtt.max() < 2 * base_ms, srtt.max()
        else:
            pytest.fail(f"no expectation for cc {f['cc']!r}: add one")


def check_rio(cfg: dict, res) -> None:
    """Token buckets pass at most rate x time + depth as IN; RIO drops OUT packets first;
    each sender gets at least its profile, and both together stay within the link."""
    duration = seconds(cfg["run"]["duration"])
    [link] = [ln for ln in cfg["link"] if ln.get("qdisc") in ("rio", "frio")]
    q = queue_named(res, "->".join(link["between"]))
    assert q.out_arrivals > 0 and q.in_arrivals > 0, q
    # OUT packets take the drops: more of them, and a larger share of their arrivals.
    assert q.out_drops > q.in_drops and q.out_drops / q.out_arrivals > q.in_drops / q.in_arrivals, q
    markers = res.markers.set_index("marker")
    goodput = res.flows.groupby("src").goodput_bps.sum()
    for i, m in enumerate(cfg["marker"]):
        row = markers.loc[f"marker[{i}] {m['at']}"]
        bound = rate(m["rate"]) / 8 * duration + parse_quantity("size", m["depth"], "depth")
        assert row.in_bytes <= bound, (m["at"], row.in_bytes, bound)
        assert row.out_bytes > 0, row
        # Assured service: the profile's IP rate, as goodput.
        assert goodput[m["at"]] >= rate(m["rate"]) * SIM_PAYLOAD, (m["at"], goodput[m["at"]])
    ranked = sorted(cfg["marker"], key=lambda m: rate(m["rate"]))
    assert goodput[ranked[-1]["at"]] > goodput[ranked[0]["at"]], goodput
    assert goodput.sum() <= rate(link["rate"]) * SIM_PAYLOAD, goodput


def check_shared_reactivity(cfg: dict, res) -> None:
    """The [[shared]] class's flows together get the flow-weighted mean of its paths' ABW
    (NSDI'09 §2.3; one flow per path here); the reactive path's flows get its table's ABW
    for the number active, before and after the second one starts."""
    [shared] = cfg["shared"]
    abw = {tuple(p["between"]): p for p in cfg["path"]}
    members = [abw[(shared["source"], d)] for d in shared["destinations"]]
    flows = [f for f in cfg["flow"] if f["from"] == shared["source"] and f["to"] in shared["destinations"]]
    weights = [sum(1 for f in flows if f["to"] == p["between"][1]) for p in members]
    class_abw = sum(w * rate(p["abw"]) for w, p in zip(weights, members)) / sum(weights)
    labels = [f"{f['from']}->{f['to']}" for f in flows]
    end = seconds(cfg["run"]["duration"])
    # The second half of the run: a path's queue starts empty, and until the placeholders
    # fill it a flow can get that much more than the ABW (see the file's comments).
    together = summed_goodput(res, labels, end / 2, end + 1)
    assert together <= 1.05 * class_abw * SIM_PAYLOAD, (together, class_abw)  # ~ no more than the class's ABW
    assert together >= 0.90 * class_abw * SIM_PAYLOAD, (together, class_abw)
    independent = sum(rate(p["abw"]) for p in members)
    assert together < 0.75 * independent * SIM_PAYLOAD, (together, independent)

    [reactive] = [p for p in cfg["path"] if "reactivity" in p]
    table = {int(k): rate(v) for k, v in reactive["reactivity"].items()}
    dst = reactive["between"][1]
    rflows = [f for f in cfg["flow"] if f["to"] == dst]
    starts = sorted(seconds(f.get("start", "0s")) for f in rflows)
    assert starts[0] == 0 and len(starts) == 2, "the file's claim: one flow, then a second"
    rlabels = [f["label"] for f in rflows]
    # The second half of each phase, as the file's comments say: clear of the start-up
    # transient (the queue filling with placeholders) and of the second flow's slow start.
    one = summed_goodput(res, rlabels, starts[1] / 2, starts[1])
    two = summed_goodput(res, rlabels, (starts[1] + end) / 2, end + 1)
    assert abs(one - table[1] * SIM_PAYLOAD) <= 0.10 * table[1], (one, table[1])
    assert abs(two - table[2] * SIM_PAYLOAD) <= 0.10 * table[2], (two, table[2])


def check_replay(cfg: dict, res) -> None:
    """Each connection crosses its own pipe from its own address, runs every exchange, and
    no response comes sooner than physics allows on its pipe."""
    pipes = res.tables["pipes"].set_index("pipe")
    for i, p in enumerate(cfg["pipe"]):
        row = pipes.loc[i]
        assert (row.server, row.client) == tuple(p["between"]), row
        assert row.address == f"10.128.0.{i + 1}", row  # 10.128.0.1 + its index
    flows = res.flows.set_index("label")
    for f in cfg["flow"]:
        p = cfg["pipe"][f["pipe"]]
        down, up = parse_per_direction("rate", p["rate"], "rate")
        rtt = seconds(p["rtt"])
        row = flows.loc[f["label"]]
        ex = f["exchanges"]
        assert row.responses == len(ex), row
        assert row.bytes_delivered == sum(e[0] + e[1] for e in ex), row
        bounds, rounds = [], []
        for req, resp, header, server_delay, query_delay, _think in ex:
            first = header if 0 < header < resp else resp
            # The request's bytes up, one way; the server's delays; the response's bytes
            # down (what follows the query delay cannot leave before it), one way back.
            served = server_delay + max(resp * 8 / down, query_delay + (resp - first) * 8 / down)
            bounds.append(req * 8 / up + rtt + served)
            # Slow start from one segment at worst (after idle, too): n segments take
            # ceil(log2(n + 1)) windows, each waiting at most one RTT beyond the bytes' time.
            rounds.append(math.ceil(math.log2(math.ceil(resp / SIM_MSS) + 1)))
        lower = sum(bounds) / len(bounds)
        assert row.response_time_mean_s >= lower, (f["label"], row.response_time_mean_s, lower)
        if "loss" not in p:  # on a clean pipe, no more than slow start adds
            upper = lower + rtt * sum(rounds) / len(rounds)
            assert row.response_time_mean_s <= upper, (f["label"], row.response_time_mean_s, lower, upper)


def check_monarch(cfg: dict, res) -> None:
    """The transfer completes at a goodput under the target path's downstream rate, with
    the path's RTT, its packets carried to the target as probes (none straight to the
    receiver)."""
    m = cfg["monarch"]
    [target_path] = [p for p in cfg["path"] if set(p["between"]) == {m["sender"], m["target"]}]
    assert target_path["between"][0] == m["sender"], "down (towards the target) is the first value"
    down, up = parse_per_direction("rate", target_path["abw"], "abw")
    [flow] = cfg["flow"]
    size = parse_quantity("size", flow["bytes"], "bytes")
    f = res.flows.set_index("label").loc[flow["label"]]
    assert f.bytes_delivered == size and f.completion_s > 0, f
    cap = down * KERNEL_PAYLOAD
    # Under the path's rate, and not crawling: at least half of it over a 300 KB transfer
    # (slow start from IW10 takes a few of the 40 ms rounds of the ~0.6 s it lasts).
    assert 0.5 * cap <= f.goodput_bps <= cap, (f.goodput_bps, cap)
    base_ms = seconds(target_path["rtt"]) * 1e3
    full_ms = (MTU * 8 / down + 40 * 8 / up) * 1e3  # a full packet down, its RST up
    assert base_ms <= f.rtt_min_ms <= base_ms + full_ms + 2.0, (f.rtt_min_ms, base_ms)
    probes = queue_named(res, f"{m['sender']}->{m['target']}")
    assert probes.arrivals >= f.segments_sent and probes.arrival_bytes >= size, probes
    direct = queue_named(res, f"{m['sender']}->{m['receiver']}")
    assert direct.arrivals == 0, direct


def check_sweep(spec: dict, out: Path) -> None:
    """Every point of the grid done (the product of the axes), each point's flow within what
    the scenario's ABW and queue allow, its RTT never below its point's base RTT, and every
    controller of the grid in every RTT's partition."""
    run = json.loads((out / "sweep.json").read_text())
    expected = 1
    for values in spec["grid"].values():
        expected *= len(values)
    assert run["complete"] and run["counts"] == {"done": expected, "failed": 0, "pending": 0}, run["counts"]
    flows = pd.read_parquet(out / "flows")
    assert len(flows) == expected  # the scenario has one flow
    scenario = tomllib.loads((EXAMPLES / spec["scenario"]).read_text())
    abw = parse_per_direction("rate", scenario["path"][0]["abw"], "abw")[0]
    # At most the ABW over the run plus the queue's room: in path mode the placeholders hold
    # the path at its ABW once they fill the queue, which starts empty (a 5-s point gets up
    # to a quarter above the ABW that way; a 120-s run, within 2 % of it).
    queue = parse_quantity("size", spec["set"]["path[0].queue"], "queue")
    duration = seconds(spec["set"]["run.duration"])
    assert (flows.bytes_delivered <= abw / 8 * duration + queue).all(), flows.bytes_delivered.describe()
    for rtt_text, group in flows.groupby("path[0].rtt", observed=True):
        assert (group.rtt_min_ms >= seconds(str(rtt_text)) * 1e3).all(), (rtt_text, group.rtt_min_ms)
        assert set(group["tcp.cc"].astype(str)) == set(spec["grid"]["tcp.cc"])


def check_ground_truth(bottlenecks: list[str]) -> Callable:
    """The cross traffic alone: each bottleneck its comments name fills to its limit while
    the on/off flows are on and empties while they are off; with two, their occupancies
    correlate below 0.5 (where delay correlation would take them for one, the file's
    comments say); no other queue on the measured hosts' routes builds."""
    def check(cfg: dict, res) -> None:
        cross_hosts = {f["from"] for f in cfg["flow"]} | {f["to"] for f in cfg["flow"]}
        limits = {}
        for ln in cfg["link"]:
            a, b = ln["between"]
            qa, qb = parse_per_direction("queue", ln.get("queue", "100p"), "queue")  # the schema's default
            limits[f"{a}->{b}"], limits[f"{b}->{a}"] = -qa, -qb  # packets (all of these are)
        occupancy = res.queue_series.pivot_table(index="time_s", columns="queue", values="packets")
        occupancy = occupancy[occupancy.index >= 2]
        for name in bottlenecks:
            assert occupancy[name].max() >= limits[name] - 1, (name, occupancy[name].max())
            assert (occupancy[name] == 0).mean() >= 0.1, (name, (occupancy[name] == 0).mean())
        if len(bottlenecks) == 2:
            corr = occupancy[bottlenecks[0]].corr(occupancy[bottlenecks[1]])
            assert corr < 0.5, corr
        measured = [n for n in occupancy.columns if not set(n.split("->")) & cross_hosts]
        building = {n for n in measured if occupancy[n].max() > 0.25 * limits[n]}
        assert building == set(bottlenecks), building
    return check


# --- the registry ------------------------------------------------------------------------


@dataclass(frozen=True)
class Example:
    #: As the file's comments and the README give it (``sudo``: the emulator).
    command: str
    #: ``check(config, result)`` with the file's own config; the sweep's gets the spec and
    #: its output directory.
    check: Callable

    @property
    def emulator(self) -> bool:
        return self.command.startswith("sudo ")


EXAMPLES_RUN: dict[str, Example] = {
    "nsdi09-figure5.toml": Example("pathtwin sim examples/nsdi09-figure5.toml -o out/fig5", check_figure5),
    "nsdi09-table2.toml": Example("pathtwin sim examples/nsdi09-table2.toml -o out/table2", check_table2),
    "nsdi09-bad-queue.toml": Example("pathtwin sim examples/nsdi09-bad-queue.toml -o out/bad-queue", check_bad_queue),
    "nsdi09-small-queue.toml": Example("pathtwin sim examples/nsdi09-small-queue.toml -o out/small-queue",
                                       check_small_queue),
    "nsdi09-figure6.toml": Example("pathtwin sim examples/nsdi09-figure6.toml -o out/figure6", check_figure6),
    "red-dumbbell.toml": Example("pathtwin sim examples/red-dumbbell.toml -o out/red", check_red),
    "cc-comparison.toml": Example("pathtwin sim examples/cc-comparison.toml -o out/cc --plots", check_cc),
    "rio-markers.toml": Example("pathtwin sim examples/rio-markers.toml -o out/rio", check_rio),
    "shared-reactivity.toml": Example("pathtwin sim examples/shared-reactivity.toml -o out/shared --plots",
                                      check_shared_reactivity),
    "replay-pipes.toml": Example("pathtwin sim examples/replay-pipes.toml -o out/replay", check_replay),
    "monarch-target.toml": Example("sudo pathtwin emu run examples/monarch-target.toml -o out/monarch", check_monarch),
    "sweep-rtt-cc.toml": Example("pathtwin sweep examples/sweep-rtt-cc.toml -o out/sweep-rtt-cc", check_sweep),
    "groundtruth/campus.toml": Example("pathtwin sim examples/groundtruth/campus.toml -o out/campus",
                                       check_ground_truth(["r1->r2"])),
    "groundtruth/two-bottlenecks.toml": Example("pathtwin sim examples/groundtruth/two-bottlenecks.toml -o out/two",
                                                check_ground_truth(["r0->ra", "r0->rb"])),
    "groundtruth/three-sites.toml": Example("pathtwin sim examples/groundtruth/three-sites.toml -o out/three",
                                            check_ground_truth(["core1->core2", "core1->rc"])),
    "groundtruth/swarm.toml": Example("pathtwin sim examples/groundtruth/swarm.toml -o out/swarm",
                                      check_ground_truth(["core1->core2", "core1->rc"])),
}


def example_files() -> list[str]:
    return sorted(p.relative_to(EXAMPLES).as_posix() for p in EXAMPLES.rglob("*") if p.is_file())


def test_every_example_file_has_a_check():
    """A file added to examples/ without an entry here (its command and check) fails."""
    files = example_files()
    assert files, EXAMPLES
    assert set(files) == set(EXAMPLES_RUN), {"without a check": sorted(set(files) - set(EXAMPLES_RUN)),
                                            "checked but gone": sorted(set(EXAMPLES_RUN) - set(files))}


def test_each_file_and_the_readme_give_the_command_the_test_runs():
    readme = (REPO / "README.md").read_text()
    section = readme.split("\n## Examples\n", 1)[1].split("\n## ", 1)[0]
    for name, ex in EXAMPLES_RUN.items():
        text = (EXAMPLES / name).read_text()
        assert ex.command in text, (name, ex.command)
        row = next((ln for ln in section.splitlines() if ln.startswith(f"| `{name}` |")), None)
        assert row is not None, f"README's Examples table has no row for {name}"
        assert f"`{ex.command}`" in row, (name, row)


def run_example(name: str, tmp_path: Path):
    """Runs the example's command as typed (``sudo`` dropped: the test runs as root where it
    must), from a scratch directory holding an ``examples`` link, as from a checkout."""
    ex = EXAMPLES_RUN[name]
    argv = shlex.split(ex.command)
    if argv[0] == "sudo":
        argv = argv[1:]
    assert argv[0] == "pathtwin", ex.command
    (tmp_path / "examples").symlink_to(EXAMPLES)
    done = run_cli(*argv[1:], cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    out = tmp_path / argv[argv.index("-o") + 1]
    cfg = tomllib.loads((EXAMPLES / name).read_text())
    if argv[1] == "sweep":
        ex.check(cfg, out)
        return
    res = read_result_dir(out)
    ex.check(cfg, res)
    if "--plots" in argv:
        assert list(out.glob("*.png")), "--plots drew nothing"


@pytest.mark.parametrize("name", sorted(n for n, e in EXAMPLES_RUN.items() if not e.emulator))
def test_simulated_example(name, tmp_path):
    run_example(name, tmp_path)


@needs_root
@pytest.mark.parametrize("name", sorted(n for n, e in EXAMPLES_RUN.items() if e.emulator))
def test_emulated_example(name, tmp_path, no_namespace_left_behind):
    run_example(name, tmp_path)
