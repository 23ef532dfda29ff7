"""Congestion controllers as a user selects them: `[tcp] cc`, `[[flow]] cc`, the per-controller
tables (`[tcp.vegas]`, `[tcp.cubic]`, `[tcp.bic]`, `[tcp.monaco]`), one-line errors for names and parameters
an engine cannot honour, and each controller's defining behaviour on a simulated path."""

from __future__ import annotations


import pandas as pd
import pytest

import pathtwin
from conftest import needs_root, run_cli, untimed

BASE = """
hosts = ["a", "b"]
[run]
duration = "{duration}"
sample_interval = "100ms"
[[path]]
between = ["a", "b"]
rtt = "{rtt}"
abw = "{abw}"
queue = "{queue}"
mode = "link"
"""


def scenario(tmp_path, extra: str, duration="10s", rtt="40ms", abw="10mbit", queue="200p"):
    p = tmp_path / "s.toml"
    p.write_text(BASE.format(duration=duration, rtt=rtt, abw=abw, queue=queue) + extra)
    return p


def test_every_simulator_controller_runs_and_is_reported(tmp_path):
    names = ["reno", "newreno", "vegas", "bic", "cubic", "bbr", "monaco"]
    flows = "".join(f'[[flow]]\nfrom = "a"\nto = "b"\ncc = "{n}"\nlabel = "{n}"\n' for n in names)
    out = tmp_path / "out"
    r = run_cli("sim", scenario(tmp_path, flows), "-o", out)
    assert r.returncode == 0, r.stderr
    f = pd.read_parquet(out / "flows.parquet")
    assert sorted(f.cc) == sorted(names)
    # Seven flows share 10 Mbit/s: together they fill it (goodput is ~95 % of the IP rate).
    assert f.goodput_bps.sum() > 0.85 * 10e6, f[["cc", "goodput_bps"]]
    assert (f.goodput_bps > 0).all()


def test_unknown_controller_is_one_line_naming_key_and_the_simulators_names(tmp_path):
    r = run_cli("sim", scenario(tmp_path, '[tcp]\ncc = "hybla"\n[[flow]]\nfrom = "a"\nto = "b"\n'), "-o", tmp_path / "o")
    assert r.returncode == 2
    line = r.stderr.strip()
    assert "\n" not in line, line
    assert "tcp.cc" in line and '"hybla"' in line
    for n in ("reno", "newreno", "vegas", "cubic", "bic", "bbr", "monaco"):
        assert n in line, line
    # The flow's own shortcut is named as such.
    r = run_cli("sim", scenario(tmp_path, '[[flow]]\nfrom = "a"\nto = "b"\ncc = "hybla"\n'), "-o", tmp_path / "o")
    assert r.returncode == 2 and "flow[0].cc" in r.stderr, r.stderr


@pytest.mark.parametrize("table, key", [
    ('[tcp.cubic]\nbeta = 1.5\n', "tcp.cubic.beta"),
    ('[tcp.vegas]\nalpha = 4\nbeta = 2\n', "tcp.vegas.beta"),
    ('[tcp.bic]\nmax_increment = 0\n', "tcp.bic.max_increment"),
    ('[tcp.vegas]\nalpah = 1\n', "tcp.vegas.alpah"),
    ('[tcp.monaco]\nk = 2\n', "tcp.monaco.k"),
    ('[tcp.monaco]\ntarget = 0\n', "tcp.monaco.target"),
    ('[tcp.cubic]\npreset = "ns3"\n', "tcp.cubic.preset"),
    ('[tcp.cubic]\nrtt_lookahead = "yes"\n', "tcp.cubic.rtt_lookahead"),
])
def test_bad_parameters_name_their_key(tmp_path, table, key):
    cc = key.split(".")[1]
    text = f'[tcp]\ncc = "{cc}"\n{table}[[flow]]\nfrom = "a"\nto = "b"\n'
    r = run_cli("sim", scenario(tmp_path, text), "-o", tmp_path / "o")
    assert r.returncode == 2 and key in r.stderr and "\n" not in r.stderr.strip(), r.stderr


