"""Active measurement of Internet paths into a path model (NSDI'09 §3.3): base RTT, ABW and
its reactivity, and shared bottlenecks, between every ordered pair of a set of hosts.

    m = pathtwin.measure.measure_emulated("examples/groundtruth/campus.toml",
                                          hosts=["s", "d1", "d2"], out="model.toml")
    m.findings["shared"]["s"]["classes"]      # [["d1", "d2"]]

The modules, one job each:
- ``endpoints``: the programs run in the measured hosts (UDP echo and prober, TCP sink and
  sender; standard library only);
- ``hosts``: what a measured host is (a name, an address, ``popen`` or ``operate``) and
  starting an operation on it;
- ``probes``: the light probe series (base RTT, one-way delays);
- ``throughput``: 1..N parallel TCP flows per direction (the reactivity table);
- ``shared``: wavelet-denoised delay correlation (DCW) and Rubenstein's test, clustering;
- ``model``: findings -> a ``[[path]]``/``[[shared]]`` config through the schema;
- ``state``: the resume file beside the output;
- ``session``: the steps in order, settings, progress;
- ``emulated``: measuring inside an emulated ground truth with its cross traffic;
- ``simulated``: the same measurement in one simulation of the ground truth (seconds);
- ``operations``: the typed operations a host offers and an agent's limits on them;
- ``protocol``, ``agent``, ``remote``: real hosts — the wire, the agent a real host runs
  (``pathtwin measure agent``), and the controller's side (``measure_agents``).
"""

from __future__ import annotations

from .emulated import measure_emulated
from .remote import measure_agents
from .session import DEFAULT_FLOWS, Measurement, Settings, measure, parse_flows
from .simulated import measure_simulated

__all__ = ["measure", "measure_emulated", "measure_simulated", "measure_agents", "Settings", "Measurement", "parse_flows",
           "DEFAULT_FLOWS"]
