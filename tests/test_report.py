"""HTML reports (`pathtwin report`, `pathtwin reproduce all`) loaded in a real headless
browser: Chromium (the Debian package) driven by Playwright. Every figure must decode and
take room on the page, the console and the page must report no error, no request may leave
the page (only ``data:`` and ``file:`` URLs), and the numbers shown must be the run's own,
read here from the Parquet files with pandas, not through the report code. Without
Chromium or Playwright the browser tests are skipped locally and fail under CI."""

from __future__ import annotations

import glob
import math
import os
import shutil
from pathlib import Path

import pytest

from conftest import run_cli

import pandas as pd

SCENARIO = """
hosts = ["a", "b"]
[run]
duration = "3s"
sample_interval = "100ms"
[[path]]
between = ["a", "b"]
rtt = "40ms"
abw = "10mbit"
[[flow]]
from = "a"
to = "b"
cc = "reno"
[[flow]]
from = "b"
to = "a"
cc = "cubic"
[[flow]]
from = "b"
to = "a"
app = "reqresp"
request = "200B"
response = "5KB"
requests = 3
label = "web"
"""

#: A sweep scenario whose flow takes the controller from [tcp], so that the axis tcp.cc
#: changes it.
SWEEP_SCENARIO = """
hosts = ["a", "b"]
[run]
duration = "2s"
sample_interval = "100ms"
[[path]]
between = ["a", "b"]
rtt = "20ms"
abw = "10mbit"
[[flow]]
from = "a"
to = "b"
"""

SWEEP_SPEC = """
scenario = "scenario.toml"
[grid]
"path[0].rtt" = ["20ms", "60ms"]
"tcp.cc" = ["newreno", "cubic"]
"""


@pytest.fixture(scope="module")
def browser():
    """Chromium through Playwright. Missing, the test is skipped on a developer's machine
    and fails under CI (``CI`` set), as the emulator's tests do (``conftest.emulator``)."""
    exe = shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if exe is None or sync_playwright is None:
        reason = "the browser tests need Playwright (pip) and Chromium (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}, and CI must run them")
        pytest.skip(reason)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe)
        yield b
        b.close()


def load(browser, html: Path) -> dict:
    """Opens ``html`` and returns what the page did: console errors, page errors, every
    request's URL, and per figure its plot name, decoded size and box on the page."""
    page = browser.new_page()
    console, errors, requests = [], [], []
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(html.resolve().as_uri())
    page.wait_for_load_state("load")
    figures = page.evaluate("""() => [...document.querySelectorAll('figure.plot')].map(f => {
        const img = f.querySelector('img, svg'); const box = img.getBoundingClientRect();
        return {plot: f.dataset.plot, complete: img.complete, w: img.naturalWidth, h: img.naturalHeight,
                bw: box.width, bh: box.height}; })""")
    images = page.evaluate("() => document.querySelectorAll('img, svg').length")
    state = {"console": console, "errors": errors, "requests": requests, "figures": figures, "images": images,
             "page": page}
    return state


def check_page(state: dict, expected_figures: int) -> None:
    assert state["console"] == [], state["console"]
    assert state["errors"] == [], state["errors"]
    left = [u for u in state["requests"] if not u.startswith(("data:", "file:"))]
    assert left == [], left
    figs = state["figures"]
    assert len(figs) == expected_figures == state["images"], [f["plot"] for f in figs]
    for f in figs:
        assert f["complete"] and f["w"] > 0 and f["h"] > 0, f
        assert f["bw"] > 0 and f["bh"] > 0, f


def cell_values(page, table_css: str) -> list[dict]:
    """The rows of a table as header -> (text, data-value)."""
    return page.evaluate("""css => { const t = document.querySelector('table.' + css);
        const heads = [...t.querySelectorAll('thead th')].map(h => h.textContent);
        return [...t.querySelectorAll('tbody tr')].map(tr => Object.fromEntries(
            [...tr.children].map((td, i) => [heads[i], [td.textContent, td.dataset.value ?? null, td.className]]))); }""",
                         table_css)


def same(shown: str | None, expected) -> bool:
    """A ``data-value`` (Python's repr of the number) against the table's value."""
    if shown is None:
        return False
    v = float(shown)
    e = float(expected)
    return (math.isnan(v) and math.isnan(e)) or v == e


