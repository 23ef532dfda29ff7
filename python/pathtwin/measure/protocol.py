"""The wire between a controller (``pathtwin measure HOST...``) and a measurement agent, and
the shared token both hold.

Framing: every message is a 4-byte big-endian length and that many bytes of UTF-8 JSON (an
object). Version 1 (``VERSION``):

1. On connect the agent sends ``{"v": 1, "hello": "pathtwin-measure-agent", "nonce": N}``,
   N a fresh random challenge (32 hex digits) for this connection.
2. Each request is ``{"v": 1, "body": B, "mac": M}``: B the request as JSON text
   (``{"op": ..., "params": {...}, "nonce": n}``, n a fresh random nonce of the controller's),
   M = HMAC-SHA256(token, ``"request" 0 N 0 B``) in hex. The token itself never crosses the
   wire; the MAC ties the request to this connection's challenge (a request recorded on
   another connection does not verify), and the agent refuses a nonce it has seen on the
   connection (a request replayed within it).
3. Each reply is ``{"v": 1, "body": B', "mac": M'}`` with B' ``{"ok": true, "result": ...}``
   or ``{"ok": false, "error": "one line"}`` and M' = HMAC-SHA256(token, ``"reply" 0 N 0 n 0
   B'``), so the controller knows the answer comes from an agent holding the token and
   answers that request. A request that did not authenticate gets an error with no MAC, and
   the connection is closed.

Not here: what the operations are (``operations``), serving (``agent``), asking (``remote``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import socket
import stat
import struct
import time
from pathlib import Path
from typing import Any, Optional

from ..errors import PathtwinError

VERSION = 1
HELLO = "pathtwin-measure-agent"
#: A request's size at most (bytes): the largest real one (a probe series to 64
#: destinations) is under 4 KB.
MAX_REQUEST = 64 * 1024
#: A reply's size at most: a sink's counter samples of a long test are some hundred KB.
MAX_REPLY = 32 * 1024 * 1024
#: The shortest token accepted (bytes): 128 bits, beyond guessing.
MIN_TOKEN = 16
_LEN = struct.Struct("!I")


class WireError(Exception):
    """The peer sent something that is not a message of this protocol; the one-line reason."""


def read_token(path: Path) -> bytes:
    """The shared token from ``path``: a file only its owner may read or write (mode 0600 or
    stricter) holding at least ``MIN_TOKEN`` bytes (surrounding white space left out)."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise PathtwinError(f"--token-file {path}: no such file (make one: "
                            f"umask 077; python3 -c 'import secrets; print(secrets.token_hex(32))' > {path})") from None
    except OSError as e:
        raise PathtwinError(f"--token-file {path}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise PathtwinError(f"--token-file {path}: not a regular file")
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        raise PathtwinError(f"--token-file {path}: mode {mode:04o} lets others read or change the token; "
                            f"chmod 600 {path}")
    try:
        token = path.read_bytes().strip()
    except OSError as e:
        raise PathtwinError(f"--token-file {path}: {e.strerror}") from None
    if len(token) < MIN_TOKEN:
        raise PathtwinError(f"--token-file {path}: the token is {len(token)} bytes; give at least {MIN_TOKEN} "
                            "(e.g. secrets.token_hex(32))")
    return token


def new_nonce() -> str:
    return secrets.token_hex(16)


def request_mac(token: bytes, challenge: str, body: str) -> str:
    return _mac(token, b"request", challenge.encode(), body.encode())


def reply_mac(token: bytes, challenge: str, nonce: str, body: str) -> str:
    return _mac(token, b"reply", challenge.encode(), nonce.encode(), body.encode())


def _mac(token: bytes, *parts: bytes) -> str:
    return hmac.new(token, b"\0".join(parts), hashlib.sha256).hexdigest()


def verify(expected: str, got: Any) -> bool:
    """Whether ``got`` is the MAC ``expected``, compared in constant time."""
    return isinstance(got, str) and hmac.compare_digest(expected.encode(), got.encode())


def send(sock: socket.socket, obj: dict[str, Any]) -> None:
    data = json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()
    sock.sendall(_LEN.pack(len(data)) + data)


def recv(sock: socket.socket, limit: int, deadline: Optional[float] = None) -> Optional[dict[str, Any]]:
    """The next message, or None if the peer closed the connection before one began;
    ``WireError`` for a message longer than ``limit``, cut short, or not a JSON object;
    ``socket.timeout`` if it is not all there by ``deadline`` (``time.monotonic``) or the
    socket's own timeout passes between two reads."""
    head = _exactly(sock, _LEN.size, at_start=True, deadline=deadline)
    if head is None:
        return None
    (n,) = _LEN.unpack(head)
    if n > limit:
        raise WireError(f"message of {n} bytes is over the limit of {limit}")
    data = (_exactly(sock, n, at_start=False, deadline=deadline) or b"") if n else b""
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise WireError(f"malformed JSON ({str(e).splitlines()[0][:80]})") from None
    except RecursionError:
        raise WireError("malformed JSON (nested too deeply)") from None
    if not isinstance(obj, dict):
        raise WireError(f"message is JSON {type(obj).__name__}, not an object")
    return obj


def _exactly(sock: socket.socket, n: int, at_start: bool, deadline: Optional[float]) -> Optional[bytes]:
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            # A whole message by the deadline: a peer trickling a byte now and then does not
            # hold the connection open.
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("deadline")
            sock.settimeout(left)
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            if at_start and not buf:
                return None
            raise WireError(f"connection closed within a message ({len(buf)} of {n} bytes)")
        buf += chunk
    return bytes(buf)
