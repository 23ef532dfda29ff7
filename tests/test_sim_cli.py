"""The simulator as a user drives it: `pathtwin sim`, `pathtwin plot`, `pathtwin bounds`,
bad input, Ctrl-C, and the result directory's contents."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from conftest import default_sigint, run_cli
from pathtwin.results import read_result_dir

SMALL = """
hosts = ["a", "b"]
[run]
duration = "5s"
sample_interval = "100ms"
[[path]]
between = ["a", "b"]
rtt = "40ms"
abw = "5mbit/2mbit"
[[flow]]
from = "a"
to = "b"
"""



def test_run_json_names_the_source_revision_git_reports(tmp_path):
    """run.json's git_revision is the checkout's commit as `git rev-parse` abbreviates it,
    marked -dirty when tracked files changed, or "unknown" outside a checkout."""
    import pathtwin

    src = str(Path(pathtwin.__file__).parent)
    git = lambda *a: subprocess.run(["git", "-C", src, *a], capture_output=True, text=True)  # noqa: E731
    head = git("rev-parse", "--short=12", "HEAD")
    if head.returncode != 0:
        expected = "unknown"
    else:
        dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
        expected = head.stdout.strip() + ("-dirty" if dirty else "")
    scen = tmp_path / "s.toml"
    scen.write_text(SMALL)
    r = run_cli("sim", scen, "-o", tmp_path / "out", "-q")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "out" / "run.json").read_text())["git_revision"] == expected

def test_sim_writes_run_json_tables_and_plots(tmp_path):
    scen = tmp_path / "s.toml"
    scen.write_text(SMALL)
    out = tmp_path / "out"
    r = run_cli("sim", scen, "-o", out, "--plots")
    assert r.returncode == 0, r.stderr
    assert "a->b" in r.stdout and f"results in {out}" in r.stdout, r.stdout
    run = json.loads((out / "run.json").read_text())
    for key in ("format_version", "pathtwin_version", "git_revision", "seed", "config", "engine", "wall_time_s"):
        assert key in run, key
    assert run["engine"] == "sim" and run["complete"] is True
    assert run["config"]["path"][0]["abw"] == ["5mbit", "2mbit"], "resolved config is stored"
    flows = pd.read_parquet(out / "flows.parquet")
    assert list(flows.label) == ["a->b"]
    series = pd.read_parquet(out / "flow_series.parquet")
    # 100 ms samples over 5 s.
    assert 45 <= len(series) <= 51
    assert {"cwnd_bytes", "srtt_ms", "goodput_bps"} <= set(series.columns)
    qs = pd.read_parquet(out / "queue_series.parquet")
    assert {"packets", "bytes", "placeholder_packets", "drops"} <= set(qs.columns)
    queues = pd.read_parquet(out / "queues.parquet")
    assert set(queues.queue) >= {"a->b", "b->a"}
    for png in ("throughput.png", "cwnd_rtt.png", "queues.png"):
        assert (out / png).stat().st_size > 5000, png
    # Re-plotting from the files alone works.
    for png in out.glob("*.png"):
        png.unlink()
    r = run_cli("plot", out)
    assert r.returncode == 0, r.stderr
    assert (out / "throughput.png").exists()


BAD = [
    ("unknown key", 'hosts = ["a","b"]\n[[path]]\nbetween = ["a","b"]\nrtt = "40ms"\nabww = "1mbit"\n', "path[0].abww"),
    ("bad unit", 'hosts = ["a","b"]\n[[path]]\nbetween = ["a","b"]\nrtt = "40ms"\nabw = "5mbt"\n', "path[0].abw"),
    ("negative rate", 'hosts = ["a","b"]\n[[path]]\nbetween = ["a","b"]\nrtt = "40ms"\nabw = "-5mbit"\n', "path[0].abw"),
    ("unknown host", 'hosts = ["a","b"]\n[[path]]\nbetween = ["a","c"]\nrtt = "40ms"\nabw = "5mbit"\n', "path[0].between[1]"),
    ("infeasible explicit queue",
     'hosts = ["a","b"]\n[[path]]\nbetween = ["a","b"]\nrtt = "40ms"\nabw = "10mbit"\nqueue = "2MB"\n', "path[0].queue"),
    ("queue below Eq. 2",
     'hosts = ["a","b"]\n[[path]]\nbetween = ["a","b"]\nrtt = "40ms"\nabw = "10mbit"\nqueue = "3KB"\n', "path[0].queue"),
    ("unknown flow host", 'hosts = ["a","b"]\n[[flow]]\nfrom = "a"\nto = "zz"\n', "flow[0].to"),
    ("not toml", 'hosts = ["a",\n', "config"),
]


def test_sim_draws_plots_only_when_asked_and_reads_its_own_tables_back(tmp_path):
    scen = tmp_path / "s.toml"
    scen.write_text(SMALL)
    out = tmp_path / "out"
    r = run_cli("sim", scen, "-o", out, "-q")
    assert r.returncode == 0 and r.stdout == "", (r.stdout, r.stderr)
    assert not list(out.glob("*.png"))
    # The engine writes the Parquet tables itself; what a reader gets is what the Python API
    # returns for the same run.
    from pathtwin import simulate

    again = simulate(scen)
    for name in ("flows", "flow_series", "queues", "queue_series", "markers"):
        written = pd.read_parquet(out / f"{name}.parquet")
        assert list(written.columns) == list(again.tables[name].columns), name
        pd.testing.assert_frame_equal(written, again.tables[name], check_dtype=False, obj=name)


@pytest.mark.parametrize("name,text,key", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_naming_the_key(tmp_path, name, text, key):
    scen = tmp_path / "bad.toml"
    scen.write_text(text)
    r = run_cli("sim", scen, "-o", tmp_path / "out")
    assert r.returncode == 2, (r.returncode, r.stderr)
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("pathtwin: error: ") and key in err, err
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "out" / "run.json").exists()


def test_a_json_scenario_runs_as_its_toml_and_its_mistakes_name_file_and_line(tmp_path):
    """The schema reads JSON as well as TOML (how Python passes dicts): a scenario file
    ending in ``.json`` runs the same simulation as the TOML it was written from, flows
    byte for byte; a broken one is one line naming the file, the line and the key, where it
    was read as TOML and refused as "invalid key" on line 1."""
    import tomllib

    toml_file, json_file = tmp_path / "s.toml", tmp_path / "s.json"
    toml_file.write_text(SMALL)
    json_file.write_text(json.dumps(tomllib.loads(SMALL), indent=1))
    flows = {}
    for f in (toml_file, json_file):
        r = run_cli("sim", f, "-o", tmp_path / f.suffix[1:], "--seed", "4")
        assert r.returncode == 0, r.stderr
        flows[f.suffix] = pd.read_parquet(tmp_path / f.suffix[1:] / "flows.parquet")
    pd.testing.assert_frame_equal(flows[".toml"], flows[".json"])
    broken = json.loads(json_file.read_text())
    broken["path"][0]["rtt"] = 40
    json_file.write_text(json.dumps(broken, indent=1))
    r = run_cli("sim", json_file, "-o", tmp_path / "bad")
    err = r.stderr.strip()
    assert r.returncode == 2 and len(err.splitlines()) == 1 and "Traceback" not in r.stderr, err
    assert err.startswith(f"pathtwin: error: {json_file}:") and "path[0].rtt" in err, err


def test_missing_file_and_bad_arguments(tmp_path):
    r = run_cli("sim", tmp_path / "nope.toml", "-o", tmp_path / "o")
    assert r.returncode == 2 and "nope.toml: no such file" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("bounds", "--abw", "10mbt", "--rtt", "20ms")
    assert r.returncode == 2 and r.stderr.startswith("pathtwin: error: --abw") and "Traceback" not in r.stderr
    r = run_cli("reproduce", "nsdi99")
    assert r.returncode == 2 and "unknown reproduction" in r.stderr
    # The parser's own errors follow the same rule: one line, status 2, no traceback.
    for args, needle in ((["sim"], "Missing"), (["bounds", "--abw", "1mbit", "--rtt", "1ms", "--flows", "abc"], "integer"),
                         (["nosuch"], "No such command")):
        r = run_cli(*args)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_bounds_prints_figure1_numbers_and_plot(tmp_path):
    # Figure 1's path: ABW 10 Mbit/s, RTT 20 ms, w_max 65 KB. By hand: lower bound = BDP =
    # 10e6/8 · 0.020 = 25 000 B; upper total at C = 100 Mbit/s = 12.5e6 · (0.052 − 0.020) = 400 000 B.
    png = tmp_path / "fig1.png"
    r = run_cli("bounds", "--abw", "10mbit", "--rtt", "20ms", "--wmax", "65KB", "--plot", png)
    assert r.returncode == 0, r.stderr
    assert "25,000 B (a→b)" in r.stdout and "400,000 B" in r.stdout
    assert png.stat().st_size > 10000
    # Near C = ABW no queue fits (the figure's left edge); the message says why.
    r = run_cli("bounds", "--abw", "10mbit", "--rtt", "20ms", "--wmax", "65KB", "--capacity", "11mbit")
    assert r.returncode == 0 and "no feasible queue size" in r.stdout and "12.50 Mbit/s" in r.stdout


def test_ctrl_c_keeps_what_was_measured(tmp_path):
    scen = tmp_path / "long.toml"
    scen.write_text(SMALL.replace('duration = "5s"', 'duration = "100000s"'))
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, "-m", "pathtwin.cli", "sim", scen, "-o", out],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    time.sleep(3.0)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    run = json.loads((out / "run.json").read_text())
    assert run["complete"] is False and run["interrupted"] is True
    assert 0 < run["simulated_s"] < 100000
    flows = pd.read_parquet(out / "flows.parquet")
    assert flows.bytes_delivered.iloc[0] > 0
    assert "Traceback" not in err


def test_a_full_disk_is_one_line_and_keeps_the_tables_that_fit(small_disk):
    """Results written to a disk that fills up: one line naming the file that did not fit,
    a non-zero exit, no truncated file left for a reader to take for a table, and a run.json
    that lists the tables written, each of which reads back."""
    scen = small_disk.parent / "long-series.toml"
    # A minute sampled every 10 ms: a flow_series of 12 000 rows, far more than 64 KiB.
    scen.write_text(SMALL.replace('duration = "5s"', 'duration = "60s"').replace('"100ms"', '"10ms"'))
    out = small_disk / "out"
    r = run_cli("sim", scen, "-o", out)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr, r.stderr
    assert "flow_series.parquet: cannot write" in r.stderr and "No space left" in r.stderr, r.stderr
    assert not list(out.glob("*.partial"))
    run = json.loads((out / "run.json").read_text())
    assert "flows" in run["tables"] and "flow_series" not in run["tables"], run["tables"]
    assert any("flow_series" in w for w in run["warnings"]), run["warnings"]
    assert sorted(p.stem for p in out.glob("*.parquet")) == sorted(run["tables"])
    res = read_result_dir(out)
    assert res.flows.bytes_delivered.iloc[0] > 0


def test_python_api_returns_dataframes():
    import pathtwin

    res = pathtwin.simulate({
        "hosts": ["a", "b"],
        "run": {"duration": "3s"},
        "path": [{"between": ["a", "b"], "rtt": "20ms", "abw": "4mbit"}],
        "flow": [{"from": "a", "to": "b"}],
    })
    assert isinstance(res.flows, pd.DataFrame) and len(res.flows) == 1
    assert isinstance(res.queue_series, pd.DataFrame)
    with pytest.raises(pathtwin.PathtwinError, match=r"path\[0\]\.rtt"):
        pathtwin.simulate({"hosts": ["a", "b"], "path": [{"between": ["a", "b"], "rtt": 20, "abw": "4mbit"}]})


def test_help_shows_config_syntax_literally():
    """Help texts quote config syntax; brackets must survive (rich markup used to eat them:
    "topology + [] workload", "Override  seed")."""
    r = run_cli("sim", "--help")
    assert r.returncode == 0, r.stderr
    assert "[[flow]]" in r.stdout and "[run] seed" in r.stdout and "[run] duration" in r.stdout, r.stdout
    for group in ([], ["emu"], ["trace"]):
        r = run_cli(*group, "--help")
        assert r.returncode == 0 and "Usage: pathtwin" in r.stdout, r.stdout