def expected_run_plots(run: Path) -> int:
    """The plots docs/reports.md promises a run, counted from its Parquet files: throughput,
    cwnd/RTT and throughput-delay with flow_series rows, queue occupancy with queue_series
    rows, the goodput CDF with flows, the response-time CDF when a flow completed responses."""
    def rows(name):
        f = run / f"{name}.parquet"
        return pd.read_parquet(f) if f.is_file() else pd.DataFrame()

    flows = rows("flows")
    return (3 * bool(len(rows("flow_series"))) + bool(len(rows("queue_series"))) + bool(len(flows))
            + bool(len(flows) and (flows["responses"] > 0).any()))


def test_run_report_in_chromium(tmp_path, browser):
    (tmp_path / "s.toml").write_text(SCENARIO)
    r = run_cli("sim", tmp_path / "s.toml", "-o", tmp_path / "run", "-q")
    assert r.returncode == 0, r.stderr
    r = run_cli("report", tmp_path / "run", "-o", tmp_path / "report.html")
    assert r.returncode == 0, r.stderr
    state = load(browser, tmp_path / "report.html")
    check_page(state, expected_run_plots(tmp_path / "run"))
    assert "response_cdf" in {f["plot"] for f in state["figures"]}  # the scenario has a reqresp flow

    flows = pd.read_parquet(tmp_path / "run" / "flows.parquet")
    shown = cell_values(state["page"], "headline")
    assert [row["flow"][0] for row in shown] == list(flows["label"])
    columns = {"goodput (Mbit/s)": "goodput_bps", "completion (s)": "completion_s", "retransmits": "retransmits",
               "mean RTT (ms)": "rtt_mean_ms", "min RTT (ms)": "rtt_min_ms"}
    for row, (_, f) in zip(shown, flows.iterrows()):
        assert row["cc"][0] == f["cc"]
        for head, col in columns.items():
            assert same(row[head][1], f[col]), (f["label"], head, row[head], f[col])
    # The configuration is there, collapsed.
    assert state["page"].evaluate("() => document.querySelector('details').open") is False


def test_sweep_report_in_chromium(tmp_path, browser):
    (tmp_path / "scenario.toml").write_text(SWEEP_SCENARIO)
    (tmp_path / "spec.toml").write_text(SWEEP_SPEC)
    r = run_cli("sweep", tmp_path / "spec.toml", "-o", tmp_path / "sweep", "--workers", "1")
    assert r.returncode == 0, r.stderr
    r = run_cli("report", tmp_path / "sweep", "-o", tmp_path / "sweep.html")
    assert r.returncode == 0, r.stderr
    state = load(browser, tmp_path / "sweep.html")
    # Two axes of two values each: the goodput against each axis, and the goodput CDF.
    check_page(state, 2 + 1)

    shown = cell_values(state["page"], "points")
    assert len(shown) == 4
    for row in shown:
        # The point's own Parquet file, wherever its partition put it.
        (f,) = glob.glob(str(tmp_path / "sweep" / "flows" / "**" / f"{row['point'][0]}.parquet"), recursive=True)
        flows = pd.read_parquet(f)
        assert f"path[0].rtt={row['path[0].rtt'][0]}" in f and f"tcp.cc={row['tcp.cc'][0]}" in f
        assert same(row["mean goodput (Mbit/s)"][1], flows["goodput_bps"].mean())
        assert same(row["mean RTT (ms)"][1], flows["rtt_mean_ms"].mean())


