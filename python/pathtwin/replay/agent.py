"""Monkey Do's client and server emulators: the two programs that re-enact a workload.

Run inside emulated hosts as ``python -m pathtwin.replay.agent server|client SPEC.json
OUT.jsonl``; both are one asyncio process however many connections the workload has.

**Server** (Cheng et al., USENIX ATC 2004, §4.3, Fig. 4): accepts connections on the
workload's port, tells them apart by the client's address (each replayed connection comes
from its own pipe address), and for each of that connection's exchanges reads the request
(its traced size), idles the *server delay*, writes the response's header part, idles the
*query delay*, then writes the rest. After the last exchange it closes, as an HTTP/1.0 or
keep-alive-timeout server does. The kernel's TCP and its settings are the server's own:
that is what a what-if replay changes.

**Client** (§4.2): opens each connection at its start time from its own address, with the
traced MSS (``TCP_MAXSEG``, set before ``connect`` so the SYN announces it) and, where the
trace shows a receive window below what Linux starts with, that window (``SO_RCVBUF``, which
also stops autotuning, as a small Windows buffer would); a client whose ACK policy was
"quick" re-arms ``TCP_QUICKACK`` after every read (Linux clears it). A "delayed" policy
cannot be imposed: Linux acknowledges every segment in slow start whatever the socket asks.
For each exchange it idles its think time (measured from the handshake, or from the end of
the previous response), sends the request and reads the response's traced size.

Both write one JSON line per connection with their own timestamps (``time.monotonic``), so
a run can be checked from either end as well as from the capture.

Spec formats (JSON): server ``{"port": P, "conns": {ADDR: [[request_bytes, response_bytes,
header_bytes, server_delay_s, query_delay_s], ...]}}``; client ``{"server": IP, "port": P,
"conns": [{"addr": ADDR, "start_s": T, "mss": N|null, "rcvbuf": N|null, "quickack": bool,
"exchanges": [[request_bytes, response_bytes, think_s], ...]}]}``.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import time

#: Below this traced receive window the client pins its buffer (see the module doc); at or
#: above it the kernel's autotuning is left alone, as a modern client's would be. Linux's
#: initial receive window for a 1460-byte MSS is 64 KB.
PINNED_WINDOW_BELOW = 65_535
#: How long the client waits for a connection to finish after its last response byte (the
#: server's FIN), before closing it itself.
LINGER_S = 5.0
#: A connection that makes no progress for this long is abandoned and reported as such.
STALL_S = 120.0


def _request(size: int, conn: int, k: int) -> bytes:
    """A request of exactly ``size`` bytes that still reads as HTTP where it fits."""
    head = b"GET /r/%d/%d HTTP/1.1\r\nHost: server\r\nX-Pad: " % (conn, k)
    if size < len(head) + 4:
        return b"G" * size
    return head + b"p" * (size - len(head) - 4) + b"\r\n\r\n"


def _response(size: int) -> bytes:
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % max(size - 40, 0)
    return (head + b"r" * max(size - len(head), 0))[:size]


# -- server -------------------------------------------------------------------------------

async def _serve_conn(spec: dict, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, log: list) -> None:
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    peer = writer.get_extra_info("peername")[0]
    exchanges = spec["conns"].get(peer)
    row = {"addr": peer, "accepted": time.monotonic(), "exchanges": []}
    log.append(row)
    if exchanges is None:
        row["error"] = "no connection of the workload comes from this address"
        writer.close()
        return
    try:
        for req, resp, header, server_delay, query_delay in exchanges:
            if req > 0:
                await asyncio.wait_for(reader.readexactly(req), STALL_S)
            t_req = time.monotonic()
            if server_delay > 0:
                await asyncio.sleep(server_delay)
            body = _response(resp)
            split = header if header and 0 < header < resp else resp
            writer.write(body[:split])
            await writer.drain()
            if split < resp:
                if query_delay > 0:
                    await asyncio.sleep(query_delay)
                writer.write(body[split:])
                await writer.drain()
            row["exchanges"].append([t_req, time.monotonic()])
    except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError) as e:
        row["error"] = f"{type(e).__name__}: {e}"
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except ConnectionError:
            pass


async def run_server(spec: dict, out) -> None:
    log: list = []
    server = await asyncio.start_server(lambda r, w: _serve_conn(spec, r, w, log), host="0.0.0.0",
                                        port=spec["port"], backlog=4096, reuse_address=True)
    print("ready", flush=True)
    try:
        async with server:
            await server.serve_forever()
    finally:
        for row in log:
            out.write(json.dumps(row) + "\n")
        out.flush()


# -- client -------------------------------------------------------------------------------

async def _client_conn(i: int, c: dict, server: str, port: int, t0: float) -> dict:
    row = {"conn": i, "addr": c["addr"], "exchanges": []}
    loop = asyncio.get_running_loop()
    await asyncio.sleep(max(0.0, t0 + c["start_s"] - time.monotonic()))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if c.get("mss"):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, int(c["mss"]))
        if c.get("rcvbuf") and c["rcvbuf"] < PINNED_WINDOW_BELOW:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, int(c["rcvbuf"]))
        quick = bool(c.get("quickack"))
        sock.bind((c["addr"], 0))
        row["start"] = time.monotonic()
        await asyncio.wait_for(loop.sock_connect(sock, (server, port)), STALL_S)
        row["established"] = time.monotonic()
        row["port"] = sock.getsockname()[1]
        for k, (req, resp, think) in enumerate(c["exchanges"]):
            if think > 0:
                await asyncio.sleep(think)
            t_req = time.monotonic()
            if req > 0:
                await asyncio.wait_for(loop.sock_sendall(sock, _request(req, i, k)), STALL_S)
            got = 0
            while got < resp:
                chunk = await asyncio.wait_for(loop.sock_recv(sock, 65536), STALL_S)
                if quick:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
                if not chunk:
                    break
                got += len(chunk)
            row["exchanges"].append([t_req, time.monotonic(), got])
            if got < resp:
                row["error"] = f"response {k} ended after {got} of {resp} bytes"
                break
        # The server closes after its last response; wait for that FIN so the connection
        # ends as traced, but do not hang on a server that keeps it open.
        try:
            await asyncio.wait_for(loop.sock_recv(sock, 65536), LINGER_S)
        except asyncio.TimeoutError:
            pass
    except (OSError, asyncio.TimeoutError) as e:
        row["error"] = f"{type(e).__name__}: {e}"
    finally:
        sock.close()
        row["end"] = time.monotonic()
    return row


async def run_client(spec: dict, out) -> None:
    # A short lead so the first connections do not start while tasks are still created.
    t0 = time.monotonic() + 0.2
    print(json.dumps({"t0": t0}), flush=True)
    tasks = [asyncio.create_task(_client_conn(i, c, spec["server"], spec["port"], t0)) for i, c in enumerate(spec["conns"])]
    for fut in asyncio.as_completed(tasks):
        row = await fut
        out.write(json.dumps(row) + "\n")
    out.flush()


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] not in ("server", "client"):
        print("usage: python -m pathtwin.replay.agent server|client SPEC.json OUT.jsonl", file=sys.stderr)
        return 2
    role, spec_path, out_path = argv
    try:
        with open(spec_path) as f:
            spec = json.load(f)
    except (OSError, ValueError) as e:
        print(f"{spec_path}: cannot read the agent spec ({e})", file=sys.stderr)
        return 2
    with open(out_path, "w") as out:
        try:
            asyncio.run(run_server(spec, out) if role == "server" else run_client(spec, out))
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    import signal

    # The emulation stops its processes with SIGTERM: end like Ctrl-C, writing the log.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    sys.exit(main(sys.argv[1:]))
