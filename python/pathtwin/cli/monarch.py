"""`pathtwin monarch`: a TCP transfer carried by probes (Monarch), from the command line.

    sudo pathtwin monarch rtt=60ms,down=4mbit,up=1mbit,loss_down=1% --probe icmp-echo --cc cubic -o run/
    sudo pathtwin monarch 192.0.2.7 --probe icmp-echo --cc cubic -o run/

TARGET is either an emulated remote host's path — ``rtt``, ``down`` (towards the target, the
probes' direction), ``up``, and optionally ``loss_down``, ``loss_up`` and ``queue`` — or a
real host's address or name, probed through this machine's own network stack (root; private,
loopback and multicast addresses only with ``--allow-private``; at most ``--max-rate`` of
probes). Prints throughput, RTTs, retransmissions, the proxy's counts and the self-diagnosis
verdict; the flow's time series, the probe capture and ``monarch.json`` are in the output
directory. ``--real-tcp`` (emulated targets) pairs the flow with real TCP on the same path
realization (``--seed``); ``--runs K`` repeats over K realizations and prints the
distribution of the throughput and of the Monarch/TCP ratio (``monarch-runs.json``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..errors import PathtwinError


def parse_target(text: str) -> dict | str:
    """``rtt=60ms,down=4mbit,up=1mbit,loss_down=1%`` -> a path dict (values stay strings for
    the config's own unit parser); anything else is a real host's address or name."""
    if "=" not in text:
        return text
    from ..config import parse_assignments

    return parse_assignments(text.split(","), f"target {text!r}: item")


def register(app: typer.Typer) -> None:
    """Adds `pathtwin monarch`."""

    @app.command("monarch")
    def monarch_cmd(
        target: str = typer.Argument(..., help="a real host's address or name, or an emulated target's path: rtt=..,down=..,up=..[,loss_down=..,loss_up=..,reorder_down=..,reorder_up=..,reorder_delay=..,queue=..]"),
        out: Path = typer.Option(..., "-o", "--out", help="result directory"),
        probe: str = typer.Option("tcp-ack", "--probe", help="tcp-ack, udp, icmp-echo or icmp-timestamp"),
        cc: Optional[str] = typer.Option(None, "--cc", help="the sender's kernel congestion control (reno, cubic, bbr)"),
        size: str = typer.Option("500kB", "--bytes", help="bytes to transfer"),
        real_tcp: bool = typer.Option(False, "--real-tcp", help="also run the same transfer as real TCP to the target"),
        target_ip_ids: str = typer.Option("kernel", "--target-ip-ids", help="kernel (the target's own) or sequential (one counter, as the paper's hosts)"),
        target_sysctl: list[str] = typer.Option([], "--target-sysctl", help="KEY=VALUE set in the emulated target, e.g. net.ipv4.icmp_ratelimit=0; repeatable"),
        seed: int = typer.Option(1, "--seed", help="the path realization (its random loss and reordering); --real-tcp meets the same one"),
        runs: int = typer.Option(1, "--runs", help="realizations to run (seeds SEED, SEED+1, ...); prints the distribution of throughput and, with --real-tcp, of Monarch/TCP"),
        allow_private: bool = typer.Option(False, "--allow-private", help="a real target may be a private, shared, loopback, link-local, documentation, benchmarking or multicast address"),
        max_rate: Optional[str] = typer.Option(None, "--max-rate", help="the most a real target is sent, e.g. 5mbit (default 20mbit); the proxy drops what would exceed it"),
        real_tcp_port: int = typer.Option(5401, "--real-tcp-port", help="with --real-tcp to a real target: the port its `pathtwin monarch-sink` listens on"),
    ) -> None:
        """Emulate a TCP transfer to a remote host with probes it answers (Monarch)."""
        from rich.console import Console

        from .. import monarch
        from ..config import parse_assignments, parse_quantity

        nbytes = int(parse_quantity("size", size, "--bytes"))
        if runs < 1:
            raise PathtwinError(f"--runs: {runs} is not a positive number of runs")
        if seed < 0:
            raise PathtwinError(f"--seed: {seed} is negative")
        sysctls = parse_assignments(target_sysctl, "--target-sysctl")
        path = parse_target(target)
        if isinstance(path, dict) and (allow_private or max_rate is not None):
            raise PathtwinError("--allow-private and --max-rate are for a real target (an address or a name), not an emulated one")
        if not 0 < real_tcp_port < 65536:
            raise PathtwinError(f"--real-tcp-port: {real_tcp_port} is not a TCP port")
        if max_rate is not None:
            parse_quantity("rate", max_rate, "--max-rate")
        con = Console()
        if runs > 1:
            try:
                with con.status(f"{runs} realizations of {nbytes:,} bytes as {probe} probes ..."):
                    rs = monarch.runs(path, out, runs, seed=seed, real_tcp=real_tcp, probe=probe, cc=cc, nbytes=nbytes,
                                      target_sysctls=sysctls, target_ip_ids=target_ip_ids, allow_private=allow_private, max_rate=max_rate,
                                      real_tcp_port=real_tcp_port)
            except KeyboardInterrupt:
                con.print(f"interrupted: the realizations that finished are in {out}/monarch-runs.json", soft_wrap=True)
                raise
            _print_runs(con, rs, real_tcp)
            con.print(f"wrote {out}/monarch-runs.json, {out}/run-NN/")
            return
        with con.status(f"transferring {nbytes:,} bytes as {probe} probes ..."):
            r = monarch.run(path, out, probe=probe, cc=cc, nbytes=nbytes, real_tcp=real_tcp, target_sysctls=sysctls,
                            target_ip_ids=target_ip_ids, seed=seed, allow_private=allow_private,
                            max_rate=max_rate, real_tcp_port=real_tcp_port)
        s = r.summary
        con.print(f"{probe} probes, {s['cc'] or 'default cc'}: {s['throughput_bps'] / 1e6:.2f} Mbit/s over {s['duration_s']:.2f} s, "
                  f"RTT min {s['min_rtt_ms']:.1f} / mean {s['mean_rtt_ms']:.1f} ms, {s['retransmits']} retransmissions")
        p = s["proxy"]
        towards = f" to {s['target']} from {p['source']}" if p.get("source") else ""
        con.print(f"proxy: {p['probes']:,} probes{towards}, {p['responses']:,} answered, {s['unanswered_probes']:,} unanswered"
                  + (f", {p['capped']:,} packets dropped at the rate cap" if p.get("capped") else ""))
        con.print(f"self-diagnosis: {s['verdict']} ({s['reason']}); lost downstream {s['lost_downstream']}, upstream {s['lost_upstream']}")
        for w in s["warnings"]:
            con.print(f"[yellow]warning:[/] {w}")
        if "real_tcp" in s and isinstance(path, str):
            t = s["real_tcp"]
            con.print(f"real TCP from this machine to {t['address']}:{t['port']}: {t['throughput_bps'] / 1e6:.2f} Mbit/s; "
                      f"Monarch/TCP {s['ratio_to_real_tcp']:.2f}")
        elif "real_tcp" in s:
            t = s["real_tcp"]
            con.print(f"real TCP on the same path realization (seed {seed}): {t['throughput_bps'] / 1e6:.2f} Mbit/s, "
                      f"RTT min {t['min_rtt_ms']:.1f} ms, {t['retransmits']} retransmissions; Monarch/TCP {s['ratio_to_real_tcp']:.2f}")
        con.print(f"wrote {out}/monarch.json, {r.capture}, {out}/emulation/")


    @app.command("monarch-sink")
    def monarch_sink_cmd(
        port: int = typer.Option(5401, "--port", help="TCP port to listen on"),
        once: bool = typer.Option(False, "--once", help="end after one transfer"),
    ) -> None:
        """Receive the real TCP transfers `pathtwin monarch ADDRESS --real-tcp` sends (run it on the target)."""
        from .. import monarch

        if not 0 < port < 65536:
            raise PathtwinError(f"--port: {port} is not a TCP port")
        monarch.sink(port, once=once)


def _print_runs(con, rs, real_tcp: bool) -> None:
    """One line per realization, then each measure's distribution."""
    from rich.table import Table

    t = Table(box=None)
    for col in ["run", "seed", "Monarch Mbit/s", "verdict"] + (["TCP Mbit/s", "Monarch/TCP"] if real_tcp else []):
        t.add_column(col, justify="right")
    for r in rs.rows:
        cells = [str(r["run"]), str(r["seed"]), f"{r['throughput_bps'] / 1e6:.2f}", r["verdict"]]
        if real_tcp:
            cells += [f"{r['tcp_throughput_bps'] / 1e6:.2f}", f"{r['ratio']:.2f}"]
        t.add_row(*cells)
    con.print(t)
    names = {"throughput_bps": ("Monarch throughput", 1e-6, "Mbit/s"), "tcp_throughput_bps": ("real TCP throughput", 1e-6, "Mbit/s"),
             "ratio": ("Monarch/TCP", 1.0, "")}
    for key, d in rs.distribution.items():
        label, scale, unit = names[key]
        con.print(f"{label} over {d['n']} realizations: median {d['median'] * scale:.2f}{' ' + unit if unit else ''}, "
                  f"quartiles {d['q1'] * scale:.2f}-{d['q3'] * scale:.2f}, range {d['min'] * scale:.2f}-{d['max'] * scale:.2f}")
