//! ECN (RFC 3168): negotiation (§6.1.1), the receiver's echo (§6.1.3), the sender's
//! once-per-window reduction with CWR (§6.1.2), and which segments are ECN-capable
//! (§6.1.5–6.1.6), checked in the virtual-time harness.

mod common;

use common::*;
use pathtwin_core::time::Instant;
use pathtwin_tcp::{CcAlgorithm, Ecn, Flags, Segment, TcpConfig};
use std::collections::BTreeSet;

const MSS: u64 = 1460;

fn cfg(ecn: bool) -> TcpConfig {
    TcpConfig { ecn, delayed_ack: false, ..Default::default() }
}

/// Bulk transfer from the client over a 100 ms RTT path without a bottleneck; `marks` are
/// 0-based indices of client data segments marked CE on the way.
fn bulk(client: TcpConfig, server: TcpConfig, marks: &[u64], secs: u64) -> Sim {
    let mut sim = Sim::new(client, server, LinkCfg::delay(ms(50)), LinkCfg::delay(ms(50)));
    sim.set_mark(0, drop_data_indices(marks));
    sim.ep[0].send(u64::MAX / 2);
    sim.run_until(at_ms(secs * 1000));
    sim
}

fn syn_of(sim: &Sim, side: usize) -> Segment {
    sim.sent[side].iter().find(|(_, s)| s.flags.syn()).unwrap().1
}

fn has(seg: &Segment, f: Flags) -> bool {
    seg.flags.contains(f)
}

#[test]
fn ecn_is_used_when_the_client_asks_and_the_server_accepts() {
    for (client, server) in [(false, false), (false, true), (true, false), (true, true)] {
        let sim = bulk(cfg(client), cfg(server), &[], 1);
        let syn = syn_of(&sim, 0);
        let synack = syn_of(&sim, 1);
        // §6.1.1: ECN-setup SYN = ECE|CWR, ECN-setup SYN-ACK = ECE without CWR. A server
        // accepts whenever asked (Linux's default tcp_ecn = 2 does too).
        assert_eq!(has(&syn, Flags::ECE | Flags::CWR), client, "{client} {server}");
        assert_eq!(has(&synack, Flags::ECE), client);
        assert!(!has(&synack, Flags::CWR));
        assert_eq!(sim.ep[0].ecn_enabled(), client);
        assert_eq!(sim.ep[1].ecn_enabled(), client);
        let data_ect = sim.sent[0].iter().filter(|(_, s)| s.len > 0).all(|(_, s)| s.ecn == Ecn::Ect0);
        let data_not_ect = sim.sent[0].iter().filter(|(_, s)| s.len > 0).all(|(_, s)| s.ecn == Ecn::NotEct);
        assert!(if client { data_ect } else { data_not_ect });
        assert!(sim.ep[1].stats().bytes_delivered > 0);
    }
}

#[test]
fn a_retransmitted_syn_gives_up_ecn() {
    let mut sim = Sim::new(cfg(true), cfg(true), LinkCfg::delay(ms(50)), LinkCfg::delay(ms(50)));
    sim.set_drop(0, drop_syn_times(1));
    sim.ep[0].send(100_000);
    sim.run_until(at_ms(5000));
    let syns: Vec<Segment> = sim.sent[0].iter().filter(|(_, s)| s.flags.syn()).map(|(_, s)| *s).collect();
    assert_eq!(syns.len(), 2);
    assert!(has(&syns[0], Flags::ECE | Flags::CWR));
    assert!(!syns[1].flags.intersects(Flags::ECE | Flags::CWR));
    // The server saw only the plain SYN, so it answers without ECE and neither end uses ECN.
    assert!(!has(&syn_of(&sim, 1), Flags::ECE));
    assert!(!sim.ep[0].ecn_enabled() && !sim.ep[1].ecn_enabled());
    assert_eq!(sim.ep[1].stats().bytes_delivered, 100_000);
    assert!(sim.sent[0].iter().all(|(_, s)| s.ecn == Ecn::NotEct));
}

#[test]
fn a_peer_that_does_not_ask_never_sees_ece_or_cwr() {
    // The client does not ask; every data segment is offered for marking.
    let mut sim = Sim::new(cfg(false), cfg(true), LinkCfg::delay(ms(50)), LinkCfg::delay(ms(50)));
    sim.set_mark(0, Box::new(|_| true));
    sim.set_mark(1, Box::new(|_| true));
    sim.ep[0].send(2_000_000);
    sim.ep[1].send(500_000);
    sim.run_until(at_ms(5000));
    assert_eq!(sim.ep[1].stats().bytes_delivered, 2_000_000);
    assert_eq!(sim.ep[0].stats().bytes_delivered, 500_000);
    for side in 0..2 {
        assert_eq!(sim.ce_marks(side), 0, "nothing is ECN-capable, so nothing is marked");
        for (_, s) in &sim.sent[side] {
            assert!(!s.flags.intersects(Flags::ECE | Flags::CWR), "{s:?}");
            assert_eq!(s.ecn, Ecn::NotEct);
        }
        assert_eq!(sim.ep[side].stats().ecn_reductions, 0);
    }
}