def test_reproduce_all_report_in_chromium(tmp_path, browser):
    """`reproduce all` limited to one quick reproduction: the page shows the registry's
    numbers of the paper, ours as the reproduction itself computes them, and highlights a
    number of ours exactly when it lies over 10 % (the default; figure 5 states none) from
    the paper's."""
    from pathtwin import reproduce
    from pathtwin.reproduce.nsdi09 import figure5

    record = reproduce.get("nsdi09-figure5")
    r = run_cli("reproduce", "all", "--only", record.name, "-o", tmp_path / "all")
    assert r.returncode == 0, r.stderr
    state = load(browser, tmp_path / "all" / "report.html")
    check_page(state, 0)
    page = state["page"]
    assert page.evaluate("() => [...document.querySelectorAll('section.reproduction')].map(s => s.dataset.name)") \
        == [record.name]

    ours = figure5()  # deterministic: seed 1, as reproduce all runs it
    by_quantity = {"mean RTT, link emulation": ours.mean_rtt_ms["link"], "mean RTT, path emulation": ours.mean_rtt_ms["path"],
                   "RTT standard deviation, path emulation": ours.rtt_std_ms["path"]}
    tolerance = record.tolerance if record.tolerance is not None else 0.10
    shown = cell_values(page, "paper")
    assert [row["quantity"][0] for row in shown] == [p.quantity for p in record.paper]
    for row, p in zip(shown, record.paper):
        assert same(row["paper"][1], p.value)
        assert row["source"][0] == p.source
        assert same(row["ours"][1], by_quantity[p.quantity])
        outside = abs(by_quantity[p.quantity] - p.value) / abs(p.value) > tolerance
        assert ("outside" in row["ours"][2].split()) == outside, row


def test_report_of_a_directory_that_is_no_run(tmp_path):
    (tmp_path / "empty").mkdir()
    for target in (tmp_path / "empty", tmp_path / "missing"):
        r = run_cli("report", target, "-o", tmp_path / "r.html")
        assert r.returncode != 0
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and str(target) in lines[0], r.stderr
        assert "Traceback" not in r.stderr
    assert not (tmp_path / "r.html").exists()


def test_a_failed_point_shows_its_error(tmp_path, browser):
    """A sweep point that failed is a row with its status and error line from sweep.json,
    and the plots draw the points that ran."""
    import json

    (tmp_path / "scenario.toml").write_text(SWEEP_SCENARIO)
    (tmp_path / "spec.toml").write_text('scenario = "scenario.toml"\n[grid]\n"path[0].rtt" = ["20ms", "-5ms"]\n')
    r = run_cli("sweep", tmp_path / "spec.toml", "-o", tmp_path / "sweep", "--workers", "1")
    assert r.returncode == 1, r.stderr  # one point failed
    r = run_cli("report", tmp_path / "sweep", "-o", tmp_path / "sweep.html")
    assert r.returncode == 0, r.stderr
    state = load(browser, tmp_path / "sweep.html")
    check_page(state, 1 + 1)
    record = json.loads((tmp_path / "sweep" / "sweep.json").read_text())
    shown = {row["point"][0]: row for row in cell_values(state["page"], "points")}
    assert set(shown) == {p["id"] for p in record["points"]}
    for p in record["points"]:
        row = shown[p["id"]]
        assert row["status"][0] == p["status"]
        assert row["error"][0] == (p.get("error") or "")
    assert any(p["status"] == "failed" for p in record["points"])


@pytest.mark.parametrize("paper, ours, verdict", [
    (100.0, 105.0, "within"), (100.0, 111.0, "outside"), (100.0, 89.0, "outside"),
    ("< 10", 9.0, "within"), ("< 10", 100.0, "outside"), ("well over 300", 305.0, "within"),
    ("well over 300", 250.0, "outside"), ("about 100", 95.0, "within"), ("about 100", 80.0, "outside"),
    (0, 0, "within"), (0, 1, "outside"), ("higher RTTs and more losses", 3.0, "unjudged"), (44.0, None, "unjudged"),
])
def test_judging_ours_against_the_papers_number_or_words(paper, ours, verdict):
    from pathtwin.report.paper import judge

    assert judge(paper, ours, tolerance=0.10).status == verdict


@pytest.mark.parametrize("paper, ours, verdict", [
    # Errors in percent judged in points: the paper's 2.1 % error is met by a smaller one.
    (2.1, 0.003, "within"), (2.1, 7.0, "within"), (2.1, 7.2, "outside"), (0, 4.0, "within"), (66.5, 71.2, "within"),
    (20.4, 36.2, "outside"),
])
def test_judging_errors_in_the_papers_unit(paper, ours, verdict):
    from pathtwin.report.paper import judge

    assert judge(paper, ours, absolute=5.0).status == verdict
