//! RACK-TLP (RFC 8985): lost retransmissions and tail losses repaired without a timeout,
//! reordering within the reordering window not taken for loss. Expectations come from the
//! path's round-trip arithmetic, and each case is checked against the classic sender
//! (`rack: false` / `tlp: false`), which must need the timer or retransmit spuriously.

mod common;

use common::*;
use pathtwin_core::time::Duration;
use pathtwin_tcp::{Event, TcpConfig};

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
    // 2 ms (`tcp_schedule_loss_probe`) later, at 42 ms: the last segment again, FIN and all.
    // Its SACK (which covers the FIN, as Linux's does) arrives at 52 ms and RACK deems
    // segment 5 lost at once: retransmitted at 52 ms, as the kernel recovers, with no timeout.
    let mut sim = Sim::symmetric(TcpConfig::linux(), ms(5));
    sim.set_drop(0, drop_data_indices(&[5, 6]));
    sim.ep[0].send(10_000);
    sim.ep[0].close();
    sim.run_until(at_ms(2000));
    let st = sim.ep[0].stats();
    assert_eq!((st.timeouts, st.tail_loss_probes), (0, 1), "{st:?}");
    assert_eq!(sim.send_times_of(0, data_seq(6, 1448)), [at_ms(10), at_ms(42)]);
    assert_eq!(sim.send_times_of(0, data_seq(5, 1448)), [at_ms(10), at_ms(52)]);
}