/// Segment 30 is the first of the third round (10 + 20 before it, no delayed ACKs), sent
/// with cwnd = 40 segments; the ACK for it finds 39 segments (31..69) outstanding.
const FIRST_OF_ROUND_3: u64 = 30;

#[test]
fn several_marks_in_one_window_halve_cwnd_once_and_retransmit_nothing() {
    let marks = [FIRST_OF_ROUND_3, 31, 35, 50];
    let sim = bulk(cfg(true), cfg(true), &marks, 2);
    let (c, s) = (sim.ep[0].stats(), sim.ep[1].stats());
    assert_eq!(sim.ce_marks(0), 4);
    assert_eq!(s.ce_received, 4);
    assert_eq!(c.ecn_reductions, 1, "once per window (§6.1.2)");
    assert_eq!((c.retransmits, c.fast_retransmits, c.timeouts), (0, 0, 0));
    // Reno's reaction to a fast retransmit (RFC 5681 eq. 4): ssthresh = FlightSize / 2,
    // cwnd = ssthresh, with FlightSize = 39 segments when the echo for segment 30 arrives.
    let reduced = sim.trace.iter().find(|t| t.ssthresh < u64::MAX / 2).unwrap();
    assert_eq!(reduced.ssthresh, 39 * MSS / 2);
    assert_eq!(reduced.cwnd, 39 * MSS / 2);
    let before = sim.trace.iter().take_while(|t| t.t < reduced.t).last().unwrap();
    assert_eq!(before.cwnd, 40 * MSS, "no growth on the ACK that carries the echo");

    // Exactly one CWR, on the first new data segment sent after the reduction.
    let cwr: Vec<&(Instant, Segment)> = sim.sent[0].iter().filter(|(_, s)| has(s, Flags::CWR) && !s.flags.syn()).collect();
    assert_eq!(cwr.len(), 1);
    let (cwr_t, cwr_seg) = *cwr[0];
    let first_after = sim.sent[0].iter().find(|(t, s)| *t >= reduced.t && s.len > 0).unwrap();
    assert_eq!(first_after.1.seq, cwr_seg.seq);
    assert_eq!(cwr_seg.ecn, Ecn::Ect0);

    // §6.1.3: the receiver sets ECE on every ACK from the one for the first mark until the
    // CWR segment arrives (50 ms later), and on none after it.
    let first_mark_ack = data_seq(FIRST_OF_ROUND_3 + 1, MSS);
    let cwr_arrives = cwr_t + ms(50);
    let acks: Vec<&(Instant, Segment)> = sim.sent[1].iter().filter(|(_, s)| s.flags.ack() && !s.flags.syn()).collect();
    for (t, a) in &acks {
        let should_echo = a.ack >= first_mark_ack && *t < cwr_arrives;
        assert_eq!(has(a, Flags::ECE), should_echo, "ACK {} at {t:?}", a.ack);
    }
    assert!(acks.iter().filter(|(_, a)| has(a, Flags::ECE)).count() > marks.len());
}

#[test]
fn a_mark_in_a_later_window_reduces_again() {
    // Segment 200 is sent long after the CWR for the first reaction was acknowledged.
    let sim = bulk(cfg(true), cfg(true), &[FIRST_OF_ROUND_3, 200], 3);
    let c = sim.ep[0].stats();
    assert_eq!(c.ecn_reductions, 2);
    assert_eq!(c.retransmits, 0);
    assert_eq!(sim.sent[0].iter().filter(|(_, s)| has(s, Flags::CWR) && !s.flags.syn()).count(), 2);
}

#[test]
fn a_ce_mark_is_acknowledged_at_once_despite_delayed_acks() {
    // With delayed ACKs, a lone in-order segment waits up to 40 ms for its ACK; marked CE it
    // is acknowledged on arrival (Linux's quick-ACK on CE).
    let delayed = TcpConfig { ecn: true, ..Default::default() };
    for (marks, expect_immediate) in [(vec![], false), (vec![0u64], true)] {
        let mut sim = Sim::new(delayed.clone(), delayed.clone(), LinkCfg::delay(ms(50)), LinkCfg::delay(ms(50)));
        sim.set_mark(0, drop_data_indices(&marks));
        sim.run_until(at_ms(500));
        sim.ep[0].send(100);
        sim.run_until(at_ms(1000));
        let (t_data, _) = *sim.sent[0].iter().find(|(_, s)| s.len > 0).unwrap();
        let (t_ack, ack) = *sim.sent[1].iter().find(|(_, s)| s.ack == 101).unwrap();
        assert_eq!(t_ack == t_data + ms(50), expect_immediate, "{marks:?}");
        assert_eq!(has(&ack, Flags::ECE), expect_immediate);
    }
}

