"""The emulator's ``flow_series``: the kernel's ``tcp_info`` of every emulated TCP flow over
time (root only; iperf3). Expectations come from the configured path (40 ms base RTT,
10 Mbit/s), the congestion control asked for, and iperf3's own report of the same transfer.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from conftest import default_sigint

pytestmark = [
    pytest.mark.usefixtures("no_namespace_left_behind"),
    pytest.mark.usefixtures("emulator"),
    pytest.mark.skipif(shutil.which("ip") is None, reason="needs iproute2"),
    pytest.mark.skipif(shutil.which("iperf3") is None, reason="needs iperf3"),
]

import pathtwin
from pathtwin.emulation import Emulation  # noqa: E402
from pathtwin.plot import flow_summary  # noqa: E402
from pathtwin.results import read_result_dir  # noqa: E402

BASE_RTT_MS = 40.0
INTERVAL_S = 0.1
SECONDS = 4
TWO_HOSTS = f"""
hosts = ["a", "b"]
[run]
sample_interval = "{int(INTERVAL_S * 1000)}ms"
[[path]]
between = ["a", "b"]
rtt = "{int(BASE_RTT_MS)}ms"
abw = "10mbit"
"""


def iperf_run(out, cc: str) -> dict:
    """An emulation of TWO_HOSTS under ``cc`` with one iperf3 transfer a -> b; returns
    iperf3's JSON report (the results are in ``out``)."""
    with Emulation(TWO_HOSTS, out=out, cc=cc) as net:
        net["b"].serve(["iperf3", "-s", "-1"], 5201)
        done = net["a"].run(["iperf3", "-c", "b", "-t", str(SECONDS), "-J"], timeout=SECONDS + 30)
    return json.loads(done.stdout)


@pytest.mark.parametrize("cc", ["reno", "cubic"])
def test_flow_series_of_an_iperf3_transfer_matches_the_path_and_iperf3(tmp_path, cc):
    report = iperf_run(tmp_path / "run", cc)
    assert (tmp_path / "run" / "flow_series.parquet").is_file()
    res = read_result_dir(tmp_path / "run")
    fs = res.flow_series
    # iperf3's data connection is the a -> b flow that carried the most bytes (the other
    # a -> b flow is its control connection).
    ab = fs[(fs.src == "a") & (fs.dst == "b")]
    data_label = ab.groupby("label").delivered_bytes.max().idxmax()
    flow = fs[fs.label == data_label].sort_values("time_s")
    assert set(flow.cc) == {cc}

    # One row per interval while it sends: the rows up to its last delivered byte.
    sending = flow[flow.time_s <= flow.time_s[flow.delivered_bytes == flow.delivered_bytes.max()].min()]
    expected_rows = SECONDS / INTERVAL_S
    assert 0.75 * expected_rows <= len(sending) <= 1.25 * expected_rows + 2, len(sending)

    # RTT: never below the configured base RTT; the least RTT within a few ms of it (one
    # 1500-byte packet's serialization at 10 Mbit/s is 1.2 ms).
    assert (flow.srtt_ms >= BASE_RTT_MS).all(), flow.srtt_ms.min()
    assert BASE_RTT_MS <= flow.min_rtt_ms.min() <= BASE_RTT_MS + 3, flow.min_rtt_ms.min()

    # cwnd in bytes: whole segments of the connection's MSS, positive, and it moves.
    assert (flow.cwnd_bytes > 0).all()
    assert flow.cwnd_bytes.nunique() > 1
    assert ((flow.cwnd_bytes % flow.mss) == 0).all()
    assert (flow.cwnd_bytes == flow.cwnd_segments * flow.mss).all()

    # Delivered bytes and throughput against what iperf3 counted at the receiver.
    received = report["end"]["sum_received"]
    assert abs(flow.delivered_bytes.max() - received["bytes"]) <= 0.10 * received["bytes"]
    summary = flow_summary(res).set_index("label").loc[data_label]
    assert summary.cc == cc
    assert abs(summary.throughput_bps - received["bits_per_second"]) <= 0.10 * received["bits_per_second"], (
        summary.throughput_bps, received["bits_per_second"])

    # Only the sender's view: the receiver's socket (b, port 5201 -> a's port) never sent data.
    data_port = int(flow.src_port.iloc[0])
    assert fs[(fs.src == "b") & (fs.dst_port == data_port)].empty


# A receiver that counts what it got and a sender that writes N bytes and closes, run inside
# the hosts (no dependency beyond Python).
SINK = """
import socket
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind(("::", 7100))
s.listen(1)
print("ready", flush=True)
c, _ = s.accept()
n = 0
while True:
    b = c.recv(65536)
    if not b:
        break
    n += len(b)
print(n, flush=True)
"""
SOURCE = """
import socket, sys
c = socket.create_connection((sys.argv[1], 7100))
c.sendall(b"x" * int(sys.argv[2]))
c.shutdown(socket.SHUT_WR)
c.recv(1)
c.close()
"""


def test_a_flow_shorter_than_the_sample_interval_is_recorded_with_every_byte(tmp_path):
    """With a 2-s interval, a 30 000-byte transfer (a few RTTs) opens and closes between two
    samples: only the kernel's destroy notification can record it, with its final state."""
    size = 30_000
    topo = TWO_HOSTS.replace(f'sample_interval = "{int(INTERVAL_S * 1000)}ms"', 'sample_interval = "2s"')
    with Emulation(topo, out=tmp_path / "run", cc="reno") as net:
        sink = net["b"].popen([os.sys.executable, "-c", SINK], stdout=subprocess.PIPE, text=True)
        assert sink.stdout.readline().strip() == "ready"
        net["a"].run([os.sys.executable, "-c", SOURCE, "b", str(size)], check=True, timeout=30)
        received = int(sink.stdout.readline())
        sink.wait(timeout=10)
        # Give the kernel time to free the closed socket before the emulation stops.
        time.sleep(0.5)
    assert received == size
    fs = read_result_dir(tmp_path / "run").flow_series
    flow = fs[(fs.src == "a") & (fs.dst == "b") & (fs.dst_port == 7100)]
    assert len(flow) >= 1
    assert flow.delivered_bytes.max() == size
    assert set(flow.cc) == {"reno"}
    assert (flow.srtt_ms >= BASE_RTT_MS).all()


