//! Loss recovery where pathtwin once parted from ns-2 (bench/tcp/README.md): NewReno without
//! SACK after a window with many losses — the two retransmission-timer variants of RFC 6582
//! and the window that the next reduction halves — and the retransmission timer at a fast
//! retransmit.
//!
//! The halving expectations are RFC 5681 eq. (4) applied to what the sender had in the
//! network (its un-inflated cwnd), as ns-2 does: in ns-2's trace of a one-flow,
//! one-BDP-buffer run (10 Mbit/s, 50 ms RTT, NewReno, Impatient) the fast retransmit sets
//! ssthresh_ 63 and the timeout during that recovery ssthresh_ 31, half the episode's
//! window, not half of the outstanding range, which by then also covers the new data sent
//! during the recovery.

mod common;

use common::*;
use pathtwin_core::time::Instant;
use pathtwin_tcp::{CcAlgorithm, NewRenoTimer, TcpConfig};

const MSS: u64 = 1460;

/// Bulk transfer over a 100 ms RTT path without a bottleneck; `drops` are data-segment
/// indices in the order offered (retransmissions included).
fn bulk(newreno_timer: NewRenoTimer, drops: &[u64], secs: u64) -> Sim {
    let cfg = TcpConfig { sack: false, delayed_ack: false, newreno_timer, ..Default::default() };
    let mut sim = Sim::symmetric(cfg, ms(50));
    sim.set_drop(0, drop_data_indices(drops));
    sim.ep[0].send(u64::MAX / 2);
    sim.run_until(at_ms(secs * 1000));
    sim
}

/// Every other segment of the third round (sent with cwnd = 40 segments) is lost: 20 holes.
fn many_losses() -> Vec<u64> {
    (30..70).step_by(2).collect()
}

fn ssthresh_at(sim: &Sim, t: Instant) -> u64 {
    sim.trace.iter().take_while(|s| s.t <= t).last().unwrap().ssthresh
}

#[test]
fn impatient_timeout_in_recovery_halves_the_episode_window() {
    let sim = bulk(NewRenoTimer::Impatient, &many_losses(), 4);
    let st = sim.ep[0].stats();
    assert_eq!((st.fast_retransmits, st.timeouts), (1, 1), "the timer runs out during the recovery");
    let (start, end) = recovery_episodes(&sim)[0];
    // FlightSize at the fast retransmit is the 40-segment window.
    assert_eq!(ssthresh_at(&sim, start), 20 * MSS);
    // By the timeout the outstanding range also holds the new data sent on the duplicate
    // ACKs of the recovery (about 20 segments per round trip; halving it gave 21 segments);
    // what the sender had in the network per round trip is the episode's cwnd, 20 segments.
    let after = sim.trace.iter().find(|s| s.t >= end && !s.in_recovery).unwrap();
    assert_eq!(after.ssthresh, 10 * MSS, "RFC 5681 eq. (4) on the window in use, as ns-2: 63 -> 31");
    assert_eq!(after.cwnd, MSS, "loss window after a timeout");
}

#[test]
fn slow_but_steady_next_episode_halves_the_window_not_the_data_held_above_a_hole() {
    // The 20 holes take 20 round trips to repair one by one; meanwhile the inflated window
    // lets about 20 new segments per round trip follow. One of them (offered 200th, well
    // inside the recovery) is lost too, so the full ACK of the first episode stops below it
    // with hundreds of segments outstanding that the receiver already holds.
    let mut drops = many_losses();
    drops.push(200);
    let sim = bulk(NewRenoTimer::SlowButSteady, &drops, 6);
    let st = sim.ep[0].stats();
    assert_eq!((st.fast_retransmits, st.timeouts), (2, 0));
    let episodes = recovery_episodes(&sim);
    assert_eq!(episodes.len(), 2);
    assert_eq!(ssthresh_at(&sim, episodes[0].0), 20 * MSS);
    // The first episode ends with cwnd = ssthresh = 20 segments (RFC 6582 step 6); the
    // second halves that, as ns-2's cwnd_/2 does.
    assert_eq!(ssthresh_at(&sim, episodes[1].0), 10 * MSS);
}

/// One loss on a path whose RTT (172 ms) is close to the 200 ms minimum RTO, with a
/// 1 Mbit/s bottleneck spacing the segments (and so the duplicate ACKs) 12 ms apart and a
/// 6-segment window that never queues. The third duplicate ACK comes 36 ms after the last
/// ACK of new data and the retransmission's ACK one RTT later, 208 ms after it: a timer left
/// running from that ACK expires first. Restarted at the fast retransmit, as ns-2 does, it
/// does not, and one loss costs one retransmission (RFC 5681 §3.2).
#[test]
fn fast_retransmit_restarts_the_retransmission_timer() {
    for (cc, sack) in [(CcAlgorithm::Reno, false), (CcAlgorithm::NewReno, false), (CcAlgorithm::NewReno, true)] {
        for rack in [false, true] {
            let cfg = TcpConfig {
                cc,
                sack,
                rack,
                tlp: false,
                delayed_ack: false,
                max_window: 6 * MSS,
                ..Default::default()
            };
            let link = LinkCfg::bottleneck(ms(80), 1_000_000, 100);
            let mut sim = Sim::new(cfg.clone(), cfg, link, link);
            sim.set_drop(0, drop_data_indices(&[40]));
            sim.ep[0].send(80 * MSS);
            sim.run_until(at_ms(20_000));
            assert_eq!(sim.queue_drops(0), 0);
            let st = sim.ep[0].stats();
            assert!(sim.ep[0].srtt().unwrap() > ms(160), "the RTT is close to the minimum RTO");
            assert_eq!(
                (st.fast_retransmits, st.timeouts, st.retransmits),
                (1, 0, 1),
                "{cc:?} sack={sack} rack={rack}"
            );
        }
    }
}
