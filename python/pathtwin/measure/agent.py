"""`pathtwin measure agent`: the small daemon a user runs on each real host to be measured.

It listens for a controller (``remote``) speaking ``protocol``, authenticates every request
by its HMAC over this connection's challenge (the shared token never crosses the wire),
refuses a nonce it has seen, and carries out only the typed operations of ``operations``
(echo server, probe series, TCP sink, parallel TCP senders) after checking their parameters
against its ``Limits``. It runs them as ``endpoints.py`` from its own installation, with
arguments it builds itself from the checked numbers and addresses — never a command, an
argument list or a program name it was sent, and never through a shell. Everything it
starts is stopped at its requested duration plus ``GRACE_S``, when the controller's
connection closes, and when the agent stops (and ends itself a little later should the agent
have been killed outright). Each refusal is one log line (``refused PEER:
REASON``) and an error reply; a request that does not authenticate, or does not parse, also
ends its connection. The agent keeps serving other connections whatever one of them sends.

Control requests beside the operations: ``info`` (the agent's name, the address other hosts
reach it at, its limits), ``result`` (wait for a started operation's JSON result) and
``stop``.

Not here: the operations' parameters (``operations``), the wire format (``protocol``), the
controller's side (``remote``).
"""

from __future__ import annotations

import itertools
import json
import os
import select
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..errors import PathtwinError
from . import operations, protocol
from .hosts import ENDPOINTS, machine_clock
from .operations import Limits, Refused

#: Seconds a started program may outlive its requested duration (start-up, the probe
#: series' last second of echoes, a sink reading its last bytes) before the agent stops it.
GRACE_S = 30.0
#: Seconds a new connection has to send its first request, and an authenticated one may idle.
FIRST_REQUEST_S = 10.0
IDLE_S = 3600.0
#: Connections served at once, and programs running at once (all connections together).
MAX_CONNECTIONS = 8
MAX_PROGRAMS = 16
#: Seconds a server program has to say it listens.
READY_S = 10.0
#: Nonces one connection may use (the set of those seen stays bounded).
MAX_REQUESTS = 100_000
#: Control requests (not measurement traffic) and their parameters.
CONTROL = {"info": set(), "result": {"handle", "timeout"}, "stop": {"handle"}}


@dataclass
class AgentConfig:
    """What an agent is started with: the token, its limits, its name, the address other hosts
    reach it at (``None``: the one the controller reached it at) and the address its servers
    bind (``None``: all)."""

    token: bytes
    limits: Limits
    name: str
    address: Optional[str] = None
    bind: Optional[str] = None


class Failed(Exception):
    """An operation that was allowed but did not work (its program failed or timed out)."""


class Running:
    """One program the agent started for a connection, stopped at its deadline at the latest."""

    def __init__(self, op: str, params: dict[str, Any], bind: Optional[str]):
        self.op = op
        args = [sys.executable, str(ENDPOINTS), *operations.argv(op, params, bind=bind)]
        # No shell, no inherited stdin, its own session (a signal to the agent's terminal is
        # not one to it); the arguments are the checked numbers and addresses.
        env = {**os.environ, "PATHTWIN_ENDPOINT_LIFETIME_S": repr(params["duration"] + GRACE_S + 5)}
        self.p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, start_new_session=True, close_fds=True, env=env)
        self.deadline = time.monotonic() + params["duration"] + GRACE_S
        self._timer = threading.Timer(params["duration"] + GRACE_S, self.stop)
        self._timer.daemon = True
        self._timer.start()
        if op != "send":  # servers and the prober say when they are listening
            assert self.p.stdout is not None
            ready, _, _ = select.select([self.p.stdout], [], [], READY_S)
            line = self.p.stdout.readline() if ready else ""
            if line.strip() != "ready":
                self.stop()
                raise Failed(f"the {op} program did not start" + _tail(self.p))

    def result(self, timeout: float) -> dict:
        """The program's JSON result line, waiting at most ``timeout`` seconds (and never
        past its deadline)."""
        timeout = max(0.0, min(timeout, self.deadline - time.monotonic() + 1.0))
        try:
            out, err = self.p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise Failed(f"the {self.op} program did not finish within {timeout:.0f} s") from None
        lines = [ln for ln in (out or "").splitlines() if ln.startswith("{")]
        if self.p.returncode != 0 or not lines:
            tail = (err or "").strip().splitlines()
            raise Failed(f"the {self.op} program failed (exit {self.p.returncode})" + (f": {tail[-1]}" if tail else ""))
        try:
            return json.loads(lines[-1])
        except ValueError:
            raise Failed(f"the {self.op} program's result is not JSON") from None

    def stop(self) -> None:
        self._timer.cancel()
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def _tail(p: subprocess.Popen) -> str:
    try:
        err = p.stderr.read() if p.stderr is not None else ""
    except (OSError, ValueError):
        return ""
    lines = (err or "").strip().splitlines()
    return f": {lines[-1]}" if lines else ""