#[test]
fn only_new_data_is_ect_not_acks_retransmissions_or_syns() {
    // Data both ways, one loss each way, and marks: every segment's codepoint is checked.
    let mut sim = Sim::new(cfg(true), cfg(true), LinkCfg::delay(ms(50)), LinkCfg::delay(ms(50)));
    sim.set_drop(0, drop_data_indices(&[20]));
    sim.set_drop(1, drop_data_indices(&[5]));
    sim.set_mark(0, drop_data_indices(&[40]));
    sim.ep[0].send(1_000_000);
    sim.ep[1].send(200_000);
    sim.run_until(at_ms(5000));
    assert_eq!(sim.ep[1].stats().bytes_delivered, 1_000_000);
    assert_eq!(sim.ep[0].stats().bytes_delivered, 200_000);
    for side in 0..2 {
        assert!(sim.ep[side].stats().retransmits > 0);
        let mut seen = BTreeSet::new();
        let mut ect = 0;
        for (_, s) in &sim.sent[side] {
            let new_data = s.len > 0 && seen.insert(s.seq);
            assert_eq!(s.ecn != Ecn::NotEct, new_data, "side {side}: {s:?}");
            assert_ne!(s.ecn, Ecn::Ce, "endpoints never send CE");
            ect += new_data as u64;
        }
        assert!(ect > 0);
    }
    assert_eq!(sim.ep[1].stats().ce_received, 1);
}

#[test]
fn marking_instead_of_dropping_keeps_the_flow_free_of_loss() {
    // 10 Mbit/s, 40 ms RTT (a BDP of ~33 packets) and a 200-packet buffer that marks ECT
    // packets finding 20 or more queued. The ECN flow is held near the threshold by the
    // marks; the same flow without ECN fills the buffer and loses packets.
    let run = |ecn: bool| {
        let c = TcpConfig { ecn, ..Default::default() };
        let link = LinkCfg::bottleneck(ms(20), 10_000_000, 200);
        let mut sim = Sim::new(c.clone(), c, link, LinkCfg::delay(ms(20)));
        sim.set_mark_threshold(0, 20);
        sim.ep[0].send(u64::MAX / 2);
        sim.run_until(at_ms(20_000));
        sim
    };
    let ecn = run(true);
    let plain = run(false);
    let (e, p) = (ecn.ep[0].stats(), plain.ep[0].stats());
    assert!(e.ecn_reductions > 0);
    // Marks on segments still in flight at the end have not arrived.
    assert!(ecn.ep[1].stats().ce_received > 0 && ecn.ep[1].stats().ce_received <= ecn.ce_marks(0));
    assert_eq!((ecn.queue_drops(0), e.retransmits), (0, 0));
    assert!(plain.queue_drops(0) > 0 && p.retransmits > 0);
    assert_eq!((plain.ce_marks(0), p.ecn_reductions), (0, 0));
    println!(
        "ecn: {} reductions, {} marks, {} bytes; plain: {} drops, {} bytes",
        e.ecn_reductions,
        ecn.ce_marks(0),
        ecn.ep[1].stats().bytes_delivered,
        plain.queue_drops(0),
        plain.ep[1].stats().bytes_delivered
    );
}

#[test]
fn bbr_counts_the_echo_but_keeps_its_window() {
    // BBR v1 ignores ECN: the endpoint still answers with CWR, the controller's cwnd is
    // whatever the same run without marks gives.
    let bbr = TcpConfig { cc: CcAlgorithm::Bbr, ..cfg(true) };
    let marked = bulk(bbr.clone(), bbr.clone(), &[FIRST_OF_ROUND_3], 2);
    let clean = bulk(bbr.clone(), bbr, &[], 2);
    assert_eq!(marked.ep[0].stats().ecn_reductions, 1);
    assert_eq!(marked.sent[0].iter().filter(|(_, s)| has(s, Flags::CWR) && !s.flags.syn()).count(), 1);
    let cwnds = |s: &Sim| s.trace.iter().map(|t| (t.t, t.cwnd)).collect::<Vec<_>>();
    assert_eq!(cwnds(&marked), cwnds(&clean));
}
