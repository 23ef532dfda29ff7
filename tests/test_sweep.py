"""`pathtwin sweep` and `pathtwin.sweep`, as a user runs them: a point's tables are those of
the same config simulated alone, the partition columns carry the axis values, a killed sweep
resumes with only the points it had not finished and ends as an uninterrupted one, a point the
schema refuses fails alone with its error line, and a bad spec is one line.

Every sweep here runs on one Dask worker (the machine's other core stays free)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pandas as pd
import pytest

import pathtwin
from conftest import EXAMPLES, needs_root, run_cli

SCENARIO = EXAMPLES / "nsdi09-figure5.toml"


def _write_spec(tmp_path: Path, body: str, name: str = "spec.toml") -> Path:
    spec = tmp_path / name
    spec.write_text(f'scenario = "{SCENARIO}"\n' + body)
    return spec


def _by_hand(**keys) -> dict:
    """The scenario with keys set directly in its dict, as a user would without a sweep."""
    cfg = tomllib.loads(SCENARIO.read_text())
    for key, value in keys.items():
        node = cfg
        *parents, last = key.split(".")
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node.setdefault(p, {})
        node[last] = value
    return cfg


def _rows(frame: pd.DataFrame, axes: dict) -> pd.DataFrame:
    """The rows of one point (its axis values), without the partition columns."""
    mask = pd.Series(True, index=frame.index)
    for k, v in axes.items():
        mask &= frame[k] == v
    return frame[mask].drop(columns=list(axes)).reset_index(drop=True)


def test_each_point_is_the_same_config_simulated_alone(tmp_path):
    spec = _write_spec(tmp_path, """
[set]
"run.duration" = "4s"
"path[0].queue" = "96KB"
[grid]
"path[0].rtt" = ["20ms", "80ms"]
"tcp.cc" = ["newreno", "cubic"]
""")
    res = pathtwin.sweep(spec, tmp_path / "run", workers=1)
    assert res.failed == 0
    # The partition columns carry exactly the grid's combinations.
    points = set(map(tuple, res.flows[["path[0].rtt", "tcp.cc"]].drop_duplicates().values.tolist()))
    assert points == {("20ms", "newreno"), ("20ms", "cubic"), ("80ms", "newreno"), ("80ms", "cubic")}
    for rtt in ("20ms", "80ms"):
        for cc in ("newreno", "cubic"):
            alone = tmp_path / f"alone-{rtt}-{cc}"
            pathtwin.simulate(_by_hand(**{"run.duration": "4s", "path.0.queue": "96KB", "path.0.rtt": rtt, "tcp.cc": cc}),
                              out=alone)
            axes = {"path[0].rtt": rtt, "tcp.cc": cc}
            for table in ("flows", "flow_series", "queues"):
                expected = pd.read_parquet(alone / f"{table}.parquet")
                pd.testing.assert_frame_equal(_rows(res.tables[table], axes), expected, check_like=False)
    # Different settings gave different results: the keys were really applied.
    assert res.flows.groupby("path[0].rtt").rtt_min_ms.min().to_dict()["80ms"] > 70
    assert res.flows.groupby("path[0].rtt").rtt_min_ms.min().to_dict()["20ms"] < 30
    # A reader of the directory sees the same tables.
    again = pathtwin.read_sweep(tmp_path / "run")
    pd.testing.assert_frame_equal(again.flows, res.flows)


def test_cases_crossed_with_a_grid_and_seed_shorthand(tmp_path):
    spec = _write_spec(tmp_path, """