def test_cubic_ns2_preset_is_linux_2_6_without_the_rtt_lookahead():
    """`preset = "ns2"` (ns-2.35's port of Linux 2.6's tcp_cubic.c, which never adds the
    round trip of look-ahead) is exactly `linux-2.6` with `rtt_lookahead = false`; on a long
    path that trails the curve by a round trip, so it delivers less than `linux-2.6`."""
    text = BASE.format(duration="30s", rtt="200ms", abw="20mbit", queue="20p") + (
        '[tcp]\ncc = "cubic"\n[tcp.cubic]\n{}\n[[flow]]\nfrom = "a"\nto = "b"\n')
    def run(table):
        r = pathtwin.simulate(text.format(table))
        return int(r.flows["bytes_delivered"][0]), list(r.flow_series["cwnd_bytes"])
    ns2 = run('preset = "ns2"')
    assert ns2 == run('preset = "linux-2.6"\nrtt_lookahead = false')
    ahead = run('preset = "linux-2.6"')
    assert ns2[0] < ahead[0], (ns2[0], ahead[0])


def test_a_table_no_flow_uses_is_an_error(tmp_path):
    text = '[tcp]\ncc = "cubic"\n[tcp.vegas]\nalpha = 2\n[[flow]]\nfrom = "a"\nto = "b"\n'
    r = run_cli("sim", scenario(tmp_path, text), "-o", tmp_path / "o")
    assert r.returncode == 2 and "tcp.vegas" in r.stderr and "no flow" in r.stderr, r.stderr


def _steady(res, start_s=5.0):
    fs = res.flow_series
    return fs[fs.time_s > start_s]


def test_vegas_keeps_between_alpha_and_beta_packets_queued(tmp_path):
    """Vegas's equilibrium (Brakmo & Peterson): it holds diff = cwnd·(1 − baseRTT/RTT) between α
    and β packets, i.e. that many of its packets wait in the bottleneck queue. With the ns-2
    preset (α = 1, β = 3) and with the Linux one (α = 2, β = 4) the queue, read from the
    bottleneck's own occupancy, lands in the preset's band (±1 packet for the once-per-RTT
    adjustment), and there is no loss."""
    for preset, (alpha, beta) in {"ns2": (1, 3), "linux": (2, 4)}.items():
        cfg = {
            "hosts": ["a", "b"],
            "run": {"duration": "20s", "sample_interval": "50ms"},
            "tcp": {"cc": "vegas", "vegas": {"preset": preset}, "mss": 1460, "delayed_ack": False},
            "path": [{"between": ["a", "b"], "rtt": "40ms", "abw": "10mbit", "queue": "200p",
                      "mode": "link"}],
            "flow": [{"from": "a", "to": "b"}],
        }
        res = pathtwin.simulate(cfg)
        qs = res.queue_series
        q = qs[(qs.queue == "a->b") & (qs.time_s > 5)].packets
        assert alpha - 1 <= q.mean() <= beta + 1, (preset, q.describe())
        assert int(res.flows.retransmits.sum()) == 0
        assert res.flows.goodput_bps.iloc[0] > 0.9 * 10e6 * 1460 / 1500


def test_cubic_and_bic_regain_a_long_fat_pipe_faster_than_reno():
    """The reason BIC and CUBIC exist: after a loss on a path with a large bandwidth-delay
    product, Reno grows one segment per RTT, CUBIC and BIC grow towards the old maximum in
    a time independent of the RTT. On 100 Mbit/s, 100 ms (BDP ≈ 830 segments) with a queue
    of a fifth of the BDP, both get well above Reno's goodput over 60 s."""
    def goodput(cc):
        cfg = {
            "hosts": ["a", "b"],
            "run": {"duration": "60s"},
            "tcp": {"cc": cc, "max_window": "64MiB", "rcv_window": "64MiB"},
            "path": [{"between": ["a", "b"], "rtt": "100ms", "abw": "100mbit",
                      "queue": "250KB", "mode": "link"}],
            "flow": [{"from": "a", "to": "b"}],
        }
        return float(pathtwin.simulate(cfg).flows.goodput_bps.iloc[0])

    reno, cubic, bic = goodput("reno"), goodput("cubic"), goodput("bic")
    assert cubic > 1.1 * reno and bic > 1.1 * reno, (reno, cubic, bic)


def test_bbr_does_not_fill_a_deep_buffer(tmp_path):
    """BBR paces at its bottleneck-bandwidth estimate and caps its flight at about 2·BDP, so a
    deep buffer stays mostly empty; Reno fills it until loss. Same path, RTT read from the
    flows' samples."""
    def mean_rtt(cc):
        cfg = {
            "hosts": ["a", "b"],
            "run": {"duration": "20s"},
            "tcp": {"cc": cc},
            "path": [{"between": ["a", "b"], "rtt": "40ms", "abw": "10mbit", "queue": "500p",
                      "mode": "link"}],
            "flow": [{"from": "a", "to": "b"}],
        }
        res = pathtwin.simulate(cfg)
        return float(_steady(res).srtt_ms.mean()), float(res.flows.goodput_bps.iloc[0])

    bbr_rtt, bbr_goodput = mean_rtt("bbr")
    reno_rtt, _ = mean_rtt("reno")
    assert bbr_goodput > 0.9 * 10e6 * 1460 / 1500
    assert bbr_rtt < 2.5 * 40 and reno_rtt > 2 * bbr_rtt, (bbr_rtt, reno_rtt)


