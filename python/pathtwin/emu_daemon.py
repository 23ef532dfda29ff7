"""The daemon behind `pathtwin emu up`: ``python -m pathtwin.emu_daemon TOPOLOGY [options]``
runs one ``Emulation`` in the background until SIGTERM or SIGINT (`pathtwin emu down`).

It says on its stdout, in one JSON line, that the hosts are up (run id, hosts, warnings) or
why they are not (``{"error": ...}``), then stops writing there, so that `emu up` can return
while it keeps running; the run's state is found through ``/run/pathtwin/RUN/state.json``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Sequence

from .emulation import Emulation, vars_of
from .errors import PathtwinError


def serve(argv: Sequence[str]) -> int:
    """Runs one emulation until SIGTERM/SIGINT. Prints one JSON line when the hosts are up
    (or ``{"error": ...}``), then detaches from its stdout."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m pathtwin.emu_daemon")
    ap.add_argument("topology")
    ap.add_argument("--run-id")
    ap.add_argument("--out")
    ap.add_argument("--pcap")
    ap.add_argument("--cc")
    ap.add_argument("--spin-us", type=float, default=0.0)
    ap.add_argument("--no-high-priority", action="store_true")
    ap.add_argument("--no-cpu-latency-qos", action="store_true")
    ap.add_argument("--no-offload", action="store_true")
    a = ap.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        net = Emulation(a.topology, out=a.out, pcap=a.pcap, cc=a.cc, spin_us=a.spin_us, run_id=a.run_id,
                        high_priority=not a.no_high_priority,
                        cpu_latency_qos=not a.no_cpu_latency_qos, offload=not a.no_offload).start()
    except PathtwinError as e:
        print(json.dumps({"error": str(e)}), flush=True)
        return 2
    try:
        print(json.dumps({"run_id": net.run_id, "hosts": [vars_of(h) for h in net.hosts], "warnings": net.warnings}),
              flush=True)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        while not stop.wait(0.5):
            if not net.is_running():
                break
    finally:
        net.stop()
    return 0


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1:]))
