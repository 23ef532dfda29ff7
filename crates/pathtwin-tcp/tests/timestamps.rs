//! The timestamp option as Linux uses it (RFC 7323 §4.3; `tcp_replace_ts_recent`,
//! `tcp_ack_update_rtt`): the receiver echoes the TSval of the segment that advanced its
//! cumulative point, and the sender measures RTT from the echo when Karn's rule forbids the
//! sequence-based sample. The expectation is the path's own round trip: no sample can be
//! shorter than the two one-way delays.

mod common;

use common::*;
use pathtwin_tcp::TcpConfig;

const ONE_WAY_MS: u64 = 25;

/// A bulk transfer over a 50-ms path on which the 16th data segment is held back 40 ms: it
/// arrives after RACK's reordering window, so the sender retransmits it spuriously, and the
/// original arrives first and advances the receiver's cumulative point.
fn reordered(cfg: TcpConfig) -> Sim {
    let mut sim = Sim::symmetric(cfg, ms(ONE_WAY_MS));
    sim.set_extra_delay(0, delay_data_indices(&[(15, ms(40))]));
    sim.ep[0].send(300 * 1448);
    sim.run_until(at_ms(3_000));
    sim
}

#[test]
fn an_ack_of_a_spuriously_retransmitted_segment_echoes_the_original() {
    let sim = reordered(TcpConfig::linux());
    let st = sim.ep[0].stats();
    assert!(st.retransmits >= 1, "the reordering caused a retransmission");
    assert_eq!(st.bytes_acked, 300 * 1448);
    // The cumulative ACK of the held-back segment echoes the original's TSval (sent 90 ms
    // before it arrives: 25 + 40 + 25 ms), not the retransmission's (sent less than one RTT
    // before): every sample is at least the path's 50 ms.
    let min = st.rtt_min.expect("samples");
    assert!(min >= ms(2 * ONE_WAY_MS), "smallest RTT sample {min:?} below the path's");
}

#[test]
fn the_echo_is_the_segment_that_advanced_the_cumulative_point() {
    // Receiver side: segments above a hole do not replace TS.Recent (they start above
    // Last.ACK.sent); the ACKs they trigger echo the last in-order segment's TSval.
    let mut sim = Sim::symmetric(TcpConfig::linux(), ms(ONE_WAY_MS));
    sim.record = true;
    sim.set_drop(0, drop_data_indices(&[20]));
    sim.ep[0].send(60 * 1448);
    sim.run_until(at_ms(2_000));
    assert_eq!(sim.ep[0].stats().bytes_acked, 60 * 1448);
    let sent = &sim.sent[0];
    let acks = &sim.sent[1];
    let hole = sent.iter().filter(|(_, s)| s.len > 0).nth(20).expect("the dropped segment").1.seq;
    // Every duplicate ACK for the hole echoes a TSval of a segment below it.
    let below: Vec<_> = sent.iter().filter(|(_, s)| s.len > 0 && s.seq < hole).map(|(_, s)| s.ts_val).collect();
    let dups: Vec<_> = acks.iter().filter(|(_, a)| a.ack == hole && !a.sack.is_empty()).collect();
    assert!(!dups.is_empty());
    for (_, a) in dups {
        let ecr = a.ts_ecr.expect("an echo");
        assert!(below.contains(&ecr), "a duplicate ACK echoed {ecr:?}, not a segment below the hole");
    }
}
