//! The congestion window's restart after idle (`TcpConfig::restart_after_idle`, Linux's
//! `net.ipv4.tcp_slow_start_after_idle = 1`): a transfer, an idle period of some RTOs, then
//! new data. The expected window is computed here from the kernel's rule as Linux 6.x
//! writes it (`tcp_slow_start_after_idle_check` in `include/net/tcp.h`, `tcp_cwnd_restart`
//! in `net/ipv4/tcp_output.c`), in whole segments:
//!
//! ```text
//! if (packets_out == 0 && tcp_jiffies32 - lsndtime > icsk_rto) {
//!         restart_cwnd = min(TCP_INIT_CWND, cwnd);
//!         ssthresh = max(ssthresh, cwnd/2 + cwnd/4);        /* tcp_current_ssthresh */
//!         while ((delta -= icsk_rto) > 0 && cwnd > restart_cwnd)
//!                 cwnd >>= 1;
//!         cwnd = max(cwnd, restart_cwnd);
//! }
//! ```

mod common;

use common::*;
use pathtwin_core::time::Duration;
use pathtwin_tcp::{CcAlgorithm, TcpConfig};

/// What the client's window was before and after the write that ended the idle period.
#[derive(Debug)]
struct Restart {
    mss: u64,
    rto: Duration,
    idle: Duration,
    cwnd_before: u64,
    ssthresh_before: u64,
    cwnd_after: u64,
    ssthresh_after: u64,
    /// Data segments the client sent at the instant of the write.
    burst: u64,
    /// The receive window the server last advertised, which also bounds that burst.
    peer_window: u64,
}

/// The client sends `first` bytes (losing its data segment `drop`, if any), and once all of
/// it is acknowledged stays idle for `idle_rtos` RTOs after its last data segment; then it
/// writes 2 MB more.
fn idle_then_write(cfg: TcpConfig, first: u64, drop: Option<u64>, idle_rtos: f64) -> Restart {
    let mut sim = Sim::symmetric(cfg, ms(10));
    if let Some(i) = drop {
        sim.set_drop(0, drop_data_indices(&[i]));
    }
    sim.ep[0].send(first);
    while sim.ep[0].stats().bytes_acked < first {
        sim.run_for(ms(1));
    }
    assert_eq!(sim.ep[0].flight_size(), 0);
    let last = sim.sent[0].iter().filter(|(_, s)| s.len > 0).map(|(t, _)| *t).max().unwrap();
    let rto = sim.ep[0].rto();
    let idle = rto.mul_f64(idle_rtos);
    assert!(sim.now <= last + idle, "the transfer's last ACK came {} after its last segment", sim.now - last);
    sim.run_until(last + idle);
    let c = &sim.ep[0];
    let (cwnd_before, ssthresh_before, mss, peer_window) = (c.cwnd(), c.ssthresh(), c.mss() as u64, c.peer_window());
    let sent_before = sim.sent[0].len();
    sim.ep[0].send(2_000_000);
    sim.run_until(sim.now);
    let burst = sim.sent[0][sent_before..].iter().filter(|(_, s)| s.len > 0).count() as u64;
    let c = &sim.ep[0];
    Restart { mss, rto, idle, cwnd_before, ssthresh_before, cwnd_after: c.cwnd(), ssthresh_after: c.ssthresh(), burst, peer_window }
}

/// The kernel's rule (above) for a window of `cwnd` bytes in segments of `mss`, after
/// `idle` with an RTO of `rto` and an initial window of `iw` segments: (cwnd, ssthresh).
fn kernel_rule(r: &Restart, iw: u64) -> (u64, u64) {
    if r.idle <= r.rto {
        return (r.cwnd_before, r.ssthresh_before);
    }
    let cwnd = r.cwnd_before / r.mss;
    let ssthresh = if r.ssthresh_before == u64::MAX { u64::MAX } else { r.ssthresh_before.max((cwnd / 2 + cwnd / 4) * r.mss) };
    let restart = iw.min(cwnd);
    let mut w = cwnd;
    let mut delta = r.idle.as_nanos() as i128;
    loop {
        delta -= r.rto.as_nanos() as i128;
        if delta > 0 && w > restart {
            w >>= 1;
        } else {
            break;
        }
    }
    let w = w.max(restart);
    (if w == cwnd { r.cwnd_before } else { w * r.mss }, ssthresh)
}

fn check(r: &Restart, what: &str) {
    let (cwnd, ssthresh) = kernel_rule(r, 10);
    assert_eq!((r.cwnd_after, r.ssthresh_after), (cwnd, ssthresh), "{what}: {r:?}");
    if r.idle > r.rto {
        let burst = (r.cwnd_after / r.mss).min(r.peer_window / r.mss);
        assert_eq!(r.burst, burst, "{what}: the restarted window goes out at once: {r:?}");
    }
}

#[test]
fn idle_shorter_than_the_rto_keeps_the_window() {
    for cc in [CcAlgorithm::NewReno, TcpConfig::linux().cc] {
        let r = idle_then_write(TcpConfig { cc, ..TcpConfig::linux() }, 400_000, None, 0.6);
        assert_eq!((r.cwnd_after, r.ssthresh_after), (r.cwnd_before, r.ssthresh_before), "{cc:?}: {r:?}");
        assert!(r.cwnd_before > 20 * r.mss, "{cc:?}: the transfer opened the window: {r:?}");
    }
}

#[test]
fn each_rto_of_idle_past_the_first_halves_the_window_down_to_the_initial_one() {
    for cc in [CcAlgorithm::NewReno, TcpConfig::linux().cc] {
        let cfg = TcpConfig { cc, ..TcpConfig::linux() };
        let mut halvings = Vec::new();
        for k in [1.5, 2.5, 3.5, 20.5] {
            let r = idle_then_write(cfg.clone(), 400_000, None, k);
            check(&r, &format!("{cc:?}, {k} RTOs"));
            // Without loss there is no threshold yet, and the restart sets none.
            assert_eq!(r.ssthresh_after, u64::MAX);
            halvings.push((r.cwnd_before / r.mss, r.cwnd_after / r.mss));
        }
        let (w, _) = halvings[0];
        assert!(w >= 40, "{cc:?}: {halvings:?}");
        assert_eq!(halvings.iter().map(|h| h.1).collect::<Vec<_>>(), vec![w / 2, w / 4, (w / 8).max(10), 10], "{cc:?}");
    }
}

#[test]
fn after_a_loss_the_threshold_is_at_least_three_quarters_of_the_old_window() {
    for cc in [CcAlgorithm::NewReno, TcpConfig::linux().cc] {
        let cfg = TcpConfig { cc, ..TcpConfig::linux() };
        for k in [0.6, 1.5, 2.5, 4.5] {
            let r = idle_then_write(cfg.clone(), 1_500_000, Some(60), k);
            assert_ne!(r.ssthresh_before, u64::MAX, "{cc:?}: the loss set a threshold: {r:?}");
            check(&r, &format!("{cc:?} after a loss, {k} RTOs"));
        }
    }
}

#[test]
fn without_the_switch_the_window_stays_open() {
    for cfg in [TcpConfig::ns2(), TcpConfig { restart_after_idle: false, ..TcpConfig::linux() }] {
        let r = idle_then_write(cfg.clone(), 400_000, None, 5.5);
        assert_eq!((r.cwnd_after, r.ssthresh_after), (r.cwnd_before, r.ssthresh_before), "{r:?}");
        assert!(r.burst > 10, "the whole old window goes out at once: {r:?}");
    }
    assert!(!TcpConfig::ns2().restart_after_idle && TcpConfig::linux().restart_after_idle);
}
