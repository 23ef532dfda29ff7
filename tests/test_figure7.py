"""NSDI'09 Figure 7 in small (``bench/measure/figure7.py``): a BitTorrent swarm of aria2c
clients with opentracker, from Debian packages, on the nine application hosts of
``examples/groundtruth/swarm.toml`` — in the ground truth with its cross traffic, in the
path model measured from it (simulated measurement) and in the link baseline — with a
2-MB file. What must hold whatever the timing: every leecher completes in every
environment, its file is the seed's byte for byte (SHA-256), and none finishes sooner
than the file's size over the most its environment can carry into it (the access link's
downstream rate in the truth; the sum of its paths' largest ABWs in the model and the
baseline). The numbers of the full-size run are in bench/measure/README.md.
"""

from __future__ import annotations

import shutil

import pytest
from conftest import EXAMPLES, load_script, needs_root, unavailable


SWARM = EXAMPLES / "groundtruth" / "swarm.toml"


@needs_root
def test_swarm_completes_intact_and_no_faster_than_the_network_allows(tmp_path):
    for tool in ("aria2c", "opentracker"):
        if shutil.which(tool) is None:
            unavailable(f"the swarm needs {tool} (apt-get install aria2 opentracker)")
    fig7 = load_script("bench/measure/figure7.py", "figure7_bench")
    from pathtwin.measure import Settings

    hosts = ["a1", "a2", "a3", "b1", "b2", "b3", "c1", "c2", "c3"]
    size = 2_000_000
    settings = Settings(flows=[1], duration_s=2.0, probe_duration_s=3.0)
    rec = fig7.figure7(str(SWARM), hosts, "a1", size, settings, timeout_s=60.0, work=tmp_path, log=lambda m: None)
    assert [r["node"] for r in rec["rows"]] == hosts[1:]
    for r in rec["rows"]:
        for env in fig7.ENVIRONMENTS:
            assert r[f"{env}_s"] is not None, (env, r)
            assert r[f"{env}_intact"], (env, r)
            assert r[f"{env}_s"] >= r[f"{env}_bound_s"], (env, r)
    from pathtwin.config import parse_per_direction
    from pathtwin.measure.emulated import ground_truth

    links = {tuple(ln["between"]): parse_per_direction("rate", ln["rate"], "rate") for ln in ground_truth(SWARM)["link"]}
    # The truth's bound is the access link's: the file over c1's downlink (rc -> c1).
    c1 = next(r for r in rec["rows"] if r["node"] == "c1")
    assert c1["truth_bound_s"] == pytest.approx(size * 8 / links[("c1", "rc")][1])
    # Site C as a whole: every byte its three nodes receive crosses core1 -> rc or comes up
    # another C node's uplink, so the last of them cannot finish before
    # 3 x size / (that line's rate + the three uplinks') — even without cross traffic.
    site_c = ["c1", "c2", "c3"]
    into_c = links[("core1", "rc")][0] + sum(links[(c, "rc")][0] for c in site_c)
    last_c = max(r["truth_s"] for r in rec["rows"] if r["node"] in site_c)
    assert last_c >= len(site_c) * size * 8 / into_c
