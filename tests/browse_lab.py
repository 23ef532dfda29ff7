"""A browsing-like workload for the kernel ground truths that capture at the client: each
connection is persistent and carries a few request/response exchanges separated by the
client's think times, as a browser's keep-alive connections do.

The client draws, from its seed, per connection 2-4 exchanges, each a response of 1-200 KB
(log-uniform; the first, a page rather than one of its objects, 20-200 KB), a server delay of 5-40 ms and, before every exchange but the first, a think
time; connections run one after another, `GAP_S` apart. A request names its response's size
and delay (``GET /SIZE/DELAY_MS``), so the server needs no state beyond the connection: it
answers each request with a fixed-length header and the body, and closes when the client
does. Both are plain Python run inside a namespace (`relay_lab.run_relay_lab`'s `programs`).
"""

from __future__ import annotations

#: The response header's length: the client reads exactly header + body bytes.
HEADER_BYTES = 200
#: Pause between one connection's close and the next one's SYN.
GAP_S = 0.1

# argv: port, connections. One thread per connection; exits after serving them all.
SERVER = r"""
import socket, sys, threading, time
port, n = int(sys.argv[1]), int(sys.argv[2])
HEADER = %d
def serve(c):
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = b''
    while True:
        while b'\r\n\r\n' not in buf:
            chunk = c.recv(65536)
            if not chunk:
                c.close()
                return
            buf += chunk
        req, buf = buf.split(b'\r\n\r\n', 1)
        size, delay_ms = (int(v) for v in req.split(b' ')[1].split(b'/')[1:3])
        time.sleep(delay_ms / 1e3)
        head = b'HTTP/1.1 200 OK\r\nContent-Length: %%d\r\n' %% size
        c.sendall(head + b'X' * (HEADER - len(head) - 2) + b'\r\n' + b'R' * size)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', port))
s.listen(16)
print('ready', flush=True)
threads = []
for i in range(n):
    c, _ = s.accept()
    t = threading.Thread(target=serve, args=(c,))
    t.start()
    threads.append(t)
for t in threads:
    t.join()
""" % HEADER_BYTES

# argv: server address, port, connections, seed, think time range "lo,hi" (s).
CLIENT = r"""
import math, random, socket, sys, time
host, port, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
think_lo, think_hi = (float(v) for v in sys.argv[5].split(','))
HEADER, GAP = %d, %f
rng = random.Random(seed)
for i in range(n):
    c = socket.create_connection((host, port))
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for k in range(rng.randint(2, 4)):
        if k:
            time.sleep(rng.uniform(think_lo, think_hi))
        size = int(math.exp(rng.uniform(math.log(20000 if k == 0 else 1000), math.log(200000))))
        delay = rng.randint(5, 40)
        c.sendall(b'GET /%%d/%%d HTTP/1.1\r\nHost: server\r\nUser-Agent: lab\r\n\r\n' %% (size, delay))
        left = HEADER + size
        while left:
            got = c.recv(min(left, 65536))
            if not got:
                raise SystemExit('server closed early')
            left -= len(got)
    c.close()
    time.sleep(GAP)
""" % (HEADER_BYTES, GAP_S)


def client_argv(server_ip: str, port: int, connections: int, seed: int, think_s: tuple[float, float]) -> list[str]:
    return [server_ip, str(port), str(connections), str(seed), f"{think_s[0]},{think_s[1]}"]
