"""The replay database: what Monkey See distils from a capture and Monkey Do re-enacts.

A :class:`Workload` is two tables. ``conns``: one row per connection, with its client's
path (``rtt_ms``, ``down_bps``/``up_bps``, ``down_loss``/``up_loss``), its client TCP
(``mss``, ``rwin_bytes``, ``quickack``) and its start (``start_s``, when the *client*
connects, relative to the workload's start). ``exchanges``: one row per request/response,
with ``request_bytes``, ``response_bytes``, ``header_bytes`` (sent first; the rest follows
after ``query_delay_s``), ``server_delay_s`` and the client's ``think_s`` before sending it.

:meth:`Workload.from_analysis` builds it from ``pathtwin.trace.workload`` tables as the
paper does (Cheng et al., USENIX ATC 2004, §3.2 and §4): min RTT for the delay, the
ACK-pair bottleneck for the rate, retransmissions less spurious ones for downstream loss —
less, too, those the pipe's own queue will reproduce (``random_loss_rate``: Monkey's rate
counts a burst's overflow of a 5-packet dial-up queue as random loss, and the replay would
lose those packets twice) — no upstream loss (assumption 3), client event times from
server-side ones shifted by half the min RTT. Two choices the paper leaves open, stated
here: the upstream rate is the
downstream one (the trace shows no upstream bottleneck; requests of a packet or two barely
feel it), and a client's think time is measured from the server's receipt of its ACK of the
whole response (``response_acked_s``) — when the client had the response, half an RTT
before — not from the server's last send, which on a slow link precedes the client's
receipt by the queue's drain time. :func:`synthetic` draws a ground-truth workload of
clients on modem, DSL, cable and fast paths.

Loss is replayed one of two ways (:data:`LOSS_MODELS`, :meth:`Workload.pipes`). ``"trace"``
(the default): the capture's own losses — ``down_lost_offsets``, from the analysis's
``lost_offsets_s2c``, the byte offsets of the server's transmissions the capture shows lost
(retransmissions less spurious ones, ``pathtwin-trace``'s ``losses``) — dropped again by the
pipe's ``drop`` at those offsets, ahead of its queue, so that a connection that lost its 3rd
segment loses its 3rd segment again, not its 97th, and its queue overflows no more than the
traced one did (the queue's own losses are in the list). Two random draws at the same rate
agree per connection on only 81 % of long lossy responses (bench/replay/README.md), which
a replay of one's own capture has no reason to pay. ``"random"``: Monkey's Bernoulli loss at
``down_loss``, for what-if paths and sweeps, or a workload without sequence numbers. A
connection without recorded offsets (a :func:`synthetic` ground truth, a database written
before the column existed, a capture that missed the server's SYN: ``down_lost_offsets``
null) falls back on its random loss under ``"trace"`` too.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd

from ..errors import PathtwinError
from .dbcheck import OPTIONAL_CONN, with_optional_columns

CONN_COLUMNS = ("conn", "start_s", "rtt_ms", "down_bps", "up_bps", "down_loss", "up_loss", "mss", "rwin_bytes",
                "quickack", "source_conn_id", "source_client")
#: How a replay loses packets (module doc); the first is the default.
LOSS_MODELS = ("trace", "random")
EXCHANGE_COLUMNS = ("conn", "exchange", "request_bytes", "response_bytes", "header_bytes", "server_delay_s",
                    "query_delay_s", "think_s")


@dataclass
class Workload:
    conns: pd.DataFrame
    exchanges: pd.DataFrame
    #: The server's TCP port the clients connect to.
    port: int = 80
    #: Connections of the source left out, and why (reason -> count).
    skipped: dict = field(default_factory=dict)
    #: Where the source was captured ("server", as Monkey See's traces, or "client"); the
    #: replay captures at the same place so that response times compare like for like.
    vantage: str = "server"
    #: A client-side capture's lower bound of the traced server's initial window, in
    #: segments: the largest first response that arrived whole within one RTT (one flight).
    #: None at the server's side (there the server's TCP is the what-if) or when no
    #: response shows it.
    server_initial_window: Optional[int] = None

    def __post_init__(self):
        self.conns = with_optional_columns(self.conns)
        for name, cols, df in (("conns", CONN_COLUMNS, self.conns), ("exchanges", EXCHANGE_COLUMNS, self.exchanges)):
            missing = [c for c in cols if c not in df.columns]
            if missing:
                raise PathtwinError(f"replay database: the {name} table lacks {', '.join(missing)}")

    def __len__(self) -> int:
        return len(self.conns)

    # -- files -----------------------------------------------------------------------
    def save(self, directory) -> Path:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        self.conns.to_parquet(d / "conns.parquet", index=False)
        self.exchanges.to_parquet(d / "exchanges.parquet", index=False)
        (d / "workload.json").write_text(json.dumps({"port": self.port, "skipped": self.skipped, "vantage": self.vantage,
                                                     "server_initial_window": self.server_initial_window}, indent=2))
        return d

    @classmethod
    def load(cls, directory) -> "Workload":
        """The database :meth:`save` wrote in ``directory``, every value checked
        (:mod:`~pathtwin.replay.dbcheck`): a bad one is a :class:`PathtwinError` naming its
        file, column and row, not a failure later in the replay."""
        from . import dbcheck

        d = Path(directory)
        if not d.is_dir():
            raise PathtwinError(f"{d}: not a replay database ({dbcheck.FILES})")
        meta = dbcheck.read_meta(d / "workload.json")
        conns = dbcheck.check_table(dbcheck.with_optional_columns(dbcheck.read_parquet(d / "conns.parquet")), dbcheck.CONN_RULES,
                                    d / "conns.parquet")
        dbcheck.check_lost_offsets(conns, d / "conns.parquet")
        exchanges = dbcheck.check_table(dbcheck.read_parquet(d / "exchanges.parquet"), dbcheck.EXCHANGE_RULES,
                                        d / "exchanges.parquet")
        dbcheck.check_references(conns, exchanges, d / "conns.parquet", d / "exchanges.parquet")
        return cls(conns, exchanges, port=meta["port"], skipped=meta["skipped"], vantage=meta["vantage"],
                   server_initial_window=meta["server_initial_window"])

    # -- from a capture's analysis ---------------------------------------------------
    @classmethod
    def from_analysis(cls, conns: pd.DataFrame, exchanges: pd.DataFrame, keep_open: bool = False) -> "Workload":
        """The replay database of ``pathtwin.trace.workload(capture)``'s two tables: every
        connection Monkey See keeps (``kept``) that has a request.

        ``keep_open`` also keeps connections whose only fault is that they had not ended
        when the capture did (a browser's idle keep-alive connections): their exchanges are
        complete, and the replay closes them after the last one.

        The capture's vantage point is read off the handshake (:func:`vantage`). A capture
        taken at the clients (most public ones) measures the RTT from SYN to SYN-ACK, sees
        the server's delays one RTT late (subtracted), its client's think times directly,
        and — with no ACK pairs spaced by the bottleneck — the rate of the fastest
        exchange of four or more segments as a lower bound of the bottleneck. Its RTT is
        the SYN-ACK's unless a request was answered sooner (:func:`_client_rtt_ms`), and a
        response's rate leaves out the server's pause between its header and the rest.
        """
        skipped: dict[str, int] = {}
        if len(conns) == 0:
            raise PathtwinError("the capture has no TCP connections to replay")
        at_client = vantage(conns) == "client"
        ok = conns["kept"].copy()
        if keep_open:
            ok |= conns["prune_reason"].eq("incomplete termination")
        by_conn = {cid: g.sort_values("exchange") for cid, g in exchanges.groupby("conn_id")}
        if at_client:
            # No ACK pairs at a client's side of the bottleneck: fall back on throughput.
            no_pairs = conns["prune_reason"].eq("no usable ACK pairs") | (keep_open & conns["bottleneck_bps"].isna())
            conns = conns.assign(bottleneck_bps=[
                _fastest_exchange_bps(by_conn.get(cid), mss) if pd.isna(bw) else bw
                for cid, bw, mss in zip(conns["conn_id"], conns["bottleneck_bps"], conns["mss_server"])])
            ok |= no_pairs & conns["bottleneck_bps"].notna() & conns["handshake_complete"]
        for reason, n in conns.loc[~ok, "prune_reason"].value_counts().items():
            skipped[str(reason)] = int(n)
        kept = conns[ok & conns["bottleneck_bps"].notna()].copy()
        if (ok & conns["bottleneck_bps"].isna()).any():
            skipped["no rate estimate"] = int((ok & conns["bottleneck_bps"].isna()).sum())
        ports = kept["server_port"].value_counts()
        port = int(ports.index[0]) if len(ports) else 80
        other_port = kept["server_port"] != port
        if other_port.any():
            skipped[f"server port other than {port}"] = int(other_port.sum())
            kept = kept[~other_port]
        no_request = [cid for cid in kept["conn_id"] if cid not in by_conn]
        if no_request:
            skipped["no request"] = len(no_request)
            kept = kept[~kept["conn_id"].isin(no_request)]
        if len(kept) == 0:
            raise PathtwinError("no connection of the capture can be replayed: " + ", ".join(f"{n} {r}" for r, n in skipped.items()))
        kept = kept.sort_values("start_s").reset_index(drop=True)
        if at_client:
            rtt_s = pd.Series([_client_rtt_ms(c["syn_rtt_ms"], by_conn[c["conn_id"]]) for _, c in kept.iterrows()],
                              index=kept.index, dtype=float) / 1e3
        else:
            rtt_s = kept["min_rtt_ms"].astype(float) / 1e3
        # Monkey: the client connected half an RTT before the server saw its SYN.
        client_start = kept["start_s"].astype(float) - (0.0 if at_client else rtt_s / 2)
        t0 = float(client_start.min())
        rows, xrows = [], []
        iw = None
        for i, c in kept.iterrows():
            rtt = float(rtt_s[i])
            if at_client:
                flight = _first_flight_segments(by_conn[c["conn_id"]], rtt, c["mss_server"])
                iw = flight if iw is None or (flight is not None and flight > iw) else iw
            bw = float(c["bottleneck_bps"])
            rows.append({
                "conn": i, "start_s": float(client_start[i]) - t0, "rtt_ms": rtt * 1e3,
                "down_bps": bw, "up_bps": bw,
                "down_loss": float(min(max(_num(c["random_loss_rate"], 0.0), 0.0), 0.5)), "up_loss": 0.0,
                "mss": _int_or_none(c["mss_client"]), "rwin_bytes": _client_buffer(c),
                "quickack": c["delayed_ack"] != "delayed",
                "source_conn_id": int(c["conn_id"]), "source_client": f"{c['client_ip']}:{int(c['client_port'])}",
                # A client-side capture shows the server's retransmissions too, but not which
                # of its segments were lost on the way to the capture: no offsets there.
                "down_lost_offsets": None if at_client else _offsets_or_none(c.get("lost_offsets_s2c")),
            })
            if at_client:
                # The client's own times: handshake done at the SYN-ACK, each response had
                # when its last byte arrived.
                established = float(c["start_s"]) + rtt
            else:
                # The client's handshake ends when the server sees its ACK of the SYN-ACK.
                established = float(c["start_s"]) + _num(c["handshake_rtt_ms"], rtt * 1e3) / 1e3
            prev_acked = None
            for _, x in by_conn[c["conn_id"]].iterrows():
                start = float(x["request_start_s"])
                # At the server, the request's first packet also spent its serialization
                # time on the upstream link before it was seen; the replay's pipe adds that
                # again.
                first_packet = 0.0 if at_client else (min(int(x["request_bytes"]), _int_or_none(c["mss_client"]) or 1460) + 40) * 8 / max(bw, 1.0)
                think = start - (established if prev_acked is None else prev_acked) - first_packet
                header = _int_or_none(x["header_bytes"])
                server_delay = max(_num(x["server_delay_ms"], 0.0) / 1e3 - (rtt if at_client else 0.0), 0.0)
                xrows.append({
                    "conn": i, "exchange": int(x["exchange"]), "request_bytes": int(x["request_bytes"]),
                    "response_bytes": int(x["response_bytes"]),
                    "header_bytes": header if header is not None else -1,
                    "server_delay_s": server_delay,
                    "query_delay_s": max(_num(x["query_delay_ms"], 0.0), 0.0) / 1e3 if header is not None else 0.0,
                    "think_s": max(think, 0.0),
                })
                end = _num(x["response_end_s"], start)
                if at_client:
                    prev_acked = end
                else:
                    acked = _num(x.get("response_acked_s"), math.nan)
                    # Without a captured ACK of the response, the client had it half an RTT
                    # after the last byte left, and answered half an RTT before the server
                    # saw it.
                    prev_acked = acked if not math.isnan(acked) else end + rtt
        return cls(pd.DataFrame(rows, columns=CONN_COLUMNS + tuple(OPTIONAL_CONN)), pd.DataFrame(xrows, columns=EXCHANGE_COLUMNS),
                   port=port, skipped=skipped, vantage="client" if at_client else "server", server_initial_window=iw)

    def source_slots(self, addresses: list[str]) -> pd.Series:
        """For each connection, the position of its source connection's client address in
        ``addresses`` (NaN if absent): where the source was itself a recorded workload
        (``run_emulated``/``run_simulated``, pipe i from ``addresses[i]``), the ground-truth
        connection each replayed one stands for."""
        slot = {a: i for i, a in enumerate(addresses)}
        return self.conns["source_client"].str.split(":").str[0].map(slot)

    # -- to the emulator --------------------------------------------------------------
    def pipes(self, server: str = "server", clients: str = "clients", loss: str = LOSS_MODELS[0]) -> list[dict]:
        """One ``[[pipe]]`` per connection, in connection order (pipe i carries conn i).
        ``loss`` (:data:`LOSS_MODELS`): ``"trace"`` drops the transmissions at a connection's
        ``down_lost_offsets`` (``drop``) in place of its random downstream loss where it has
        them; ``"random"`` loses at ``down_loss``."""
        check_loss_model(loss)
        out = []
        for c in self.conns.itertuples(index=False):
            pipe: dict[str, Any] = {"between": [server, clients], "rtt": f"{c.rtt_ms:.6f}ms",
                    "rate": [f"{max(c.down_bps, 1000.0):.0f}bit", f"{max(c.up_bps, 1000.0):.0f}bit"]}
            offsets = c.down_lost_offsets if loss == "trace" else None
            down_loss = float(c.down_loss) if offsets is None else 0.0
            if offsets:
                pipe["drop"] = [[int(o) for o in offsets.split()], []]
            if down_loss > 0 or c.up_loss > 0:
                pipe["loss"] = [down_loss, float(c.up_loss)]
            out.append(pipe)
        return out

    def trace_loss_share(self) -> float:
        """The share of connections whose losses a ``"trace"`` replay takes from the capture
        (the rest fall back on random loss)."""
        return float(self.conns["down_lost_offsets"].notna().mean()) if len(self) else 0.0

    def agent_specs(self, server_ip: str, addresses: list[str]) -> tuple[dict, dict]:
        """The server's and the client's agent specs (``pathtwin.replay.agent``), connection
        i coming from ``addresses[i]``."""
        by_conn = {k: g.sort_values("exchange") for k, g in self.exchanges.groupby("conn")}
        server: dict[str, Any] = {"port": self.port, "conns": {}}
        client: dict[str, Any] = {"server": server_ip, "port": self.port, "conns": []}
        for c in self.conns.itertuples(index=False):
            xs = by_conn.get(c.conn)
            if xs is None:
                continue
            addr = addresses[c.conn]
            server["conns"][addr] = [[int(x.request_bytes), int(x.response_bytes), int(x.header_bytes),
                                      float(x.server_delay_s), float(x.query_delay_s)] for x in xs.itertuples(index=False)]
            client["conns"].append({
                "addr": addr, "start_s": float(c.start_s), "mss": _int_or_none(c.mss),
                "rcvbuf": _int_or_none(c.rwin_bytes), "quickack": bool(c.quickack),
                "exchanges": [[int(x.request_bytes), int(x.response_bytes), float(x.think_s)] for x in xs.itertuples(index=False)],
            })
        return server, client


def check_loss_model(loss: str) -> None:
    if loss not in LOSS_MODELS:
        raise PathtwinError(f"loss model {loss!r}: a replay loses packets as the capture did ('trace') or at random ('random')")


def _offsets_or_none(v) -> Optional[str]:
    """The analysis's ``lost_offsets_s2c`` as stored: text (possibly empty), or None."""
    return v if isinstance(v, str) else None


def vantage(conns: pd.DataFrame) -> str:
    """"server" when most handshakes look as they do next to the server (SYN answered at
    once, the client's ACK one RTT later), "client" when they look the other way round."""
    syn = conns["syn_rtt_ms"].astype(float)
    hs = conns["handshake_rtt_ms"].astype(float)
    both = syn.notna() & hs.notna()
    if not both.any():
        return "server"
    return "client" if float((syn[both] > hs[both]).mean()) > 0.5 else "server"


def _client_rtt_ms(syn_rtt_ms, xs: pd.DataFrame) -> float:
    """A client-side capture's RTT: SYN to SYN-ACK, unless a request was answered sooner.

    At the client, every gap from a request's last byte to its response's first is an RTT
    plus the server's delay, so none is shorter than the path's RTT; the SYN-ACK's, one
    sample, may be longer (a server or a load balancer slow to answer a SYN: a public browser
    capture answered requests 30 ms after they left where the SYN-ACK had taken 37). A
    request sent before the previous response had ended (pipelined) is not a sample: its
    response may follow the previous one at once."""
    best = _num(syn_rtt_ms, math.nan)
    prev_end = -math.inf
    for x in xs.itertuples(index=False):
        gap = _num(x.server_delay_ms, math.nan)
        if _num(x.request_start_s, math.nan) >= prev_end and gap > 0 and not gap >= best:
            best = gap
        prev_end = _num(x.response_end_s, math.inf)
    return best


#: TCP's timestamp option, with its padding (RFC 7323): what it takes from every segment.
TIMESTAMP_OPTION_BYTES = 12


def _first_flight_segments(xs: pd.DataFrame, rtt_s: float, mss) -> Optional[int]:
    """Segments of a connection's first response, seen at the client, if it came in one
    piece (no header/rest split) and whole within less than an RTT of its first segment:
    nothing the client's ACKs released can arrive that soon, so the server sent it all
    before any ACK, as its initial window. None otherwise. Counted in the segments the
    replay's server sends: with timestamps (Linux's, and the simulator's "linux" profile)
    they carry 12 bytes less than the MSS, so a flight of 15 untimestamped 1460-byte
    segments takes 16 of them (counted as 15, the replay's 16th segment waited a round trip:
    +37 % on one response)."""
    if len(xs) == 0:
        return None
    x = xs.iloc[0]
    span = _num(x["response_end_s"], math.nan) - _num(x["response_start_s"], math.nan)
    if _num(x["header_bytes"], math.nan) > 0 or not span < rtt_s:
        return None
    return int(math.ceil(int(x["response_bytes"]) / (_num(mss, 1460.0) - TIMESTAMP_OPTION_BYTES)))


def _fastest_exchange_bps(xs: Optional[pd.DataFrame], mss) -> Optional[float]:
    """The highest rate at which one response of at least four segments arrived (a lower
    bound of the bottleneck, for captures without ACK pairs). A response the server sent in
    two parts (a header, then the rest after ``query_delay_ms``) also counts from the rest's
    first segment, and the higher of the two rates is kept: the server's pause is not
    transfer time (counted, a public browser capture's 44-KB response after a 76-ms pause
    read 1.5 Mbit/s and replayed 23 % slow), but a "header" may also be a first flight and
    its "pause" a round trip, which the whole response's rate then amortises better."""
    if xs is None:
        return None
    seg = _num(mss, 1460.0)
    best = None
    for x in xs.itertuples(index=False):
        start, end = _num(x.response_start_s, math.nan), _num(x.response_end_s, math.nan)
        parts = [(start, float(x.response_bytes))]
        header, query = _num(x.header_bytes, math.nan), _num(x.query_delay_ms, math.nan)
        if not math.isnan(header) and not math.isnan(query):
            parts.append((start + query / 1e3, float(x.response_bytes) - header))
        for first, size in parts:
            span = end - first
            if size >= 4 * seg and span > 0:
                # The first segment's arrival starts the clock: count the bytes after it.
                rate = (size - seg) * 8 / span
                best = rate if best is None else max(best, rate)
    return best


def _client_buffer(c) -> Optional[int]:
    """The client's receive buffer to pin: the first request's window (Monkey §3.2), unless
    the window grew later — an autotuning buffer (Linux) that pinning would cripple."""
    first = _int_or_none(c["rwin_bytes"])
    largest = _int_or_none(c.get("rwin_max_bytes"))
    if first is not None and largest is not None and largest > first:
        return None
    return first


def _num(v, default: float) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return default
    return default if math.isnan(f) else f


def _int_or_none(v) -> Optional[int]:
    f = _num(v, math.nan)
    return None if math.isnan(f) or f <= 0 else int(f)


# -- a ground truth -----------------------------------------------------------------------

#: Client classes (share, downstream and upstream rate ranges in bit/s, RTT range in ms):
#: the access technologies Monkey's Google clients came over (§3.2, Figs. 2-3: dial-up below
#: 56 kbit/s, DSL up to 6 Mbit/s, cable, and faster).
CLIENT_CLASSES = {
    "modem": (0.15, (28_000, 53_000), (28_000, 33_600), (120, 350)),
    "dsl": (0.35, (256_000, 3_000_000), (128_000, 640_000), (20, 120)),
    "cable": (0.30, (2_000_000, 10_000_000), (384_000, 2_000_000), (10, 80)),
    "fast": (0.20, (10_000_000, 100_000_000), (10_000_000, 100_000_000), (5, 60)),
}


#: A "long" response for :func:`synthetic`'s ``long_lossy_share``: at least this many
#: full segments (of 1448 bytes, Linux's payload with timestamps), so that loss and
#: recovery, not slow start's first rounds alone, shape its time.
LONG_SEGMENTS = 50
#: Long lossy responses: bytes (log-uniform) and downstream loss (uniform).
LONG_BYTES = (LONG_SEGMENTS * 1460, 300_000)
LONG_LOSS = (0.005, 0.02)


def synthetic(n: int = 2000, seed: int = 1, duration_s: float = 200.0, lossy_share: float = 0.3,
              long_lossy_share: float = 0.0) -> tuple[Workload, pd.Series]:
    """A ground-truth workload of ``n`` HTTP-like connections, and each one's client class.

    Paths: a class per client (:data:`CLIENT_CLASSES`), rates and RTT uniform in the class's
    ranges (log-uniform for rates), downstream loss on ``lossy_share`` of the paths
    (uniform 0.1-2 %), none upstream. Connections start uniformly over ``duration_s``; 70 %
    make one request, 20 % two, 10 % three, with 0.3-3 s of think time. A response is, with
    even odds, a search (a 1-4 KB header at once, then 4-60 KB of results after a 20-300 ms
    query) or a static object (0.5-200 KB, log-uniform, in one piece); server delays 1-30
    ms. Client TCP: MSS 1460 (PPPoE's 1452 and dial-up's 536 on some), windows of 64 KB or,
    on a fifth, an old client's 16 KB.

    ``long_lossy_share`` (0 by default, which draws the workload above unchanged) turns that
    share of all connections, taken at random among the non-modem clients (a modem would
    take minutes over a long response), into long lossy ones: the first response becomes a
    static object of :data:`LONG_BYTES` (at least :data:`LONG_SEGMENTS` segments) and the
    path's downstream loss :data:`LONG_LOSS` (0.5-2 %). Those draws come from their own
    random stream, so the rest of the workload is the one ``long_lossy_share = 0`` draws.
    """
    if n < 1:
        raise PathtwinError(f"a workload needs at least one connection, not {n}")
    rng = np.random.default_rng(seed)
    names = list(CLIENT_CLASSES)
    shares = np.array([CLIENT_CLASSES[k][0] for k in names])
    kinds = rng.choice(len(names), size=n, p=shares / shares.sum())

    def loguniform(lo, hi):
        return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))

    rows, xrows, classes = [], [], []
    starts = np.sort(rng.uniform(0.0, duration_s, size=n))
    for i in range(n):
        name = names[kinds[i]]
        _, down, up, rtt = CLIENT_CLASSES[name]
        d = loguniform(*down)
        u = min(loguniform(*up), d) if name != "fast" else d
        mss = 536 if name == "modem" and rng.random() < 0.3 else (1452 if name == "dsl" and rng.random() < 0.3 else 1460)
        rows.append({
            "conn": i, "start_s": float(starts[i]), "rtt_ms": float(rng.uniform(*rtt)),
            "down_bps": d, "up_bps": u,
            "down_loss": float(rng.uniform(0.001, 0.02)) if rng.random() < lossy_share else 0.0, "up_loss": 0.0,
            "mss": mss, "rwin_bytes": 16_384 if rng.random() < 0.2 else 65_535, "quickack": True,
            "source_conn_id": i, "source_client": None,
        })
        classes.append(name)
        n_x = int(rng.choice([1, 2, 3], p=[0.7, 0.2, 0.1]))
        for k in range(n_x):
            search = rng.random() < 0.5
            if search:
                header = int(rng.uniform(1000, 4000))
                response = header + int(loguniform(4000, 60000))
                query = float(rng.uniform(0.020, 0.300))
            else:
                header, response, query = -1, int(loguniform(500, 200_000)), 0.0
            xrows.append({
                "conn": i, "exchange": k, "request_bytes": int(rng.uniform(300, 900)), "response_bytes": response,
                "header_bytes": header, "server_delay_s": float(rng.uniform(0.001, 0.030)), "query_delay_s": query,
                "think_s": 0.0 if k == 0 else float(rng.uniform(0.3, 3.0)),
            })
    if long_lossy_share > 0:
        extra = np.random.default_rng([seed, 0x10E6])
        eligible = np.array([i for i in range(n) if classes[i] != "modem"])
        k = min(len(eligible), int(round(long_lossy_share * n)))
        for i in sorted(extra.choice(eligible, size=k, replace=False).tolist()):
            rows[i]["down_loss"] = float(extra.uniform(*LONG_LOSS))
            first = next(x for x in xrows if x["conn"] == i and x["exchange"] == 0)
            first.update(header_bytes=-1, query_delay_s=0.0,
                         response_bytes=int(math.exp(extra.uniform(math.log(LONG_BYTES[0]), math.log(LONG_BYTES[1])))))
    w = Workload(pd.DataFrame(rows, columns=CONN_COLUMNS), pd.DataFrame(xrows, columns=EXCHANGE_COLUMNS), port=80)
    return w, pd.Series(classes, name="client_class")