MONACO_DUMBBELL = """
hosts = ["a0", "a1", "a2", "a3", "b"]
routers = ["r"]
[run]
duration = "20s"
sample_interval = "100ms"
[tcp]
cc = "monaco"
[[link]]
between = ["r", "b"]
rate = "10mbit"
delay = "10ms"
queue = "200p"
qdisc = "{qdisc}"
"""


def _monaco_dumbbell(tmp_path, qdisc: str):
    text = MONACO_DUMBBELL.format(qdisc=qdisc)
    for i in range(4):
        text += f'[[link]]\nbetween = ["a{i}", "r"]\nrate = "1gbit"\ndelay = "{1 + 5 * i}ms"\nqdisc = "{qdisc}"\n'
        text += f'[[flow]]\nfrom = "a{i}"\nto = "b"\nlabel = "f{i}"\n'
    p = tmp_path / f"monaco-{qdisc}.toml"
    p.write_text(text)
    warnings = []
    return pathtwin.simulate(p, on_warning=warnings.append), warnings


def test_monaco_keeps_its_target_per_flow_behind_a_strict_priority_router(tmp_path):
    """Monaco's estimate is Little's law at the receiver: with its probes served ahead of data,
    each of four flows keeps a* = 3 packets queued whatever its RTT (1 to 16 ms of access
    delay), so the bottleneck holds about 12 packets, stays full and loses nothing, and the
    flows share it equally. Behind a plain FIFO the probe waits with the data, the estimate
    reads no queue, and the windows grow until the 200-packet buffer overflows, and the
    simulator says why."""
    res, warnings = _monaco_dumbbell(tmp_path, "prio")
    assert warnings == []
    q = res.queue_series[res.queue_series.queue == "r->b"]
    steady = q[q.time_s > 10]
    assert 0.8 * 12 <= steady.packets.mean() <= 1.3 * 12, steady.packets.mean()
    assert q.drops.sum() == 0
    shares = _steady(res, 10).groupby("label").goodput_bps.mean()
    assert shares.sum() > 0.9 * 10e6 and shares.max() < 1.15 * shares.min(), shares
    fifo, warnings = _monaco_dumbbell(tmp_path, "droptail")
    assert fifo.queue_series.drops.sum() > 0 and fifo.flows.retransmits.sum() > 0
    # The user is told why, once per flow entry.
    assert len(warnings) == 4 and all('qdisc = "prio"' in w and "droptail" in w for w in warnings), warnings


def test_same_seed_same_results_for_every_controller():
    cfg = {
        "hosts": ["a", "b"],
        "run": {"duration": "5s", "seed": 7},
        "path": [{"between": ["a", "b"], "rtt": "30ms", "abw": "8mbit", "queue": "30p", "loss": "0.5%"}],
        "flow": [{"from": "a", "to": "b", "cc": n} for n in ("vegas", "bic", "cubic", "bbr", "monaco")],
    }
    a, b = pathtwin.simulate(cfg), pathtwin.simulate(cfg)
    pd.testing.assert_frame_equal(a.flow_series, b.flow_series)


@untimed
@needs_root
def test_emulator_rejects_simulator_names_and_tables():
    """The emulator runs the kernel's controllers: a name the kernel lacks lists the kernel's
    names, and a simulator parameter table is refused rather than silently ignored."""
    from pathtwin.emulation import Emulation
    from pathtwin.errors import PathtwinError

    topo = BASE.format(duration="1s", rtt="10ms", abw="10mbit", queue="50p")
    available = open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split()
    with pytest.raises(PathtwinError, match=r"tcp\.cc: the kernel has no congestion control \"vegas\"") as e:
        Emulation(topo + '[tcp]\ncc = "vegas"\n').start()
    assert all(n in str(e.value) for n in available), e.value
    with pytest.raises(PathtwinError, match=r"tcp\.cubic: the emulator runs the kernel's congestion control"):
        Emulation(topo + '[tcp]\ncc = "cubic"\n[tcp.cubic]\nbeta = 0.8\n').start()