class Agent:
    """The server: one thread per connection (at most ``MAX_CONNECTIONS``), the programs it
    runs counted across all of them."""

    def __init__(self, cfg: AgentConfig, listen: tuple[str, int], log: Callable[[str], None]):
        self.cfg = cfg
        self.log = log
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._lock = threading.Lock()
        self._running: set[Running] = set()
        self._starting = 0
        self._handles = itertools.count(1)
        agent = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                agent._connection(self.request, self.client_address)

        class Server(socketserver.ThreadingTCPServer):
            allow_reuse_address = True
            daemon_threads = True

        try:
            self.server = Server(listen, Handler)
        except OSError as e:
            raise PathtwinError(f"--listen {listen[0]}:{listen[1]}: cannot listen ({e.strerror})") from None
        self.address = self.server.server_address
        cfg.limits.own_port = self.address[1]

    def serve(self) -> None:
        """Serves until ``shutdown`` (or an exception in this thread: Ctrl-C, SIGTERM)."""
        try:
            self.server.serve_forever()
        finally:
            self.server.server_close()
            with self._lock:
                running = list(self._running)
            for r in running:
                r.stop()

    def shutdown(self) -> None:
        self.server.shutdown()

    def _connection(self, sock: socket.socket, peer: tuple[str, int]) -> None:
        label = f"{peer[0]}:{peer[1]}"
        if not self._slots.acquire(blocking=False):
            self._refuse(sock, label, f"too many connections (this agent serves {MAX_CONNECTIONS} at once)")
            return
        programs: dict[str, Running] = {}
        try:
            self._serve(sock, label, programs)
        except OSError as e:
            self.log(f"{label}: connection lost ({e.strerror or e})")
        except Exception as e:  # a bug here must not become a traceback in the log, nor end the agent
            self.log(f"{label}: closed after an internal error ({type(e).__name__}: {_line(str(e))})")
        finally:
            for r in programs.values():
                r.stop()
            with self._lock:
                self._running.difference_update(programs.values())
            self._slots.release()

    def _serve(self, sock: socket.socket, label: str, programs: dict[str, Running]) -> None:
        challenge = protocol.new_nonce()
        seen: set[str] = set()
        protocol.send(sock, {"v": protocol.VERSION, "hello": protocol.HELLO, "nonce": challenge})
        # Until a request authenticates, the whole of it must arrive within FIRST_REQUEST_S.
        first: Optional[float] = time.monotonic() + FIRST_REQUEST_S
        count = 0
        while True:
            try:
                msg = protocol.recv(sock, protocol.MAX_REQUEST, deadline=first)
            except protocol.WireError as e:
                self._refuse(sock, label, str(e))
                return
            except socket.timeout:
                if first is not None:
                    self._refuse(sock, label, f"no complete request within {FIRST_REQUEST_S:g} s")
                else:
                    self.log(f"{label}: closed, idle for {IDLE_S:g} s")
                return
            if msg is None:
                return
            # Authentication first: nothing of an unauthenticated request is looked at.
            if msg.get("v") != protocol.VERSION:
                self._refuse(sock, label, f"protocol version {str(msg.get('v'))[:20]}; this agent speaks {protocol.VERSION}")
                return
            body, mac = msg.get("body"), msg.get("mac")
            if not isinstance(body, str) or mac is None:
                self._refuse(sock, label, "unauthenticated request (no body and mac)")
                return
            if not protocol.verify(protocol.request_mac(self.cfg.token, challenge, body), mac):
                self._refuse(sock, label, "bad MAC (wrong token, or not this connection's challenge)")
                return
            try:
                req = json.loads(body)
            except (ValueError, RecursionError):
                req = None
            nonce = req.get("nonce") if isinstance(req, dict) else None
            if not isinstance(req, dict) or not isinstance(nonce, str) or not 16 <= len(nonce) <= 128:
                self._refuse(sock, label, "malformed request body (an object with op, params and a nonce of 16-128 characters)")
                return
            if nonce in seen:
                self._refuse(sock, label, "replayed nonce")
                return
            count += 1
            if count > MAX_REQUESTS:
                self._refuse(sock, label, f"more than {MAX_REQUESTS} requests on one connection")
                return
            seen.add(nonce)
            first = None
            sock.settimeout(IDLE_S)
            reply: dict[str, Any]
            try:
                reply = {"ok": True, "result": self._request(sock, label, req, programs)}
            except Refused as e:
                self.log(f"refused {label}: {_line(str(e))}")
                reply = {"ok": False, "error": _line(str(e))}
            except Failed as e:
                self.log(f"{label}: {_line(str(e))}")
                reply = {"ok": False, "error": _line(str(e))}
            text = json.dumps(reply, separators=(",", ":"))
            protocol.send(sock, {"v": protocol.VERSION, "body": text,
                                 "mac": protocol.reply_mac(self.cfg.token, challenge, nonce, text)})

    def _request(self, sock: socket.socket, label: str, req: dict[str, Any], programs: dict[str, Running]) -> Any:
        extra = set(req) - {"op", "params", "nonce"}
        if extra:
            raise Refused(f"unknown field {sorted(extra)[0][:40]!r} in the request (an agent runs no command it is sent)")
        op, params = req.get("op"), req.get("params", {})
        if op in CONTROL:
            if not isinstance(params, dict) or set(params) - CONTROL[op]:
                raise Refused(f"{op}: takes {', '.join(sorted(CONTROL[op])) or 'no parameters'}")
            return self._control(sock, label, op, params, programs)
        p = operations.check(op, params, self.cfg.limits)
        with self._lock:
            # A slot is taken before the program starts, so that connections starting
            # programs at once cannot pass the limit together.
            self._running = {r for r in self._running if r.p.poll() is None}
            if len(self._running) + self._starting >= MAX_PROGRAMS:
                raise Refused(f"busy: {MAX_PROGRAMS} programs running, the most this agent runs at once")
            self._starting += 1
            handle = f"{op}-{next(self._handles)}"
        try:
            r = Running(str(op), p, self.cfg.bind)
        finally:
            with self._lock:
                self._starting -= 1
        programs[handle] = r
        with self._lock:
            self._running.add(r)
        self.log(f"{label}: {op} " + " ".join(f"{k}={v}" for k, v in p.items()) + f" started ({handle})")
        return {"handle": handle}

    def _control(self, sock: socket.socket, label: str, op: str, params: dict[str, Any],
                 programs: dict[str, Running]) -> Any:
        if op == "info":
            self.log(f"{label}: authenticated")
            return {"name": self.cfg.name, "address": self.cfg.address or sock.getsockname()[0],
                    "version": protocol.VERSION, "limits": self.cfg.limits.record(), "clock": machine_clock()}
        handle = params.get("handle")
        if not isinstance(handle, str) or handle not in programs:
            raise Refused(f"{op}: no operation {str(handle)[:40]!r} on this connection")
        r = programs[handle]
        if op == "result":
            timeout = params.get("timeout", 60.0)
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 <= timeout <= 3600:
                raise Refused("result: timeout must be a number of seconds in 0..3600")
        # Either way the program is done with: its handle goes, and its slot.
        del programs[handle]
        try:
            if op == "stop":
                r.stop()
                return {}
            res = r.result(float(timeout))
            self.log(f"{label}: {handle} done")
            return res
        finally:
            r.stop()
            with self._lock:
                self._running.discard(r)

    def _refuse(self, sock: socket.socket, label: str, reason: str) -> None:
        """Logs ``refused PEER: REASON`` and tells the peer, unauthenticated (the connection
        ends here)."""
        reason = _line(reason)
        self.log(f"refused {label}: {reason}")
        try:
            protocol.send(sock, {"v": protocol.VERSION, "body": json.dumps({"ok": False, "error": reason}), "mac": None})
        except OSError:
            pass


def _line(s: str) -> str:
    """One line, at most 300 characters: a reason never spans log lines."""
    s = " ".join(s.split())
    return s if len(s) <= 300 else s[:297] + "..."


def stderr_log(line: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} pathtwin-agent: {line}", file=sys.stderr, flush=True)


def run(cfg: AgentConfig, listen: tuple[str, int], log: Callable[[str], None] = stderr_log) -> None:
    """Runs an agent in the foreground until SIGINT or SIGTERM, then stops what it started."""
    agent = Agent(cfg, listen, log)

    def term(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, term)
    host, port = str(agent.address[0]), int(agent.address[1])
    lim = cfg.limits
    log(f"{cfg.name} listening on {host}:{port} (protocol {protocol.VERSION}); --max-rate {lim.max_rate_bps:.4g} bit/s, "
        f"--max-duration {lim.max_duration_s:g} s, --max-flows {lim.max_flows}, --ports {lim.ports[0]}-{lim.ports[1]}, "
        f"--allow {','.join(map(str, lim.allow)) or 'none (receives only)'}")
    if os.geteuid() == 0:
        log("running as root: nothing an agent runs needs it; an unprivileged user is safer")
    try:
        agent.serve()
    except KeyboardInterrupt:
        pass
    log("stopped")
