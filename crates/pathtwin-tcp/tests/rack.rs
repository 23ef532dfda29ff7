//! RACK-TLP (RFC 8985): lost retransmissions and tail losses repaired without a timeout,
//! reordering within the reordering window not taken for loss. Expectations come from the
//! path's round-trip arithmetic, and each case is checked against the classic sender
//! (`rack: false` / `tlp: false`), which must need the timer or retransmit spuriously.

mod common;

use common::*;
use pathtwin_core::time::Duration;
use pathtwin_tcp::{Event, Segment, TcpConfig};

const MSS: u64 = 1460;

/// Bulk transfer over a 100 ms RTT path without a bottleneck, immediate ACKs.
fn bulk(cfg: TcpConfig, drop: DropFn, secs: u64) -> Sim {
    let mut sim = Sim::symmetric(TcpConfig { delayed_ack: false, ..cfg }, ms(50));
    sim.set_drop(0, drop);
    sim.ep[0].send(u64::MAX / 2);
    sim.run_until(at_ms(secs * 1000));
    sim
}

#[test]
fn lost_retransmission_is_repaired_within_two_rtts_without_a_timeout() {
    // Segment 30 and its first retransmission are lost. min_rto = 1 s (RFC 6298's value)
    // keeps the retransmission timer, armed at the last cumulative ACK, clear of the two
    // RTTs RACK needs.
    let seq = data_seq(30, MSS);
    let cfg = TcpConfig { min_rto: Duration::from_secs(1), ..Default::default() };
    let sim = bulk(cfg.clone(), drop_seq_times(seq, 2), 3);
    let st = sim.ep[0].stats();
    assert_eq!((st.timeouts, st.fast_retransmits, st.lost_retransmissions), (0, 1, 1), "{st:?}");
    let sends = sim.send_times_of(0, seq);
    assert_eq!(sends.len(), 3);
    // Data sent after the first retransmission is SACKed one RTT later, which shows the
    // retransmission lost (RACK's reordering window is zero in recovery); the second
    // retransmission is acknowledged one RTT after that.
    assert_eq!(sends[2] - sends[1], ms(100));
    let episodes = recovery_episodes(&sim);
    assert_eq!(episodes.len(), 1);
    assert_eq!(episodes[0].1 - episodes[0].0, ms(200));

    let classic = bulk(TcpConfig { rack: false, ..cfg }, drop_seq_times(seq, 2), 3);
    assert_eq!(classic.ep[0].stats().timeouts, 1, "without RACK only the timer finds it");
}

/// 20 segments written at once; the last two are lost. The client is connected at 100 ms,
/// sends 10 segments then, the other 10 when their ACKs arrive at 200 ms, and the ACKs of
/// segments 10–17 arrive at 300 ms. min_rto = 1 s keeps the timer clear of the probe.
fn tail_loss(tlp: bool) -> Sim {
    let cfg = TcpConfig { tlp, delayed_ack: false, min_rto: Duration::from_secs(1), ..Default::default() };
    let mut sim = Sim::symmetric(cfg, ms(50));
    sim.set_drop(0, drop_data_indices(&[18, 19]));
    sim.ep[0].send(20 * MSS);
    sim.run_until(at_ms(5000));
    sim
}

#[test]
fn tail_loss_probe_fires_two_srtt_after_the_last_ack_and_avoids_the_timeout() {
    let sim = tail_loss(true);
    let st = sim.ep[0].stats();
    assert_eq!((st.timeouts, st.tail_loss_probes), (0, 1), "{st:?}");
    assert_eq!(sim.ep[0].srtt(), Some(ms(100)));
    // PTO = 2·SRTT after the last ACK (two segments in flight: no delayed-ACK allowance).
    // Nothing new to send, so the probe is segment 19 again; its SACK arrives at 600 ms,
    // RACK deems segment 18 lost, and its retransmission is acknowledged at 700 ms.
    assert_eq!(sim.send_times_of(0, data_seq(19, MSS)), [at_ms(200), at_ms(500)]);
    assert_eq!(sim.send_times_of(0, data_seq(18, MSS)), [at_ms(200), at_ms(600)]);
    assert_eq!(sim.event_time(0, Event::AllAcked), Some(at_ms(700)));

    // Without the probe the timer fires 1 s after the last ACK: segment 18 goes again
    // with cwnd = 1 at 1300 ms, segment 19 on its ACK at 1400 ms, acknowledged at 1500 ms.
    let classic = tail_loss(false);
    assert_eq!(classic.ep[0].stats().timeouts, 1);
    assert_eq!(classic.event_time(0, Event::AllAcked), Some(at_ms(1500)));
}