[set]
"run.duration" = "2s"
[grid]
seed = [3, 4]
[[case]]
"path[0].abw" = "409kbit/4530kbit"
"flow[0].cc" = "vegas"
[[case]]
"path[0].abw" = "1mbit/4530kbit"
"flow[0].cc" = "cubic"
""")
    res = pathtwin.sweep(spec, tmp_path / "run", workers=1)
    assert len(res.run["points"]) == 4
    seen = set()
    for p in res.run["points"]:
        run = json.loads((tmp_path / "run" / "points" / f"{p['id']}.json").read_text())
        # Each point's resolved config (its own run.json) holds its case's and grid's values.
        assert run["config"]["run"]["seed"] == p["values"]["seed"]
        assert run["config"]["flow"][0]["cc"] == p["values"]["flow[0].cc"]
        seen.add((p["values"]["path[0].abw"], p["values"]["flow[0].cc"], p["values"]["seed"]))
    assert seen == {("409kbit/4530kbit", "vegas", 3), ("409kbit/4530kbit", "vegas", 4),
                    ("1mbit/4530kbit", "cubic", 3), ("1mbit/4530kbit", "cubic", 4)}
    # A value with "/" survives the hive directory name; the seed column is an integer.
    assert set(res.flows["path[0].abw"]) == {"409kbit/4530kbit", "1mbit/4530kbit"}
    assert set(res.flows["seed"]) == {3, 4}
    assert set(res.flows["cc"]) == {"vegas", "cubic"}
    assert (res.flows.groupby("path[0].abw").goodput_bps.mean()["1mbit/4530kbit"]
            > res.flows.groupby("path[0].abw").goodput_bps.mean()["409kbit/4530kbit"])


def test_the_example_spec_runs(tmp_path):
    spec = tomllib.loads((EXAMPLES / "sweep-rtt-cc.toml").read_text())
    res = pathtwin.sweep(EXAMPLES / "sweep-rtt-cc.toml", tmp_path / "run", workers=1)
    grid = spec["grid"]
    expected = len(grid["path[0].rtt"]) * len(grid["tcp.cc"]) * len(grid["seed"])
    assert res.failed == 0 and len(res.run["points"]) == expected
    assert len(res.flows) == expected  # the scenario has one flow
    assert set(res.flows["path[0].rtt"]) == set(grid["path[0].rtt"])


def test_a_sweep_takes_no_fixed_port(tmp_path):
    """The local cluster's scheduler serves HTTP on a port the system picks: with 8787 (Dask's
    default) taken, as by another sweep or a user's own cluster, a sweep neither fails nor
    warns that it moved (it did, in every `make test` whose workers ran two sweeps at once)."""
    import socket
    import warnings

    with socket.socket() as held:
        try:
            held.bind(("", 8787))
        except OSError:
            pass  # someone else has it already: the condition under test holds as well
        else:
            held.listen()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = pathtwin.sweep(EXAMPLES / "sweep-rtt-cc.toml", tmp_path / "run", workers=1)
    assert res.failed == 0
    moved = [str(w.message) for w in caught if "already in use" in str(w.message)]
    assert not moved, moved


LONG_SPEC = """
[scenario]
hosts = ["a", "b"]
[scenario.run]
duration = "600s"
[[scenario.path]]
between = ["a", "b"]
rtt = "20ms"
abw = "50mbit"
[[scenario.flow]]
from = "a"
to = "b"
[[scenario.flow]]
from = "a"
to = "b"
[grid]
"tcp.cc" = ["newreno", "cubic"]
"path[0].rtt" = ["10ms", "20ms", "30ms", "40ms"]
"""


def test_a_killed_sweep_resumes_with_only_the_rest(tmp_path):
    spec = tmp_path / "long.toml"
    spec.write_text(LONG_SPEC)
    out = tmp_path / "run"
    child = subprocess.Popen([sys.executable, "-m", "pathtwin.cli", "sweep", str(spec), "-o", str(out), "-j", "1", "-q"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    done: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and child.poll() is None:
        try:
            record = json.loads((out / "sweep.json").read_text())
        except (OSError, json.JSONDecodeError):
            record = {"points": []}
        done = [p["id"] for p in record["points"] if p["status"] == "done"]
        if len(done) >= 2:
            break
        time.sleep(0.05)
    # Killed outright, workers and all (as a lost session or a batch system's kill would).
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    assert 2 <= len(done) < 8, f"the sweep was not killed midway ({len(done)} done)"
    record = json.loads((out / "sweep.json").read_text())
    done = [p["id"] for p in record["points"] if p["status"] == "done"]
    assert not record["complete"]
    stamps = {pid: (out / "points" / f"{pid}.json").stat().st_mtime_ns for pid in done}

    again = run_cli("sweep", spec, "-o", out, "-j", "1", "-q")
    assert again.returncode == 0, again.stderr
    record = json.loads((out / "sweep.json").read_text())
    assert record["complete"] and record["counts"] == {"done": 8, "failed": 0, "pending": 0}
    # The points finished before the kill were not run again; the others were.
    for pid, stamp in stamps.items():
        assert (out / "points" / f"{pid}.json").stat().st_mtime_ns == stamp, pid
    assert len(list((out / "points").glob("*.json"))) == 8

    whole = pathtwin.sweep(spec, tmp_path / "whole", workers=1)
    resumed = pathtwin.read_sweep(out)
    for table, key in (("flows", "flow"), ("queues", "queue"), ("flow_series", ["flow", "time_s"])):
        keys = key if isinstance(key, list) else [key]
        pd.testing.assert_frame_equal(resumed.tables[table].sort_values(["tcp.cc", "path[0].rtt", *keys]).reset_index(drop=True),
                                      whole.tables[table].sort_values(["tcp.cc", "path[0].rtt", *keys]).reset_index(drop=True))


def test_an_invalid_point_fails_alone_with_its_error_line(tmp_path):
    spec = _write_spec(tmp_path, """
