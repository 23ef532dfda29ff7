"""DiffServ markers from Python: a ``[[marker]]`` at a host tags a bulk flow, the ``markers``
table shows IN at the bucket's rate (the thesis's 296 KB per 400 ms = 5.92 Mbit/s), the
table is written to and read back from the result directory, and config mistakes are one
line naming the key."""

from __future__ import annotations

import pytest

import pathtwin
from pathtwin.results import columns, read_result_dir

SECONDS = 20


def config(**marker) -> dict:
    return {
        "hosts": ["a", "b"],
        "run": {"duration": f"{SECONDS}s"},
        "tcp": {"max_window": "64KB"},
        "path": [{"between": ["a", "b"], "rtt": "40ms", "abw": "10mbit", "mode": "link", "queue": "150KB"}],
        "flow": [{"from": "a", "to": "b", "app": "bulk"}],
        "marker": [{"at": "a", **marker}],
    }


def test_token_bucket_at_a_host_marks_the_bucket_rate_share_in(tmp_path):
    res = pathtwin.simulate(config(kind="token-bucket", interval="400ms", bucket="296KB"), out=tmp_path / "run")
    m = res.markers
    assert list(m.columns) == columns("markers")
    row = m.iloc[0]
    assert (row.marker, row.kind) == ("marker[0] a", "token-bucket")
    offered = (row.in_bytes + row.out_bytes) * 8 / SECONDS
    in_rate = row.in_bytes * 8 / SECONDS
    assert offered > 9e6, offered
    # IN = B/T; the IN share of what the host sent is (B/T) / offered.
    assert abs(in_rate / 5.92e6 - 1) < 0.02, in_rate
    assert abs(row.in_bytes / (row.in_bytes + row.out_bytes) - 5.92e6 / offered) < 0.02
    assert row.green_bytes == row.in_bytes and row.yellow_packets == 0
    back = read_result_dir(tmp_path / "run")
    assert "markers" in back.run["tables"]
    assert back.markers.to_dict("records") == m.to_dict("records")


def test_a_run_without_markers_has_an_empty_markers_table():
    cfg = config(kind="token-bucket", interval="400ms", bucket="296KB")
    del cfg["marker"]
    cfg["run"]["duration"] = "1s"
    assert len(pathtwin.simulate(cfg).markers) == 0


@pytest.mark.parametrize("marker, message", [
    ({"kind": "srtcm", "cir": "0mbit", "cbs": "3KB", "ebs": "3KB"}, "marker[0].cir: must be positive"),
    ({"kind": "trtcm", "cir": "2mbit", "cbs": "3KB", "pir": "1mbit", "pbs": "3KB"}, "marker[0].pir: 1mbit is below cir 2mbit"),
    ({"kind": "tcp-friendly", "interval": "400ms"}, "marker[0].budget: missing for kind = \"tcp-friendly\""),
])
def test_marker_config_errors_name_the_key(marker, message):
    with pytest.raises(pathtwin.PathtwinError) as e:
        pathtwin.simulate(config(**marker))
    assert str(e.value).endswith(message) and "\n" not in str(e.value), str(e.value)


def test_sim_command_prints_the_markers_table(tmp_path):
    import os
    import re

    from conftest import run_cli

    scen = tmp_path / "m.toml"
    scen.write_text("""
hosts = ["a", "b"]
[run]
duration = "4s"
[[path]]
between = ["a", "b"]
rtt = "40ms"
abw = "10mbit"
mode = "link"
[[flow]]
from = "a"
to = "b"
[[marker]]
at = "a"
kind = "token-bucket"
rate = "2mbit"
depth = "10KB"
""")
    r = run_cli("sim", scen, "-o", tmp_path / "out", env=dict(os.environ, COLUMNS="200"))
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if "marker[0] a" in ln)
    cells = re.split(r"\s{2,}", line.strip())  # columns are two or more spaces apart
    assert cells[1] == "token-bucket"
    # IN at most 2 Mbit/s plus the 10 KB bucket over 4 s (2.02); tokens that overflow the
    # bucket while slow start sends below 2 Mbit/s are lost, a few tens of milliseconds' worth.
    assert 1.95 < float(cells[2]) <= 2.02, line