/// A 10 Mbit/s bottleneck (1.2 ms per full segment) on a 100 ms RTT path; w_max = 150 kB,
/// a little over the 125 kB bandwidth-delay product, keeps the link busy and the queue
/// short. Data segment 20 is delayed by 1.5 ms (one segment overtakes it) and segment 300
/// by 10 ms (eight overtake it) — both well inside RACK's reordering window of
/// min_RTT/4 = 25 ms.
fn reordered(rack: bool, first_reordering: bool) -> Sim {
    let cfg = TcpConfig { rack, delayed_ack: false, max_window: 150_000, ..Default::default() };
    let link = LinkCfg::bottleneck(ms(50), 10_000_000, 1000);
    let mut sim = Sim::new(cfg.clone(), cfg, link, LinkCfg::delay(ms(50)));
    let mut list = vec![(300, ms(10))];
    if first_reordering {
        list.push((20, Duration::from_micros(1500)));
    }
    sim.set_extra_delay(0, delay_data_indices(&list));
    sim.ep[0].send(u64::MAX / 2);
    sim.run_until(at_ms(3000));
    assert_eq!(sim.queue_drops(0), 0);
    sim
}

#[test]
fn reordering_within_the_window_is_not_taken_for_loss() {
    let sim = reordered(true, true);
    let st = sim.ep[0].stats();
    assert_eq!((st.retransmits, st.fast_retransmits, st.timeouts), (0, 0, 0), "{st:?}");

    // RFC 6675's DupThresh rule retransmits segment 300 once three segments are SACKed.
    let classic = reordered(false, true);
    assert_eq!(classic.ep[0].stats().fast_retransmits, 1);
    assert_eq!(classic.ep[0].stats().retransmits, 1);

    // RACK earns its window by seeing reordering: before any, DupThresh SACKed segments
    // close it (RFC 8985 §6.2 step 4), and segment 300 is retransmitted as by RFC 6675.
    let unseen = reordered(true, false);
    assert_eq!(unseen.ep[0].stats().retransmits, 1);
}


#[test]
fn a_tail_loss_before_the_fin_is_repaired_by_the_probe_without_a_timeout() {
    // Linux's profile over a 10 ms path without a bottleneck: 10000 bytes and the FIN, seven
    // segments sent at 10 ms once connected; the last two are lost. The ACKs of the first
    // five arrive at 20 ms (quick ACKs), so SRTT = 10 ms and the probe goes PTO = 2·SRTT +
    // two jiffies (8 ms at CONFIG_HZ = 250, `tcp_schedule_loss_probe`) later, at 48 ms: the
    // last segment again, FIN and all. Its SACK (which covers the FIN, as Linux's does)
    // arrives at 58 ms and RACK deems segment 5 lost at once: retransmitted at 58 ms, as
    // the kernel recovers, with no timeout.
    let mut sim = Sim::symmetric(TcpConfig::linux(), ms(5));
    sim.set_drop(0, drop_data_indices(&[5, 6]));
    sim.ep[0].send(10_000);
    sim.ep[0].close();
    sim.run_until(at_ms(2000));
    let st = sim.ep[0].stats();
    assert_eq!((st.timeouts, st.tail_loss_probes), (0, 1), "{st:?}");
    assert_eq!(sim.send_times_of(0, data_seq(6, 1448)), [at_ms(10), at_ms(48)]);
    assert_eq!(sim.send_times_of(0, data_seq(5, 1448)), [at_ms(10), at_ms(58)]);
}