[set]
"run.duration" = "2s"
[grid]
"path[0].rtt" = ["20ms", "-5ms", "50ms"]
""")
    out = tmp_path / "run"
    r = run_cli("sweep", spec, "-o", out, "-j", "1", "-q")
    assert r.returncode == 1
    assert "3 points: 2 done, 1 failed" in r.stdout
    record = json.loads((out / "sweep.json").read_text())
    status = {p["values"]["path[0].rtt"]: p for p in record["points"]}
    assert status["-5ms"]["status"] == "failed"
    assert "path[0].rtt" in status["-5ms"]["error"] and "negative" in status["-5ms"]["error"]
    assert "\n" not in status["-5ms"]["error"]
    assert status["20ms"]["status"] == status["50ms"]["status"] == "done"
    assert status["-5ms"]["error"] in r.stdout
    flows = pathtwin.read_sweep(out).flows
    assert set(flows["path[0].rtt"]) == {"20ms", "50ms"}

    # A point that passes the schema but fails when its network is built fails alone too.
    spec2 = _write_spec(tmp_path, """
[set]
"run.duration" = "2s"
[grid]
"path[0].rtt" = ["20ms", "300ms"]
""", "spec2.toml")
    r = run_cli("sweep", spec2, "-o", tmp_path / "run2", "-j", "1", "-q")
    assert r.returncode == 1 and "2 points: 1 done, 1 failed" in r.stdout
    failed = [p for p in json.loads((tmp_path / "run2" / "sweep.json").read_text())["points"] if p["status"] == "failed"]
    assert [p["values"]["path[0].rtt"] for p in failed] == ["300ms"]
    assert "Eq. 2" in failed[0]["error"]


@pytest.mark.parametrize("body, names", [
    ('[grid]\n"path[0].rttx" = ["20ms"]\n', "path[0].rttx"),
    ('[grid]\n"path[0].rtt" = "20ms"\n', "path[0].rtt"),
    ('[grid]\n"path[4].rtt" = ["20ms"]\n', "path[4].rtt"),
    ('[grid]\n"path[0].rtt" = ["-1ms", "-2ms"]\n', "path[0].rtt"),
    ('workers = 3\n', "workers"),
    ('engine = "gpu"\n', "engine"),
    ('[grid]\n"path[0].rtt" = ["20ms"]\n[[case]]\n"path[0].rtt" = "30ms"\n', "path[0].rtt"),
    ('[set]\n"path[0].rtt" = "30ms"\n[grid]\n"path[0].rtt" = ["20ms"]\n', "path[0].rtt"),
    ('[grid\n', "line 2"),
])
def test_a_bad_spec_is_one_line_naming_the_file_and_key(tmp_path, body, names):
    spec = _write_spec(tmp_path, body)
    r = run_cli("sweep", spec, "-o", tmp_path / "run", "-q")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert str(spec) in lines[0] and names in lines[0], lines[0]
    assert not (tmp_path / "run" / "sweep.json").exists()


def test_a_changed_spec_is_refused_unless_forced(tmp_path):
    body = '[set]\n"run.duration" = "2s"\n[grid]\n"path[0].rtt" = ["20ms", "40ms"]\n'
    spec = _write_spec(tmp_path, body)
    out = tmp_path / "run"
    assert run_cli("sweep", spec, "-o", out, "-j", "1", "-q").returncode == 0
    spec.write_text(spec.read_text().replace('"40ms"', '"30ms"'))
    r = run_cli("sweep", spec, "-o", out, "-j", "1", "-q")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--force" in r.stderr
    assert set(pathtwin.read_sweep(out).flows["path[0].rtt"]) == {"20ms", "40ms"}  # untouched
    r = run_cli("sweep", spec, "-o", out, "-j", "1", "-q", "--force")
    assert r.returncode == 0, r.stderr
    assert set(pathtwin.read_sweep(out).flows["path[0].rtt"]) == {"20ms", "30ms"}
    # A directory that is not a sweep's is never written into.
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    r = run_cli("sweep", spec, "-o", other, "-q", "--force")
    assert r.returncode == 2 and "not a sweep directory" in r.stderr
    assert sorted(p.name for p in other.iterdir()) == ["keep.txt"]


def test_points_failing_at_run_time_leave_empty_tables_with_the_engines_columns(tmp_path):
    spec = _write_spec(tmp_path, '[set]\n"run.duration" = "2s"\n[grid]\n"tcp.cc" = ["warp", "hyper"]\n')
    r = run_cli("sweep", spec, "-o", tmp_path / "run", "-j", "1", "-q")
    assert r.returncode == 1 and "2 points: 0 done, 2 failed" in r.stdout
    assert r.stdout.count("congestion control") == 2
    flows = pathtwin.read_sweep(tmp_path / "run").flows
    assert flows.empty
    assert set(pathtwin.results.columns("flows")) | {"tcp.cc"} == set(flows.columns)


def test_an_existing_dask_cluster_runs_the_points(tmp_path):
    from distributed import Client, LocalCluster

    spec = _write_spec(tmp_path, '[set]\n"run.duration" = "2s"\n[grid]\nseed = [1, 2, 3]\n')
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        r = run_cli("sweep", spec, "-o", tmp_path / "run", "--scheduler", cluster.scheduler_address, "-q")
        assert r.returncode == 0, r.stderr
        # The points ran on that cluster's worker: it holds the sweep's module.
        loaded = client.run(lambda: __import__("sys").modules.get("pathtwin.sweeps.point") is not None)
        assert list(loaded.values()) == [True]
    assert sorted(pathtwin.read_sweep(tmp_path / "run").flows["seed"]) == [1, 2, 3]


def test_emulation_leases_keep_to_the_limit_per_machine():
    """Two workers each start an "emulation" (a sleep under the lease) at once: with a limit
    of one, their spans never overlap."""
    from distributed import Client, LocalCluster

    def hold(limit: int) -> tuple[float, float]:
        import time as t

        from pathtwin.sweeps.point import _emulation_lease

        with _emulation_lease(limit):
            start = t.monotonic()
            t.sleep(0.5)
            return start, t.monotonic()

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        workers = list(client.scheduler_info()["workers"])
        spans = client.gather([client.submit(hold, 1, workers=[w], pure=False) for w in workers])
    (a0, a1), (b0, b1) = sorted(spans)
    assert a1 <= b0, f"two emulations at once: {spans}"


@needs_root
def test_one_emulation_point(tmp_path, no_namespace_left_behind):
    spec = _write_spec(tmp_path, """
