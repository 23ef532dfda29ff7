"""`[tcp] newreno_timer`: NewReno's retransmission timer during fast recovery (RFC 6582 §3.2
step 5), as a user sets it. No ns-2 needed: the expectation is the RFC's description of the
two variants on a slow-start overshoot (one flow, 20 ms RTT, 20 Mbit/s, 50-packet DropTail),
which loses dozens of segments of one window. Impatient restarts the timer on the first
partial ACK only, so with one hole repaired per 20-ms round trip the 200-ms timer runs out
inside the recovery; Slow-but-Steady restarts it on every partial ACK and repairs every hole
without a timeout. A misspelt value is a one-line error naming the key.
"""

from __future__ import annotations

import pytest

import pathtwin
from pathtwin.errors import PathtwinError


def scenario(timer: str | None) -> str:
    key = f'newreno_timer = "{timer}"' if timer else ""
    return f"""
hosts = ["a", "b"]
[run]
duration = "5s"
[tcp]
cc = "newreno"
sack = false
delayed_ack = false
initial_window = 2
max_window = "1GB"
rcv_window = "1GB"
{key}
[[link]]
between = ["a", "b"]
rate = "20mbit"
delay = "10ms"
queue = "50p"
[[flow]]
from = "a"
to = "b"
"""


def outcome(timer: str | None) -> tuple[int, int]:
    f = pathtwin.simulate(scenario(timer)).flows
    return int(f["fast_retransmits"][0]), int(f["timeouts"][0])


def test_impatient_times_out_inside_the_overshoot_recovery_and_slow_but_steady_does_not():
    fr, timeouts = outcome("slow-but-steady")
    assert fr >= 1 and timeouts == 0
    fr, timeouts = outcome("impatient")
    assert fr >= 1 and timeouts >= 1


def test_default_is_impatient():
    assert outcome(None) == outcome("impatient")


def test_unknown_value_names_the_key():
    with pytest.raises(PathtwinError, match=r"tcp\.newreno_timer: unknown variant `fast`"):
        pathtwin.simulate(scenario("fast"))