#[test]
fn a_program_that_closes_after_its_data_left_sends_the_fin_alone_and_its_sack_repairs_the_tail() {
    // As the kernel under a program that writes 10 KB and then closes (bench/fidelity's
    // captures): the seven data segments leave inside write(), the FIN alone after them.
    // The last two data segments are lost; the bare FIN arrives and is SACKed at 20 ms,
    // which shows RACK that segments 5 and 6, sent before it, are lost once their RTT
    // (10 ms) and the reordering window (min_RTT/4 = 2.5 ms) have passed since they went,
    // 2.5 ms later; Linux's timer counts that in jiffies and adds two (`tcp_rack_mark_lost`;
    // 4-ms jiffies at CONFIG_HZ = 250): 3 jiffies, at 32 ms, without a probe or a timeout
    // (the kernel capture: 8.2 ms after the SACK, the jiffies being aligned to its clock).
    // PRR lets one segment go at that timer (`tcp_rack_reo_timeout` counts one delivery for
    // `tcp_cwnd_reduction`), segment 6 on the ACK of segment 5's retransmission, at 42 ms.
    let mut sim = Sim::symmetric(TcpConfig::linux(), ms(5));
    sim.set_drop(0, drop_data_indices(&[5, 6]));
    sim.run_until(at_ms(10));
    sim.ep[0].send(10_000);
    sim.ep[0].close();
    sim.run_until(at_ms(2000));
    let st = sim.ep[0].stats();
    assert_eq!((st.timeouts, st.tail_loss_probes), (0, 0), "{st:?}");
    let fin = sim.sent[0].iter().find(|(_, s)| s.flags.fin()).expect("a FIN");
    assert_eq!((fin.0, fin.1.len, fin.1.seq), (at_ms(10), 0, data_seq(0, 1448) + 10_000));
    assert_eq!(sim.send_times_of(0, data_seq(5, 1448)), [at_ms(10), at_ms(32)]);
    assert_eq!(sim.send_times_of(0, data_seq(6, 1448)), [at_ms(10), at_ms(42)]);
    // The simulator's own TCP (ns2) puts the FIN on the last data segment.
    let mut ns2 = Sim::symmetric(TcpConfig::ns2(), ms(5));
    ns2.run_until(at_ms(10));
    ns2.ep[0].send(10_000);
    ns2.ep[0].close();
    ns2.run_until(at_ms(2000));
    assert!(ns2.sent[0].iter().any(|(_, s)| s.flags.fin() && s.len > 0));
}

/// 10 KB over 1 Mbit/s and 10 ms with `cfg` at both ends, the 6th and 7th data segments and
/// the first FIN lost: the sender's counters once it is over.
fn lost_tail_with_a_bare_fin_probe(cfg: TcpConfig) -> pathtwin_tcp::Stats {
    let link = LinkCfg::bottleneck(ms(5), 1_000_000, 100);
    let mut sim = Sim::new(cfg.clone(), cfg, link, link);
    let (mut data, mut fins) = (0, 0);
    sim.set_drop(
        0,
        Box::new(move |s: &Segment| {
            if s.len > 0 {
                data += 1;
                data == 6 || data == 7
            } else if s.flags.fin() {
                fins += 1;
                fins == 1
            } else {
                false
            }
        }),
    );
    sim.run_until(at_ms(20));
    assert!(sim.ep[0].srtt().is_some(), "connected");
    sim.ep[0].send(10_000);
    sim.ep[0].close();
    sim.run_until(at_ms(5000));
    sim.ep[0].stats().clone()
}

#[test]
fn a_bare_fin_probe_sacked_sooner_than_min_rtt_is_ignored_and_the_tail_waits_for_the_rto() {
    // bench/fidelity's kernel capture (BBR, 10 KB over 1 Mbit/s and 10 ms): the last data
    // segments and the FIN are lost, the tail loss probe is the bare FIN, and its SACK comes
    // back sooner than min_RTT after the probe went: the FIN and its SACK (52 + 64 bytes)
    // are shorter than the SYN and SYN-ACK (60 + 60) whose round trip set min_RTT, 32 µs at
    // 1 Mbit/s. RACK takes such a SACK of a retransmission for one of the original
    // (`tcp_rack_advance`, RFC 8985 §6.2 step 2) and marks nothing lost: the kernel waited
    // for the RTO, and so does the simulator.
    let st = lost_tail_with_a_bare_fin_probe(TcpConfig::linux());
    assert_eq!((st.tail_loss_probes, st.timeouts), (1, 1), "{st:?}");
    assert_eq!(st.bytes_acked, 10_000);
    // Without the window-scale option's 4 bytes the SYN's round trip is the shorter one, the
    // probe's SACK counts, and RACK repairs the tail without the timer.
    let st = lost_tail_with_a_bare_fin_probe(TcpConfig { window_scale: false, ..TcpConfig::linux() });
    assert_eq!(st.timeouts, 0, "{st:?}");
}
