"""`pathtwin measure agent` and measuring real hosts through it.

The agent's refusals one by one against a real agent process on loopback, each spoken on the
wire as a stranger or a careless controller would: every one is an error reply, one line
``refused PEER: REASON`` in the agent's log, and the agent keeps serving (a fresh,
authenticated request works afterwards). Then the controller's side: agents on two loopback
addresses measure each other into a model the schema accepts, and (root) agents inside the
namespaces of an emulated 2-host paths topology measure its configured base RTT and ABW
within tests/test_measure_emu.py's tolerances.
"""

from __future__ import annotations

import json
import os
import re
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import needs_root, run_cli, serial

import pathtwin
from pathtwin.measure import protocol  # noqa: E402

#: The agents' programs bind fixed ports (17000-17999): this file's tests run on one worker
#: of the parallel phase (`--dist loadgroup`), never two of them at once.
pytestmark = pytest.mark.xdist_group("measure-agent-ports")

TOKEN = "4f1c7e0a9b2d38e6c5a4f1e0d9c8b7a6"
#: The refusal tests' agent: small limits, so that "above the limit" is cheap to ask for.
LIMITS = ["--max-rate", "20mbit", "--max-duration", "10s", "--max-flows", "4", "--allow", "127.0.0.0/8",
          "--ports", "17000-17999"]


def token_file(d: Path, text: str = TOKEN, mode: int = 0o600, name: str = "token") -> Path:
    p = d / name
    p.write_text(text + "\n")
    os.chmod(p, mode)
    return p


class AgentProcess:
    """A `pathtwin measure agent` started by the test, its log (stderr) in a file."""

    def __init__(self, tmp: Path, token: Path, listen: str, *args: str, name: str = "a"):
        self.log_path = tmp / f"agent-{name}.log"
        self._log = open(self.log_path, "w")
        self.p = subprocess.Popen([sys.executable, "-m", "pathtwin.cli", "measure", "agent", "--token-file", str(token),
                                   "--listen", listen, "--name", name, *args],
                                  stdout=subprocess.DEVNULL, stderr=self._log)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = re.search(r"listening on ([\d.]+):(\d+)", self.log())
            if m:
                self.host, self.port = m[1], int(m[2])
                return
            if self.p.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise AssertionError(f"the agent did not start: {self.log()}")

    def log(self) -> str:
        return self.log_path.read_text()

    def refusals(self) -> list[str]:
        return [ln for ln in self.log().splitlines() if " refused " in ln]

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self._log.close()


class Wire:
    """A hand-made controller: frames, signs (or not) and reads replies."""

    def __init__(self, agent: AgentProcess, token: str = TOKEN):
        self.sock = socket.create_connection((agent.host, agent.port), timeout=20)
        self.token = token.encode()
        hello = protocol.recv(self.sock, protocol.MAX_REPLY)
        assert hello and hello["hello"] == protocol.HELLO and hello["v"] == 1
        self.challenge = hello["nonce"]
        self.label = "127.0.0.1:%d" % self.sock.getsockname()[1]

    def frame(self, op: str, params: dict, nonce: str | None = None, **extra) -> bytes:
        body = json.dumps({"op": op, "params": params, "nonce": nonce or protocol.new_nonce(), **extra})
        msg = {"v": 1, "body": body, "mac": protocol.request_mac(self.token, self.challenge, body)}
        return self.raw_json(msg)

    @staticmethod
    def raw_json(msg: dict) -> bytes:
        data = json.dumps(msg).encode()
        return struct.pack("!I", len(data)) + data

    def ask(self, data: bytes) -> dict | None:
        """Sends ``data``; the reply's body (None if the agent closed without one)."""
        self.sock.sendall(data)
        try:
            msg = protocol.recv(self.sock, protocol.MAX_REPLY)
        except (ConnectionResetError, protocol.WireError):
            return None
        return json.loads(msg["body"]) if msg else None

    def closed(self) -> bool:
        """Whether the agent closed this connection."""
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, socket.timeout):
            return True

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def agent(tmp_path):
    a = AgentProcess(tmp_path, token_file(tmp_path), "127.0.0.1:0", *LIMITS)
    yield a
    a.stop()


