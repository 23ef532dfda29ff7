//! The retransmission timer (RFC 6298): exponential back-off, its cap, Karn's rule, the
//! SYN timeout rules; and timer-driven delayed ACKs.

mod common;

use common::*;
use pathtwin_core::time::{Duration, Instant};
use pathtwin_tcp::{Event, TcpConfig};

/// A 100 ms RTT path; the client is connected at 100 ms with one handshake RTT sample,
/// so SRTT = 100 ms, RTTVAR = 50 ms and RTO = 100 + 4·50 = 300 ms. Tail loss probes are
/// off: a probe would take the place of the first timeout (see `tail_loss_probe_*` in
/// `congestion.rs`), and these tests are about the timer itself.
fn connected(cfg: TcpConfig) -> Sim {
    let cfg = TcpConfig { tlp: false, ..cfg };
    let mut sim = Sim::symmetric(cfg, ms(50));
    sim.run_until(at_ms(100));
    assert_eq!(sim.event_time(0, Event::Connected), Some(at_ms(100)));
    assert_eq!(sim.ep[0].rto(), ms(300));
    sim
}

fn gaps_ms(times: &[Instant]) -> Vec<u64> {
    times.windows(2).map(|w| (w[1] - w[0]).as_nanos() / 1_000_000).collect()
}

#[test]
fn rto_doubles_on_each_loss_of_the_same_segment() {
    let mut sim = connected(TcpConfig::default());
    sim.set_drop(0, drop_seq_times(1, 4));
    sim.ep[0].send(1000);
    sim.run_until(at_ms(10_000));
    let sends = sim.send_times_of(0, 1);
    assert_eq!(sends[0], at_ms(100));
    assert_eq!(gaps_ms(&sends), [300, 600, 1200, 2400]);
    let st = sim.ep[0].stats();
    assert_eq!((st.timeouts, st.retransmits, st.fast_retransmits), (4, 4, 0));
    assert_eq!(sim.ep[1].stats().bytes_delivered, 1000);
}

#[test]
fn rto_backoff_stops_at_max_rto() {
    let cfg = TcpConfig { max_rto: Duration::from_secs(1), ..Default::default() };
    let mut sim = connected(cfg);
    sim.set_drop(0, drop_seq_times(1, 6));
    sim.ep[0].send(1000);
    sim.run_until(at_ms(20_000));
    assert_eq!(gaps_ms(&sim.send_times_of(0, 1)), [300, 600, 1000, 1000, 1000, 1000]);
    assert_eq!(sim.ep[0].stats().timeouts, 6);
}

#[test]
fn karn_no_sample_from_a_retransmission_and_backoff_kept_until_a_valid_one() {
    // Immediate ACKs, so that every valid sample is exactly the path RTT.
    let mut sim = connected(TcpConfig { delayed_ack: false, ..Default::default() });
    sim.set_drop(0, drop_seq_times(1, 1));
    sim.ep[0].send(1000);
    // Original at 100 ms (lost), retransmission at 400 ms, its ACK at 500 ms. Sampling it
    // against the original would give 400 ms and SRTT = 137.5 ms.
    sim.run_until(at_ms(600));
    let st = sim.ep[0].stats().clone();
    assert_eq!(st.bytes_acked, 1000);
    assert_eq!(st.rtt_count, 1, "only the handshake sample");
    assert_eq!(sim.ep[0].srtt(), Some(ms(100)));
    // RFC 6298 §5: the backed-off RTO stays until a valid sample.
    assert_eq!(sim.ep[0].rto(), ms(600));
    sim.ep[0].send(1000);
    sim.flush();
    assert_eq!(sim.ep[0].poll_timeout(), Some(at_ms(600) + ms(600)));
    sim.run_until(at_ms(800));
    // A clean sample of 100 ms: RTTVAR = 3/4·50 = 37.5 ms, RTO = 100 + 150 = 250 ms.
    assert_eq!(sim.ep[0].stats().rtt_count, 2);
    assert_eq!(sim.ep[0].srtt(), Some(ms(100)));
    assert_eq!(sim.ep[0].rto(), ms(250));
}