def test_ctrl_c_during_a_transfer_keeps_the_series_measured_so_far(tmp_path):
    out = tmp_path / "run"
    script = tmp_path / "hold.py"
    script.write_text(
        "import subprocess, time\n"
        "from pathtwin.emulation import Emulation\n"
        f"with Emulation({TWO_HOSTS!r}, out={str(out)!r}, cc='reno') as net:\n"
        "    net['b'].serve(['iperf3', '-s', '-1'], 5201)\n"
        "    net['a'].popen(['iperf3', '-c', 'b', '-t', '60'], stdout=subprocess.DEVNULL)\n"
        "    print('sending', flush=True)\n"
        "    time.sleep(60)\n"
    )
    p = subprocess.Popen([os.sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=default_sigint)
    assert p.stdout.readline().strip() == "sending"
    time.sleep(2.0)
    p.send_signal(signal.SIGINT)
    p.wait(timeout=60)
    fs = read_result_dir(out).flow_series
    data = fs[(fs.src == "a") & (fs.dst == "b")]
    # The transfer was cut after about 2 s at most 10 Mbit/s: rows and bytes up to then.
    assert len(data) >= 10
    assert 0 < data.delivered_bytes.max() <= 10e6 / 8 * data.time_s.max()


def send(net: Emulation, size: int = 300_000) -> None:
    """a sends ``size`` bytes to b over a running emulation of TWO_HOSTS."""
    sink = net["b"].popen([os.sys.executable, "-c", SINK], stdout=subprocess.PIPE, text=True)
    assert sink.stdout.readline().strip() == "ready"
    net["a"].run([os.sys.executable, "-c", SOURCE, "b", str(size)], check=True, timeout=30)
    assert int(sink.stdout.readline()) == size
    sink.wait(timeout=10)


def transfer_run(out) -> Emulation:
    """An emulation of TWO_HOSTS under reno in which a sends 300 000 bytes to b; returns it
    stopped (its tables in ``out``, or only in memory when ``out`` is None)."""
    with Emulation(TWO_HOSTS, out=out, cc="reno") as net:
        send(net)
    return net


def test_flow_series_written_by_the_emulator_has_the_shared_schema_and_every_row(tmp_path):
    """With a result directory the native side writes ``flow_series`` itself (a long run's
    largest table, which as Python objects cost gigabytes). Its file must have the columns
    declared for it in Rust (the simulator's ``flow_series`` columns first, then the
    kernel's), hold the rows a run kept in memory holds, and be what
    ``Emulation.flow_series()`` returns."""
    import pyarrow.parquet as pq

    from pathtwin.results import columns

    native = transfer_run(tmp_path / "native")
    assert "flow_series" in native.results["written"]
    # No table written comes back as Python objects too (a long run's would be a memory peak).
    assert {"flow_series", "queue_series", "packet_flows"} <= set(native.results["written"])
    assert not set(native.results["tables"]) & set(native.results["written"]), native.results["tables"].keys()
    assert len(native.table("packet_flows")) == pq.read_metadata(tmp_path / "native" / "packet_flows.parquet").num_rows
    from_file = pq.read_table(tmp_path / "native" / "flow_series.parquet")
    assert from_file.num_rows > 0
    assert "flow_series" in read_result_dir(tmp_path / "native").run["tables"]
    assert from_file.schema.names == columns("flow_series", engine="emu")
    assert from_file.schema.names[:len(columns("flow_series"))] == columns("flow_series")

    in_memory = transfer_run(None)
    kept = in_memory.results["tables"]["flow_series"]
    assert list(kept) == columns("flow_series", engine="emu")
    # The same transfer, sampled every 100 ms in both runs: the row counts differ by at most
    # the samples of the connection's first and last moments.
    assert abs(len(kept["time_s"]) - from_file.num_rows) <= 3, (len(kept["time_s"]), from_file.num_rows)
    flow = native.flow_series()
    assert len(flow) == from_file.num_rows
    sent = flow[(flow.src == "a") & (flow.dst_port == 7100)]
    assert sent.delivered_bytes.max() == 300_000
    assert set(sent.cc) == {"reno"}


def test_a_flow_series_file_that_cannot_be_written_loses_no_row(tmp_path):
    """When the native side cannot write ``flow_series.parquet`` (here a directory is in the
    way), the rows come back to Python with a warning; writing the result directory then
    fails with one line naming the file, and ``results`` still holds every row."""
    from pathtwin.errors import PathtwinError

    (tmp_path / "run" / "flow_series.parquet").mkdir(parents=True)
    net = Emulation(TWO_HOSTS, out=tmp_path / "run", cc="reno")
    with pytest.raises(PathtwinError, match=r"flow_series\.parquet: cannot write"):
        with net:
            send(net)
    assert "flow_series" not in net.results["written"]
    kept = net.results["tables"]["flow_series"]
    assert len(kept["time_s"]) > 0
    assert len(net.flow_series()) == len(kept["time_s"])
    assert any("flow_series.parquet: cannot write" in w for w in net.results["warnings"])
    # The other tables were written, and run.json lists them.
    assert "queues" in net.results["written"] and (tmp_path / "run" / "queues.parquet").exists()
