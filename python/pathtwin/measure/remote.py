"""The controller's side of real hosts: ``AgentHost``, a host whose operations its agent
(``pathtwin measure agent``) carries out, and ``measure_agents``, which measures every
ordered pair of such hosts as ``session.measure`` measures any hosts.

An ``AgentHost`` holds one connection to its agent for the whole measurement; each request
is authenticated with the shared token (``protocol``) and each reply checked to come from an
agent holding it. Its name is the one given (``NAME=HOST:PORT``) or the agent's own; its
``ip`` the address the agent says other hosts reach it at. ``send`` asks for the agent's
``--max-rate`` as the flows' pace (an agent refuses unpaced flows).

Not here: serving (``agent``), the steps (``session``).
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
from pathlib import Path
from typing import Any, Optional, Sequence

from ..errors import PathtwinError
from . import protocol
from .session import ECHO_MARGIN_S, Measurement, Progress, Settings, check_hosts, measure

#: The port an agent listens on unless told otherwise (below the ephemeral range, as
#: ``session.Settings.port``).
DEFAULT_PORT = 17100
#: Seconds to connect to an agent and to hear its hello.
CONNECT_S = 10.0
_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


def parse_agent(spec: str) -> tuple[Optional[str], str, int]:
    """``[NAME=]HOST[:PORT]`` -> (name or None, host, port); a one-line error naming the
    argument otherwise."""
    name: Optional[str] = None
    rest = spec
    if "=" in spec:
        name, rest = spec.split("=", 1)
        if not _NAME.match(name):
            raise PathtwinError(f"{spec}: host name {name!r} may hold only letters, digits, '-' and '_'")
    host, port = rest, DEFAULT_PORT
    if rest.count(":") == 1:
        host, p = rest.split(":")
        try:
            port = int(p)
        except ValueError:
            raise PathtwinError(f"{spec}: port {p!r} is not a number") from None
        if not 1 <= port <= 65535:
            raise PathtwinError(f"{spec}: port {port} is not between 1 and 65535")
    elif rest.count(":") > 1:
        raise PathtwinError(f"{spec}: expected [NAME=]HOST[:PORT] (IPv4 or a host name)")
    if not host:
        raise PathtwinError(f"{spec}: no host")
    return name, host, port


class AgentHost:
    """A real host reached through its agent (see the module's docstring)."""

    def __init__(self, spec: str, token: bytes, name: Optional[str] = None):
        given, host, port = parse_agent(spec)
        self.spec = spec
        self.where = f"{host}:{port}"
        self._token = token
        try:
            self._sock = socket.create_connection((host, port), timeout=CONNECT_S)
        except OSError as e:
            raise PathtwinError(f"agent {self.where}: cannot connect ({e.strerror or e}); is `pathtwin measure agent` "
                                "running there?") from None
        try:
            hello = protocol.recv(self._sock, protocol.MAX_REPLY)
        except protocol.WireError as e:
            self.close()
            raise PathtwinError(f"agent {self.where}: not a pathtwin measurement agent ({e})") from None
        except OSError as e:
            self.close()
            raise PathtwinError(f"agent {self.where}: no hello from an agent ({e.strerror or e})") from None
        if not hello or hello.get("hello") != protocol.HELLO or not isinstance(hello.get("nonce"), str):
            self.close()
            raise PathtwinError(f"agent {self.where}: not a pathtwin measurement agent")
        if hello.get("v") != protocol.VERSION:
            self.close()
            raise PathtwinError(f"agent {self.where}: speaks protocol {hello.get('v')}, this controller {protocol.VERSION}")
        self._challenge: str = hello["nonce"]
        self.name = name or given or self.where
        info = self.request("info", {})
        self.name = name or given or str(info.get("name", ""))
        self.limits: dict[str, Any] = info.get("limits", {})
        # Which machine's clock stamps its probes (its boot id; None from an agent that does
        # not say): one-way delays between machines carry their clocks' skew.
        self.clock: Optional[str] = str(info["clock"]) if info.get("clock") else None
        try:
            self._ip = str(ipaddress.IPv4Address(info.get("address")))
        except ValueError:
            self.close()
            raise PathtwinError(f"agent {self.where}: says its address is {info.get('address')!r}, not an IPv4 address") from None

    @property
    def ip(self) -> str:
        return self._ip

    def request(self, op: str, params: dict[str, Any], timeout: float = 30.0) -> Any:
        """Sends one authenticated request and returns its verified result; the agent's
        refusal or failure is a ``PathtwinError`` naming the host."""
        nonce = protocol.new_nonce()
        body = json.dumps({"op": op, "params": params, "nonce": nonce}, separators=(",", ":"))
        try:
            self._sock.settimeout(timeout + 10)
            protocol.send(self._sock, {"v": protocol.VERSION, "body": body,
                                       "mac": protocol.request_mac(self._token, self._challenge, body)})
            msg = protocol.recv(self._sock, protocol.MAX_REPLY)
        except socket.timeout:
            raise PathtwinError(f"host {self.name} ({self.where}): its agent did not answer {op} in time") from None
        except (protocol.WireError, OSError) as e:
            raise PathtwinError(f"host {self.name} ({self.where}): {op}: {e}") from None
        if msg is None:
            raise PathtwinError(f"host {self.name} ({self.where}): the agent closed the connection")
        text = msg.get("body")
        if not isinstance(text, str):
            raise PathtwinError(f"host {self.name} ({self.where}): a reply without a body")
        try:
            reply = json.loads(text)
        except ValueError:
            raise PathtwinError(f"host {self.name} ({self.where}): a reply that is not JSON") from None
        signed = protocol.verify(protocol.reply_mac(self._token, self._challenge, nonce, text), msg.get("mac"))
        if not signed:
            # Only an error may come unsigned (a request the agent could not authenticate);
            # anything else unsigned is not from an agent holding the token.
            err = reply.get("error") if isinstance(reply, dict) and reply.get("ok") is False else None
            raise PathtwinError(f"host {self.name} ({self.where}): " + (f"refused: {err}" if err else
                                "a reply not signed with the token (another program on that port?)"))
        if not reply.get("ok"):
            raise PathtwinError(f"host {self.name} ({self.where}): {reply.get('error')}")
        return reply.get("result")

    def operate(self, op: str, params: dict[str, Any]) -> "RemoteProgram":
        params = dict(params)
        if op == "send" and params.get("rate_bps") is None:
            params["rate_bps"] = float(self.limits.get("max_rate_bps", 0)) or None
        res = self.request(op, params)
        return RemoteProgram(self, str(res["handle"]))

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass


class RemoteProgram:
    """An operation an agent runs for this controller."""

    def __init__(self, host: AgentHost, handle: str):
        self.host, self.handle = host, handle
        self.done = False

    def result(self, what: str, timeout: float) -> dict:
        try:
            out = self.host.request("result", {"handle": self.handle, "timeout": timeout}, timeout=timeout)
        except PathtwinError as e:
            raise PathtwinError(f"{e} ({what})") from None
        finally:
            self.done = True
        if not isinstance(out, dict):
            raise PathtwinError(f"host {self.host.name}: {what}: the agent's result is not an object")
        return out

    def stop(self) -> None:
        if not self.done:
            self.done = True
            try:
                self.host.request("stop", {"handle": self.handle})
            except PathtwinError:
                pass  # the connection is gone: the agent stops what it ran for it


def connect(specs: Sequence[str], token_file: Path) -> list[AgentHost]:
    """Connects to and authenticates with every agent; names checked as ``--hosts`` are."""
    token = protocol.read_token(token_file)
    hosts: list[AgentHost] = []
    try:
        for s in specs:
            hosts.append(AgentHost(s, token))
        names = [h.name for h in hosts]
        if len(set(names)) != len(names):
            raise PathtwinError(f"the agents' names {', '.join(names)} repeat; name them: NAME=HOST:PORT")
        check_hosts(names, names, what="hosts")
        ips = [h.ip for h in hosts]
        if len(set(ips)) != len(ips):
            raise PathtwinError(f"the agents' addresses {', '.join(ips)} repeat: each host needs its own address "
                                "(probes are told apart by it); give each agent --address")
    except BaseException:
        for h in hosts:
            h.close()
        raise
    return hosts


def check_limits(h: AgentHost, settings: Settings) -> None:
    """Settings an agent would refuse, refused before anything is measured (rather than
    after the probes, when the first test asks for them)."""
    lim = h.limits
    who = f"host {h.name} ({h.where})"
    if max(settings.flows) > lim.get("max_flows", 0):
        raise PathtwinError(f"--flows {max(settings.flows)}: above {who}'s agent's --max-flows {lim.get('max_flows')}")
    low, high = lim.get("ports", [0, 0])
    if not (low <= settings.port and settings.port + 1 <= high):
        raise PathtwinError(f"--port {settings.port}: {who}'s agent allows ports {low}-{high} (--ports); the measurement "
                            f"uses {settings.port} and {settings.port + 1}")
    longest = max(settings.duration_s, settings.probe_duration_s + ECHO_MARGIN_S)
    if longest > lim.get("max_duration_s", 0):
        raise PathtwinError(f"{who}'s agent allows operations of {lim.get('max_duration_s'):g} s (--max-duration); "
                            f"this measurement needs {longest:g} s (--duration, or --probe-duration + {ECHO_MARGIN_S:g} s "
                            "for the echo servers)")


def measure_agents(specs: Sequence[str], token_file: Path, settings: Optional[Settings] = None,
                   out: Optional[Path] = None, state_file: Optional[Path] = None,
                   progress: Optional[Progress] = None) -> Measurement:
    """Measures every ordered pair of the hosts whose agents are at ``specs``
    (``[NAME=]HOST[:PORT]``); see ``session.measure`` for the rest."""
    settings = settings or Settings()
    settings.check()
    hosts = connect(specs, token_file)
    try:
        for h in hosts:
            check_limits(h, settings)
        context = {"agents": {h.name: h.ip for h in hosts}}
        return measure(hosts, settings, out=out, state_file=state_file, progress=progress, context=context)
    finally:
        for h in hosts:
            h.close()