#[test]
fn lost_syns_back_off_from_one_second_then_start_with_rto_3s_and_one_segment() {
    let mut sim = Sim::symmetric(TcpConfig::default(), ms(50));
    sim.set_drop(0, drop_syn_times(3));
    sim.run_until(at_ms(20_000));
    let syns: Vec<Instant> = sim.sent[0].iter().filter(|(_, s)| s.flags.syn()).map(|(t, _)| *t).collect();
    assert_eq!(syns, [at_ms(0), at_ms(1000), at_ms(3000), at_ms(7000)]);
    assert_eq!(sim.event_time(0, Event::Connected), Some(at_ms(7100)));
    assert_eq!(sim.ep[0].stats().timeouts, 3);
    // RFC 6298 (5.7) and RFC 5681 §3.1.
    assert_eq!(sim.ep[0].srtt(), None);
    assert_eq!(sim.ep[0].rto(), Duration::from_secs(3));
    assert_eq!(sim.ep[0].cwnd(), 1460);
}

#[test]
fn lost_syn_ack_is_retransmitted_by_the_server() {
    let mut sim = Sim::symmetric(TcpConfig::default(), ms(50));
    sim.set_drop(1, drop_syn_times(1));
    sim.ep[0].send(5000);
    sim.ep[0].close();
    sim.run_until(at_ms(1_200));
    assert_eq!(sim.ep[1].srtt(), None, "Karn: no sample from a retransmitted SYN-ACK");
    sim.run_until(at_ms(20_000));
    // The client's SYN times out at 1000 ms and arrives again at 1050 ms, just as the
    // server's own timer would fire: the repeated SYN makes the server resend its SYN-ACK
    // and restart its timer, so only the client counts a timeout.
    assert_eq!(sim.event_time(0, Event::Connected), Some(at_ms(1100)));
    assert_eq!(sim.event_time(1, Event::Connected), Some(at_ms(1150)));
    assert_eq!((sim.ep[0].stats().timeouts, sim.ep[1].stats().timeouts), (1, 0));
    assert_eq!(sim.ep[1].stats().bytes_delivered, 5000);
    // RFC 5681 §3.1: one segment of initial window after a lost SYN or SYN-ACK.
    let first_flight = sim.sent[0].iter().filter(|(t, s)| *t == at_ms(1100) && s.len > 0).count();
    assert_eq!(first_flight, 1);
    assert!(sim.ep[0].stats().rtt_count > 0, "data ACKs give samples again");
}

#[test]
fn lone_segment_is_acked_after_the_delayed_ack_timeout() {
    let mut sim = connected(TcpConfig::default());
    sim.ep[0].send(100);
    sim.run_until(at_ms(1_000));
    // Arrives at 150 ms; the ACK leaves 40 ms later.
    let acks: Vec<(Instant, u64)> =
        sim.sent[1].iter().filter(|(_, s)| s.len == 0 && s.ack == 101).map(|(t, s)| (*t, s.ack)).collect();
    assert_eq!(acks.first().map(|a| a.0), Some(at_ms(190)));
    let no_delay = {
        let mut sim = connected(TcpConfig { delayed_ack: false, ..Default::default() });
        sim.ep[0].send(100);
        sim.run_until(at_ms(1_000));
        sim.sent[1].iter().find(|(_, s)| s.ack == 101).map(|(t, _)| *t)
    };
    assert_eq!(no_delay, Some(at_ms(150)));
}

#[test]
fn bulk_transfer_gets_one_ack_per_two_segments() {
    for (delayed, lo, hi) in [(true, 0.49, 0.52), (false, 0.99, 1.0)] {
        let cfg = TcpConfig { delayed_ack: delayed, ..Default::default() };
        let link = LinkCfg::bottleneck(ms(20), 20_000_000, 1000);
        let mut sim = Sim::new(cfg.clone(), cfg, link, link);
        sim.ep[0].send(2_000_000);
        sim.ep[0].close();
        sim.run_until(at_ms(30_000));
        let data = sim.ep[0].stats().data_segments_sent as f64;
        let acks = sim.ep[1].stats().pure_acks_sent as f64;
        let ratio = acks / data;
        assert!((lo..=hi).contains(&ratio), "delayed_ack={delayed}: {acks} ACKs for {data} segments");
    }
}