def serves(agent: AgentProcess, name: str = "a") -> None:
    """The agent answers a fresh, authenticated request."""
    w = Wire(agent)
    try:
        r = w.ask(w.frame("info", {}))
        assert r and r["ok"] and r["result"]["name"] == name, r
    finally:
        w.close()


def refused_once(agent: AgentProcess, before: int, reason: str, label: str) -> None:
    """One new refusal line, naming the peer and the reason, on one line."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(agent.refusals()) <= before:
        time.sleep(0.02)
    new = agent.refusals()[before:]
    assert len(new) == 1, new
    assert f"refused {label}: " in new[0] and reason in new[0], new[0]


ECHO = {"port": 17010, "duration": 5}

#: Refusals of requests that authenticate: an error reply naming the reason, and the same
#: connection still served.
OPERATION_REFUSALS = {
    "unknown operation": (("shell", {"cmd": "id"}), "unknown operation 'shell'"),
    "command in the params": (("echo", {**ECHO, "argv": ["/bin/sh", "-c", "touch {marker}"]}),
                              "echo: unknown parameter 'argv' (an agent runs no command it is sent"),
    "command beside the op": (("echo", ECHO, {"command": "touch {marker}"}), "unknown field 'command'"),
    "program as the op": (("/bin/sh", {"args": ["-c", "touch {marker}"]}), "unknown operation '/bin/sh'"),
    "rate above --max-rate": (("send", {"addr": "127.0.0.1", "port": 17011, "flows": 1, "duration": 2, "rate_bps": 1e9}),
                              "send: rate 1e+09 bit/s is above this agent's --max-rate 2e+07 bit/s"),
    "unpaced flows": (("send", {"addr": "127.0.0.1", "port": 17011, "flows": 1, "duration": 2}),
                      "send: parameter 'rate_bps' is missing"),
    "probe rate above --max-rate": (("probe", {"port": 17010, "interval": 1e-6, "duration": 2, "dests": ["127.0.0.1"]}),
                                    "above this agent's --max-rate"),
    "duration above --max-duration": (("probe", {"port": 17010, "interval": 0.1, "duration": 3600, "dests": ["127.0.0.1"]}),
                                      "probe: duration 3600 s is above this agent's --max-duration 10 s"),
    "flows above --max-flows": (("sink", {"port": 17011, "flows": 64, "every": 0.05, "duration": 2}),
                                "sink: 64 flows is outside 1..4 (this agent's --max-flows)"),
    "destination outside --allow": (("send", {"addr": "192.0.2.7", "port": 17011, "flows": 1, "duration": 2,
                                              "rate_bps": 1e6}),
                                    "send: destination 192.0.2.7 is outside --allow (127.0.0.0/8)"),
    "probe destination outside --allow": (("probe", {"port": 17010, "interval": 0.1, "duration": 2,
                                                     "dests": ["127.0.0.1", "10.0.0.1"]}),
                                          "probe: destination 10.0.0.1 is outside --allow"),
    "probe scheduled far ahead": (("probe", {"port": 17010, "interval": 0.1, "duration": 2, "dests": ["127.0.0.1"],
                                             "start_at": 4_000_000_000_000_000_000}),
                                  "probe: start_at is "),
    "host name as destination": (("probe", {"port": 17010, "interval": 0.1, "duration": 2, "dests": ["-rf"]}),
                                 "probe: dests must be an IPv4 address, not '-rf'"),
    "command as the congestion control": (("send", {"addr": "127.0.0.1", "port": 17011, "flows": 1, "duration": 2,
                                                     "rate_bps": 1e6, "cc": "cubic; touch {marker}"}),
                                          "send: cc: 'cubic; touch "),
    "path as the congestion control": (("send", {"addr": "127.0.0.1", "port": 17011, "flows": 1, "duration": 2,
                                                  "rate_bps": 1e6, "cc": "../../bin/sh"}),
                                       "send: cc: '../../bin/sh' is not a congestion control's name"),
    "option as the congestion control": (("send", {"addr": "127.0.0.1", "port": 17011, "flows": 1, "duration": 2,
                                                    "rate_bps": 1e6, "cc": "--help"}),
                                         "send: cc: '--help' is not a congestion control's name"),
    "port outside --ports": (("echo", {"port": 22, "duration": 5}), "echo: port 22 is outside this agent's --ports 17000-17999"),
    "port as a string": (("echo", {"port": "17010; reboot", "duration": 5}), "echo: port must be an integer"),
    "no duration": (("echo", {"port": 17010}), "echo: parameter 'duration' is missing"),
    "result of nothing": (("result", {"handle": "echo-9"}), "result: no operation 'echo-9' on this connection"),
}


@pytest.mark.parametrize("case", OPERATION_REFUSALS)
def test_operation_refusals(agent, tmp_path, case):
    spec, reason = OPERATION_REFUSALS[case]
    marker = tmp_path / "ran"
    op, params, *extra = spec
    params = json.loads(json.dumps(params).replace("{marker}", str(marker)))
    extra_fields = {k: v.replace("{marker}", str(marker)) for k, v in (extra[0] if extra else {}).items()}
    w = Wire(agent)
    before = len(agent.refusals())
    r = w.ask(w.frame(op, params, **extra_fields))
    assert r is not None and r["ok"] is False and reason in r["error"], r
    refused_once(agent, before, reason, w.label)
    # The same connection goes on; so does the agent; nothing was run.
    again = w.ask(w.frame("info", {}))
    assert again and again["ok"], again
    w.close()
    serves(agent)
    assert not marker.exists()
    assert agent.p.poll() is None


def _replayed(w: Wire) -> tuple[dict | None, bytes]:
    data = w.frame("info", {}, nonce="00112233445566778899aabbccddeeff")
    first = w.ask(data)
    assert first and first["ok"], first
    return w.ask(data), data


#: Refusals of what does not authenticate or parse: an error reply (unsigned), the
#: connection closed, the agent serving others.
WIRE_REFUSALS = {
    "wrong token": (lambda w: w.ask(Wire.raw_json(_signed(w, "info", {}, b"not-the-token-but-16-bytes-long"))),
                    "bad MAC (wrong token, or not this connection's challenge)"),
    "missing auth": (lambda w: w.ask(Wire.raw_json({"v": 1, "op": "echo", "params": ECHO})),
                     "unauthenticated request (no body and mac)"),
    "mac but no body": (lambda w: w.ask(Wire.raw_json({"v": 1, "op": "info", "mac": "00" * 32})),
                        "unauthenticated request"),
    "another connection's challenge": (lambda w: w.ask(Wire.raw_json(_signed(w, "info", {}, TOKEN.encode(),
                                                                             challenge="ff" * 16))),
                                       "bad MAC"),
    "replayed nonce": (lambda w: _replayed(w)[0], "replayed nonce"),
    "malformed JSON": (lambda w: w.ask(struct.pack("!I", 9) + b"{not json"), "malformed JSON"),
    "nested too deeply": (lambda w: w.ask(struct.pack("!I", 60_000) + b"[" * 60_000), "malformed JSON (nested too deeply)"),
    "not an object": (lambda w: w.ask(struct.pack("!I", 7) + b"[1,2,3]"), "message is JSON list, not an object"),
    # The header alone: the agent refuses before reading on.
    "oversize message": (lambda w: w.ask(struct.pack("!I", 50_000_000)),
                         "message of 50000000 bytes is over the limit of 65536"),
    "other protocol version": (lambda w: w.ask(Wire.raw_json({"v": 2, "body": "{}", "mac": "00"})),
                               "protocol version 2; this agent speaks 1"),
}


def _signed(w: Wire, op: str, params: dict, token: bytes, challenge: str | None = None) -> dict:
    body = json.dumps({"op": op, "params": params, "nonce": protocol.new_nonce()})
    return {"v": 1, "body": body, "mac": protocol.request_mac(token, challenge or w.challenge, body)}


@pytest.mark.parametrize("case", WIRE_REFUSALS)
def test_wire_refusals(agent, case):
    send, reason = WIRE_REFUSALS[case]
    w = Wire(agent)
    before = len(agent.refusals())
    r = send(w)
    assert r is not None and r["ok"] is False and reason in r["error"], r
    refused_once(agent, before, reason, w.label)
    assert w.closed()
    w.close()
    serves(agent)
    assert agent.p.poll() is None


def test_an_emulated_host_runs_the_programs_it_always_ran():
    """A host with ``popen`` (an emulated one) is handed the same arguments as before the
    operations were typed: no agent-only parameter reaches it (a sink's ``duration`` is its
    test's, which bounds how long it reads after the test: ``endpoints.SINK_DRAIN_LIMIT_S``)."""
    from pathtwin.measure import hosts as hostmod

    class Fake:
        name, ip = "h", "10.0.0.1"

        def __init__(self):
            self.args: list[list[str]] = []

        def popen(self, args, **kw):
            self.args.append(list(args))
            return subprocess.Popen([sys.executable, "-c", "print('ready')"], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)

    h = Fake()
    hostmod.operate(h, "echo", port=17000, duration=30.0).stop()
    hostmod.operate(h, "probe", port=17000, interval=0.099, duration=15.0, dests=["10.0.0.2", "10.0.0.3"]).stop()
    hostmod.operate(h, "sink", port=17001, flows=4, every=0.05, duration=10.0).stop()
    hostmod.operate(h, "send", ready=False, addr="10.0.0.2", port=17001, flows=4, duration=10.0).stop()
    hostmod.operate(h, "send", ready=False, addr="10.0.0.2", port=17001, flows=4, duration=10.0, cc="cubic").stop()
    head = [sys.executable, str(hostmod.ENDPOINTS)]
    assert h.args == [head + ["echo", "--port", "17000"],
                      head + ["probe", "--port", "17000", "--interval", "0.099", "--duration", "15.0", "10.0.0.2", "10.0.0.3"],
                      head + ["sink", "--port", "17001", "--flows", "4", "--every", "0.05", "--duration", "10.0"],
                      head + ["send", "--port", "17001", "--flows", "4", "--duration", "10.0", "10.0.0.2"],
                      head + ["send", "--port", "17001", "--flows", "4", "--duration", "10.0", "--cc", "cubic", "10.0.0.2"]]


@serial
def test_a_peer_trickling_bytes_is_cut_off(agent):
    # Four bytes every 3 s never completes a request in the 10 s a new connection has.
    w = Wire(agent)
    before = len(agent.refusals())
    start = time.monotonic()
    with pytest.raises(OSError):
        for _ in range(8):
            w.sock.sendall(b"\0\0\0\x10" if _ == 0 else b"{}{}")
            time.sleep(3)
    assert time.monotonic() - start < 20
    refused_once(agent, before, "no complete request within 10 s", w.label)
    w.close()
    serves(agent)


def test_a_replayed_request_does_not_verify_on_another_connection(agent):
    first = Wire(agent)
    data = first.frame("info", {})
    assert first.ask(data)["ok"]
    second = Wire(agent)
    before = len(agent.refusals())
    r = second.ask(data)
    assert r is not None and not r["ok"] and "bad MAC" in r["error"]
    refused_once(agent, before, "bad MAC", second.label)
    first.close()
    second.close()
    serves(agent)


def test_replies_are_signed_for_the_request(agent):
    w = Wire(agent)
    nonce = protocol.new_nonce()
    w.sock.sendall(w.frame("info", {}, nonce=nonce))
    msg = protocol.recv(w.sock, protocol.MAX_REPLY)
    assert msg is not None
    assert protocol.verify(protocol.reply_mac(TOKEN.encode(), w.challenge, nonce, msg["body"]), msg["mac"])
    assert not protocol.verify(protocol.reply_mac(b"x" * 16, w.challenge, nonce, msg["body"]), msg["mac"])
    w.close()


def test_programs_done_with_free_their_slots_and_more_at_once_are_refused(agent):
    # A measurement starts far more programs on one connection than run at once (a sink and
    # a sender per test): those done with do not count.
    from pathtwin.measure.agent import MAX_PROGRAMS

    w = Wire(agent)
    for i in range(MAX_PROGRAMS + 4):
        r = w.ask(w.frame("echo", {"port": 17100 + i, "duration": 5}))
        assert r and r["ok"], r
        assert w.ask(w.frame("stop", {"handle": r["result"]["handle"]}))["ok"]
    # Running at once: MAX_PROGRAMS, then a refusal; the agent serves on.
    handles = []
    for i in range(MAX_PROGRAMS):
        r = w.ask(w.frame("echo", {"port": 17200 + i, "duration": 5}))
        assert r and r["ok"], r
        handles.append(r["result"]["handle"])
    before = len(agent.refusals())
    r = w.ask(w.frame("echo", {"port": 17299, "duration": 5}))
    assert r and not r["ok"] and r["error"] == f"busy: {MAX_PROGRAMS} programs running, the most this agent runs at once"
    refused_once(agent, before, "busy", w.label)
    assert w.ask(w.frame("stop", {"handle": handles[0]}))["ok"]
    assert w.ask(w.frame("echo", {"port": 17299, "duration": 5}))["ok"]
    w.close()
    serves(agent)


def test_a_program_it_ran_is_stopped_when_the_controller_goes(agent):
    # An echo server asked for 10 s: the controller's connection ends, so does the server.
    w = Wire(agent)
    r = w.ask(w.frame("echo", {"port": 17020, "duration": 10}))
    assert r and r["ok"], r
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.settimeout(2)
    from pathtwin.measure.endpoints import ECHO, MAGIC, PROBE

    probe.sendto(PROBE.pack(MAGIC, 0, 0, time.time_ns()) + b"\0" * 44, ("127.0.0.1", 17020))
    assert len(probe.recv(100)) == ECHO.size  # it echoes
    w.close()
    time.sleep(1.0)
    probe.sendto(PROBE.pack(MAGIC, 1, 0, time.time_ns()) + b"\0" * 44, ("127.0.0.1", 17020))
    with pytest.raises((socket.timeout, ConnectionRefusedError)):
        probe.recv(100)
    probe.close()
    assert "echo port=17020 duration=10.0 started" in agent.log()


@pytest.mark.parametrize("mode,message", [
    (0o644, "mode 0644 lets others read or change the token; chmod 600"),
    (0o640, "mode 0640 lets others read or change the token"),
    (0o620, "mode 0620"),
])
def test_loose_token_file_is_refused(tmp_path, mode, message):
    tok = token_file(tmp_path, mode=mode)
    r = run_cli("measure", "agent", "--token-file", tok, "--listen", "127.0.0.1:0", timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(f"pathtwin: error: --token-file {tok}: {message}"), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    # The controller refuses it alike, before connecting anywhere.
    r = run_cli("measure", "127.0.0.1:1", "127.0.0.2:1", "--token-file", tok, "-o", tmp_path / "m.toml", timeout=60)
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parametrize("args,message", [
    (["--token-file", "{short}"], "the token is 8 bytes; give at least 16"),
    (["--token-file", "{missing}"], "no such file"),
    (["--token-file", "{tok}", "--allow", "10.0.0.0/33"], "--allow: '10.0.0.0/33' is not an IPv4 CIDR"),
    (["--token-file", "{tok}", "--listen", "localhost"], "--listen localhost: expected ADDR:PORT"),
    (["--token-file", "{tok}", "--ports", "5-2"], "--ports 5-2: expected LOW-HIGH"),
    (["--token-file", "{tok}", "--max-rate", "fast"], "--max-rate"),
    (["--token-file", "{tok}", "--max-flows", "0"], "--max-flows 0: must be at least 1"),
    (["--token-file", "{tok}", "--name", "a b"], "--name 'a b'"),
    (["--token-file", "{tok}", "--address", "host.example"], "--address host.example: not an IPv4 address"),
])
def test_agent_option_refusals(tmp_path, args, message):
    paths = {"short": token_file(tmp_path, "12345678", name="short"), "missing": tmp_path / "none",
             "tok": token_file(tmp_path)}
    args = [a.format(**paths) for a in args]
    listen = [] if "--listen" in args else ["--listen", "127.0.0.1:0"]
    r = run_cli("measure", "agent", *args, *listen, timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("pathtwin: error: ") and message in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_controller_with_the_wrong_token_is_refused(agent, tmp_path):
    other = token_file(tmp_path, "a-different-token-of-32-bytes-xx", name="other")
    before = len(agent.refusals())
    r = run_cli("measure", f"{agent.host}:{agent.port}", "127.0.0.2:1", "--token-file", other, "-o", tmp_path / "m.toml",
                timeout=60)
    assert r.returncode == 2, r.stderr
    assert "refused: bad MAC" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert len(agent.refusals()) == before + 1
    serves(agent)


@pytest.mark.parametrize("args,message", [
    (["--flows", "1,8"], "--flows 8: above host a (127.0.0.1:{port})'s agent's --max-flows 4"),
    (["--duration", "11s"], "host a (127.0.0.1:{port})'s agent allows operations of 10 s (--max-duration); this "
                            "measurement needs 16 s (--duration, or --probe-duration + 15 s for the echo servers)"),
    (["--port", "18000"], "--port 18000: host a (127.0.0.1:{port})'s agent allows ports 17000-17999 (--ports)"),
])
def test_settings_the_agents_would_refuse_are_refused_first(agent, tmp_path, args, message):
    other = AgentProcess(tmp_path, token_file(tmp_path), "127.0.0.2:0", *LIMITS, name="b")
    try:
        r = run_cli("measure", f"{agent.host}:{agent.port}", f"{other.host}:{other.port}", "--token-file",
                    token_file(tmp_path), "--probe-duration", "1s", "--probe-interval", "20ms", "--flows", "1", *args,
                    "-o", tmp_path / "m.toml", timeout=60)
    finally:
        other.stop()
    assert r.returncode == 2 and message.format(port=agent.port) in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "m.measure.json").exists()


@pytest.mark.parametrize("args,message", [
    (["a:17100"], "a measurement needs at least two hosts, got 1"),
    (["a:x", "b"], "a:x: port 'x' is not a number"),
    (["a b=h:1", "b"], "host name 'a b' may hold only"),
    (["a:1", "b:2", "--emulate", "x.toml"], "--token-file is for real hosts' agents"),
])
def test_controller_refusals(tmp_path, args, message):
    tok = token_file(tmp_path)
    r = run_cli("measure", *args, "--token-file", tok, "-o", tmp_path / "m.toml", timeout=60)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


@serial
def test_agents_on_loopback_measure_each_other(tmp_path):
    """Two agents on two loopback addresses (one machine: each needs its own address, the
    probes are told apart by it), measured by the command a user runs; the model is one the
    schema accepts, the record is the same as an emulated measurement's, each test ran the
    congestion control asked for (reno, seldom a machine's default) and says so, and the same
    command again resumes (nothing left to measure)."""
    from pathtwin import _native

    tok = token_file(tmp_path)
    a = AgentProcess(tmp_path, tok, "127.0.0.1:0", "--allow", "127.0.0.0/8", "--max-rate", "50mbit", name="a")
    b = AgentProcess(tmp_path, tok, "127.0.0.2:0", "--allow", "127.0.0.0/8", "--max-rate", "50mbit", name="b")
    try:
        out = tmp_path / "model.toml"
        cmd = ["measure", f"{a.host}:{a.port}", f"{b.host}:{b.port}", "--token-file", tok, "--flows", "1",
               "--duration", "1s", "--probe-interval", "20ms", "--probe-duration", "1s", "--port", "17200", "--cc", "reno",
               "-o", out]
        r = run_cli(*cmd, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        cfg = json.loads(_native.validate_config(out.read_text(), "toml", str(out)))
        assert cfg["hosts"] == ["a", "b"] and [p["between"] for p in cfg["path"]] == [["a", "b"]]
        record = json.loads((tmp_path / "model.measure.json").read_text())
        assert set(record["steps"]) == {"probe", "tput a->b 1", "tput b->a 1"}
        assert record["settings"]["agents"] == {"a": "127.0.0.1", "b": "127.0.0.2"}
        for pair in ("a->b", "b->a"):
            rtt = record["findings"]["rtt"][pair]
            assert rtt["samples"] >= 45 and 0 < rtt["rtt_min_ms"] < 5, rtt
            t = record["steps"][f"tput {pair} 1"]
            # The agent's --max-rate paced the flows (50 Mbit/s of payload; loopback's MTU
            # over its MSS makes the IP-level figure about twice that).
            assert t["rate_cap_bps"] == 50e6 and 0 < t["goodput_bps"] <= 55e6, t
            assert t["cc"] == "reno", t
        assert record["settings"]["cc"] == "reno"
        assert "a->b" in r.stdout and f"model: {out}" in r.stdout
        assert "throughput tests' congestion control: reno (--cc reno)" in r.stdout
        for ag in (a, b):
            assert not ag.refusals(), ag.refusals()
            assert "authenticated" in ag.log()
        again = run_cli(*cmd, timeout=120)
        assert again.returncode == 0 and f"resuming from {tmp_path / 'model.measure.json'}" in again.stdout, again.stderr
        assert json.loads((tmp_path / "model.measure.json").read_text())["steps"] == record["steps"]
    finally:
        a.stop()
        b.stop()


@serial
def test_an_interrupted_measurement_of_agents_resumes(tmp_path):
    """Ctrl-C keeps the finished steps and ends the connections (the agents stop what they
    ran); the same command measures only what is missing, as with --emulate."""
    from conftest import interrupt_once_recorded

    tok = token_file(tmp_path)
    a = AgentProcess(tmp_path, tok, "127.0.0.1:0", "--allow", "127.0.0.0/8", "--max-rate", "20mbit", name="a")
    b = AgentProcess(tmp_path, tok, "127.0.0.2:0", "--allow", "127.0.0.0/8", "--max-rate", "20mbit", name="b")
    try:
        out, state = tmp_path / "model.toml", tmp_path / "model.measure.json"
        cmd = [sys.executable, "-m", "pathtwin.cli", "measure", f"a={a.host}:{a.port}", f"b={b.host}:{b.port}",
               "--token-file", str(tok), "--flows", "1,2", "--duration", "1s", "--probe-interval", "20ms",
               "--probe-duration", "1s", "--port", "17300", "-o", str(out)]
        stopped = interrupt_once_recorded(cmd, state, 2, timeout=120)
        assert stopped.returncode == 130 and f"what was measured is kept in {state}" in stopped.stdout, stopped.stderr[-1000:]
        assert "Traceback" not in stopped.stderr
        kept = json.loads(state.read_text())["steps"]
        assert "probe" in kept and not out.exists()
        again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0 and f"resuming from {state}" in again.stdout, again.stderr[-1000:]
        final = json.loads(state.read_text())["steps"]
        assert set(final) == {"probe"} | {f"tput {x} {n}" for x in ("a->b", "b->a") for n in (1, 2)}
        for k, v in kept.items():
            assert final[k] == v, k
        # The agents' --max-rate is what all of a test's flows get together (loopback has no
        # narrower bottleneck): one flow or two, the same (19.3-20.0 Mbit/s here; the floor
        # leaves room for a loaded machine, and is above the 1/flows a shared budget gave).
        for k in final:
            if k != "probe":
                assert 0.6 * 20e6 <= final[k]["goodput_bps"] <= 1.1 * 20e6, (k, final[k]["goodput_bps"])
        for ag, name in ((a, "a"), (b, "b")):
            assert ag.p.poll() is None and not ag.refusals(), ag.log()[-2000:]
            serves(ag, name)
    finally:
        a.stop()
        b.stop()


#: The emulated paths topology: what the agents inside it should measure.
RTT_MS, ABW_BPS, CAPACITY_BPS = 20.0, 8e6, 20e6
PATHS = f"""
hosts = ["a", "b"]
[[path]]
between = ["a", "b"]
rtt = "{RTT_MS:g}ms"
abw = "{ABW_BPS / 1e6:g}mbit"
capacity = "{CAPACITY_BPS / 1e6:g}mbit"
"""


@needs_root
def test_agents_in_an_emulation_measure_its_paths(tmp_path, no_namespace_left_behind):
    """Agents in the namespaces of an emulated 2-host paths topology; the controller runs in
    host a (it reaches b's agent across the emulated path; its requests are a few hundred
    bytes while tests run). Base RTT and ABW against the configuration, with
    tests/test_measure_emu.py's tolerances: the base RTT is the configured RTT plus the
    probe's and the echo's serialization at the capacity, never below and at most
    RTT_EXCESS_MS above; the ABW within ABW_TOLERANCE of the configured ABW (the path carries
    nothing else, and its queue is sized by NSDI'09's bounds for its ABW and RTT: one flow
    reaches it). A 5-s probe series (250 rounds): the minimum needs one round in which both
    the prober and the echo server woke at once, and on an idle machine they wake late more
    often (with 3-s series, 150 rounds, a clean CI run read 0.46 and 0.75 ms above the path,
    and three of four runs after it missed RTT_EXCESS_MS; with 5-s series 0.29-0.45 ms in
    three runs)."""
    from groundtruth_expect import ECHO_IP, PROBE_IP
    from test_measure_emu import ABW_TOLERANCE, RTT_EXCESS_MS

    from pathtwin import Emulation

    tok = token_file(tmp_path)
    out = tmp_path / "model.toml"
    with Emulation(PATHS, tcp_info=False) as net:
        a, b = net["a"], net["b"]
        logs, agents = {}, []
        for h, peer in ((a, b), (b, a)):
            logs[h.name] = open(tmp_path / f"agent-{h.name}.log", "w")
            agents.append(h.popen([sys.executable, "-m", "pathtwin.cli", "measure", "agent", "--token-file", str(tok),
                                   "--listen", f"{h.ip}:17100", "--name", h.name, "--allow", f"{peer.ip}/32",
                                   "--max-rate", "100mbit", "--max-duration", "20s", "--max-flows", "1"],
                                  stdout=subprocess.DEVNULL, stderr=logs[h.name]))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all("listening on" in (tmp_path / f"agent-{n}.log").read_text()
                                                      for n in ("a", "b")):
            time.sleep(0.1)
        ctl = a.run([sys.executable, "-m", "pathtwin.cli", "measure", f"{a.ip}:17100", f"{b.ip}:17100", "--token-file",
                     str(tok), "--flows", "1", "--duration", "3s", "--probe-interval", "20ms", "--probe-duration", "5s",
                     "-o", str(out)], timeout=300)
        for p in agents:
            p.terminate()
            p.wait(timeout=10)
        for f in logs.values():
            f.close()
    assert ctl.returncode == 0, ctl.stderr[-2000:] + (tmp_path / "agent-a.log").read_text()[-2000:]
    record = json.loads((tmp_path / "model.measure.json").read_text())
    want_rtt = RTT_MS + (PROBE_IP + ECHO_IP) * 8 / CAPACITY_BPS * 1e3
    lines, missed = [], []
    for pair in ("a->b", "b->a"):
        got = record["findings"]["rtt"][pair]["rtt_min_ms"]
        abw = record["steps"][f"tput {pair} 1"]["abw_bps"]
        lines.append(f"{pair}: rtt {got:.3f} ms (configured {want_rtt:.3f}), abw {abw / 1e6:.2f} Mbit/s (configured "
                     f"{ABW_BPS / 1e6:g})")
        if not 0 <= got - want_rtt <= RTT_EXCESS_MS:
            missed.append(f"{pair}: base RTT {got:.3f} ms")
        if not (1 - ABW_TOLERANCE) * ABW_BPS <= abw <= (1 + ABW_TOLERANCE) * ABW_BPS:
            missed.append(f"{pair}: ABW {abw / 1e6:.2f} Mbit/s")
    print("\n".join(lines))
    assert not missed, "; ".join(missed) + "\n" + "\n".join(lines)