engine = "emu"
[set]
"run.duration" = "3s"
"tcp.profile" = "linux"
"tcp.cc" = "cubic"
"path[0].abw" = "4mbit"
"path[0].queue" = "64KB"
""")
    res = pathtwin.sweep(spec, tmp_path / "run", workers=1)
    assert res.failed == 0, res.points.error.tolist()
    assert len(res.flows) == 1 and res.flows.bytes_delivered.iloc[0] > 0
    run = json.loads((tmp_path / "run" / "points" / "p00000.json").read_text())
    assert run["engine"] == "emu"


def test_a_json_scenario_sweeps_as_its_toml(tmp_path):
    """A sweep's scenario file ending in ``.json`` is read as JSON, as ``pathtwin sim`` reads
    it (``config.file_format``): every point's config is the one the TOML scenario gives."""
    from pathtwin.sweeps.spec import read_spec

    as_json = tmp_path / "scenario.json"
    as_json.write_text(json.dumps(tomllib.loads(SCENARIO.read_text())))
    grid = '[grid]\n"run.seed" = [1, 2]\n'
    specs = []
    for scenario in (SCENARIO, as_json):
        spec = tmp_path / f"spec-{scenario.suffix[1:]}.toml"
        spec.write_text(f'scenario = "{scenario}"\n' + grid)
        specs.append(read_spec(spec))
    assert [p.error for p in specs[1].points] == [None, None]
    assert [p.config for p in specs[1].points] == [p.config for p in specs[0].points]