/// RFC 6298 (5.3) restarts the timer only on an ACK of new data: a duplicate ACK (here one
/// SACKing the second segment while the first is lost, too few for fast retransmit) leaves
/// it running from the first transmission, 100 + 300 ms. ns-2's `Agent/TCP/Linux`
/// (`LinuxTcpAgent::time_processing` → `set_rtx_timer()` on every ACK) restarts it on the
/// duplicate ACK too, at 200 ms, so the retransmission goes at 200 + 300 ms.
#[test]
fn ns2_mode_restarts_the_timer_on_duplicate_acks() {
    for ns2 in [false, true] {
        let cfg = TcpConfig { rack: false, ns2_rto_restart_every_ack: ns2, ..Default::default() };
        let mut sim = connected(cfg);
        sim.set_drop(0, drop_seq_times(1, 1));
        sim.ep[0].send(2 * 1460);
        sim.run_until(at_ms(1_000));
        let sends = sim.send_times_of(0, 1);
        assert_eq!(sends[0], at_ms(100));
        assert_eq!(sends[1], if ns2 { at_ms(500) } else { at_ms(400) }, "ns2 mode {ns2}");
        assert_eq!(sim.ep[0].stats().timeouts, 1);
    }
}

#[test]
fn linux_handshake_timers_fire_on_the_kernels_wheel_and_one_lost_syn_ack_keeps_ten_segments() {
    let mut sim = Sim::symmetric(TcpConfig::linux(), ms(50));
    sim.set_drop(1, drop_syn_times(1));
    sim.ep[0].send(50_000);
    sim.ep[0].close();
    sim.run_until(at_ms(1_160));
    // With timestamps, Karn's rule gives way to the echo (tcp_rtt_tsopt_us): the server's
    // timed-out SYN-ACK echoes the client's first SYN (1106 ms before), the client's ACK
    // echoes that SYN-ACK (100 ms).
    assert_eq!(sim.ep[0].srtt(), Some(ms(1106)));
    assert_eq!(sim.ep[1].srtt(), Some(ms(100)));
    sim.run_until(at_ms(20_000));
    let syns = |side: usize| sim.sent[side].iter().filter(|(_, s)| s.flags.syn()).map(|(t, _)| *t).collect::<Vec<_>>();
    // 1 s is 250 jiffies of 4 ms: level 1 of the timer wheel, whose buckets are 8 jiffies
    // apart; the timer fires at the first bucket past it, jiffy 256.
    assert_eq!(syns(0), [at_ms(0), at_ms(1024)]);
    // The server's SYN-ACK at 50 ms (jiffy 12) is lost; its timer, set for jiffy 262, fires
    // at 264 (1056 ms), before the client's second SYN arrives (1074 ms), to which it
    // answers once more: two retransmissions, one a timeout.
    assert_eq!(syns(1), [at_ms(50), at_ms(1056), at_ms(1074)]);
    assert_eq!((sim.ep[0].stats().timeouts, sim.ep[1].stats().timeouts), (1, 1));
    // tcp_init_transfer: one segment only after more than one retransmission with a
    // timeout: the client (one) starts with ten, the server (two) with one.
    let connected = sim.event_time(0, Event::Connected).expect("connected");
    assert_eq!(connected, at_ms(1106));
    let first_flight = sim.sent[0].iter().filter(|(t, s)| *t == connected && s.len > 0).count();
    assert_eq!(first_flight, 10);
    assert_eq!(sim.ep[1].cwnd(), 1448);
    assert_eq!(sim.ep[1].stats().bytes_delivered, 50_000);
}
