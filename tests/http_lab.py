"""The HTTP-like workload and the checks shared by the trace-analysis ground-truth tests.

A server that, per connection, reads a request, waits the response delay, writes a short
header, waits the query delay, writes the results and closes (a search engine's shape, the
one Monkey See's delays are defined on), and a client that makes a few such requests one
after another. Both are plain Python run inside a namespace, so the tests need nothing
beyond the interpreter. `check_recovered` holds the trace-analysis issue's tolerances
(min RTT 5 %, bottleneck 15 %, loss 1 point, delays 5 ms) so that every path the tests
build — a hand-made router, the emulator — is held to the same ones.

The delays are checked against what the server realised, not what it was told: it prints,
per connection, the time from the request's arrival (the kernel's receive timestamp,
SO_TIMESTAMPNS) to writing the header, and from the header to the body. On a busy VM a
process blocked in recv wakes milliseconds after its data arrives and a sleep overshoots (a
CI run saw a 30-ms response delay come out near 37 ms); the trace rightly shows the delay
that happened.
"""

from __future__ import annotations

import json
import statistics
import subprocess

import pandas as pd
from kernel_stamps import KERNEL_STAMP

RESPONSE_DELAY_S = 0.030
QUERY_DELAY_S = 0.080
HEADER_BYTES = 300
BODY_BYTES = 150_000
CONNECTIONS = 8

# argv: port, response delay (s), query delay (s), header bytes, body bytes (one size, or
# comma-separated sizes taken in turn by the connections), connections.
SERVER = KERNEL_STAMP + r"""
import json, socket, sys, time
port, resp_delay, query_delay, header, n = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[6])
bodies = [int(b) for b in sys.argv[5].split(',')]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
# On the listener, so that the kernel stamps a request that arrives before accept() returns
# (timestamping is off for packets that arrive while no socket asks for it).
s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
s.bind(('0.0.0.0', port))
s.listen(16)
print('ready', flush=True)
for i in range(n):
    body = bodies[i % len(bodies)]
    c, _ = s.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    req, arrived = b'', None
    while b'\r\n\r\n' not in req:
        chunk, anc, _, _ = c.recvmsg(4096, STAMP_SPACE)
        if not chunk:
            break
        req += chunk
        arrived = kernel_stamp(anc)
    time.sleep(resp_delay)
    head = b'HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n'
    headed = time.time_ns()
    c.sendall(head + b'X' * (header - len(head) - 2) + b'\r\n')
    time.sleep(query_delay)
    bodied = time.time_ns()
    c.sendall(b'R' * body)
    c.close()
    print(json.dumps({"response_ms": (headed - arrived) / 1e6, "query_ms": (bodied - headed) / 1e6}), flush=True)
"""

# argv: server address, port, connections.
CLIENT = r"""
import socket, sys, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    c = socket.create_connection((host, port))
    c.sendall(b'GET /search?q=%d HTTP/1.0\r\nHost: server\r\n\r\n' % i)
    while c.recv(65536):
        pass
    c.close()
    time.sleep(0.2)
"""


def server_args(port: int, bodies: tuple[int, ...] = (BODY_BYTES,), connections: int = CONNECTIONS) -> list[str]:
    """argv of SERVER for this module's workload on `port` (by default; another test may
    give other body sizes, taken in turn, and another number of connections)."""
    return [str(port), str(RESPONSE_DELAY_S), str(QUERY_DELAY_S), str(HEADER_BYTES), ",".join(map(str, bodies)),
            str(connections)]


def wait_ready(proc: subprocess.Popen) -> None:
    """Waits for a helper's 'ready' line (its stdout must be a text pipe)."""
    line = proc.stdout.readline()
    if "ready" not in line:
        raise RuntimeError(f"helper failed to start: {line!r} {proc.stderr.read() if proc.poll() is not None else ''}")


def realised_delays(server_stdout: str, connections: int = CONNECTIONS) -> tuple[float, float]:
    """The median response and query delays (ms) the server printed after its 'ready' line."""
    rows = [json.loads(line) for line in server_stdout.splitlines() if line.startswith("{")]
    assert len(rows) == connections, f"the server reported {len(rows)} connections: {server_stdout!r}"
    return statistics.median(r["response_ms"] for r in rows), statistics.median(r["query_ms"] for r in rows)


def inferred_loss(conns: pd.DataFrame) -> float:
    """Lost server data packets per server data packet, over all connections."""
    data = conns["data_packets_s2c"].sum()
    return float((conns["loss_rate"] * conns["data_packets_s2c"]).sum() / data)


def check_recovered(conns: pd.DataFrame, rtt_ms: float, rate_bps: float, loss: float,
                    delays_ms: tuple[float, float]) -> None:
    """Asserts that the analysis of this module's workload recovers the path: base RTT
    `rtt_ms`, bottleneck `rate_bps`, downstream loss fraction `loss` (the realised one, when
    the path can count it), and the server's realised response and query delays
    (`realised_delays`)."""
    assert len(conns) == CONNECTIONS
    assert conns["termination"].eq("fin").all()
    assert conns["handshake_complete"].all()

    rtt = conns["min_rtt_ms"].median()
    assert abs(rtt - rtt_ms) <= 0.05 * rtt_ms, f"min RTT {rtt} ms"

    bw = conns["bottleneck_bps"].median()
    assert abs(bw - rate_bps) <= 0.15 * rate_bps, f"bottleneck {bw} b/s"

    got = inferred_loss(conns)
    assert abs(got - loss) <= 0.01, f"loss inferred {got:.4f}, truth {loss:.4f}"

    response_truth, query_truth = delays_ms
    delay = conns["server_delay_ms"].median()
    assert abs(delay - response_truth) <= 5, f"response delay {delay} ms, realised {response_truth:.1f} ms"
    query = conns["query_delay_ms"].median()
    assert abs(query - query_truth) <= 5, f"query delay {query} ms, realised {query_truth:.1f} ms"

    assert (conns["http_method"] == "GET").all()
    assert (conns["http_status"] == 200).all()
    assert (conns["bytes_s2c"] >= BODY_BYTES + HEADER_BYTES).all()
    assert (conns["unique_bytes_s2c"] == BODY_BYTES + HEADER_BYTES).all()
