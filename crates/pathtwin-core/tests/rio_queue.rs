//! RIO in a bandwidth queue under overload, in virtual time: constant-rate IN traffic at
//! 0.8·C and OUT traffic at 0.4·C through ns-2's RIO defaults. The link can carry only 1/1.2
//! of what arrives, so a sixth of the arrivals must go. Coupled RIO (Clark & Fang) takes
//! them from OUT, whose curve (min_th 5) sees the whole queue, before the IN average reaches
//! its own min_th (15): IN keeps nearly all its 0.8·C. Decoupled RIO tests OUT on the OUT
//! packets' backlog only, so OUT is dropped later, the queue grows, and IN loses more.

use pathtwin_core::element::BandwidthQueue;
use pathtwin_core::packet::Mark;
use pathtwin_core::qdisc::{Qdisc, Rio, RioParams};
use pathtwin_core::rng_for;
use pathtwin_core::time::{Duration, Instant};
use pathtwin_core::units::{QueueLimit, Rate};

mod common;
use common::P;

/// (IN, OUT) fraction of each class's arrivals lost over 30 s of arrivals.
fn loss(coupled: bool) -> (f64, f64) {
    let c = Rate::from_mbps(10);
    let rio = Rio::new(RioParams { coupled, ..RioParams::ns2_default() }, None, QueueLimit::Packets(200), c);
    let mut q: BandwidthQueue<P> = BandwidthQueue::new(c, c, Box::new(rio) as Box<dyn Qdisc<P>>, rng_for(1, 1));
    // 1500-byte packets: IN every 1.5 ms (8 Mbit/s), OUT every 3 ms (4 Mbit/s), 0.75 ms
    // apart so that no two arrive together.
    let (mut lost_in, mut lost_out, mut n_in, mut n_out) = (0u64, 0u64, 0u64, 0u64);
    for k in 0..20_000u64 {
        let t = Instant::ZERO + Duration::from_micros(1500 * k);
        n_in += 1;
        lost_in += u64::from(q.push(t, P(Mark::In), 0).is_some());
        while q.poll_output(t).is_some() {}
        if k % 2 == 0 {
            let t = t + Duration::from_micros(750);
            n_out += 1;
            lost_out += u64::from(q.push(t, P(Mark::Out), 0).is_some());
            while q.poll_output(t).is_some() {}
        }
    }
    let s = q.aqm_stats().unwrap();
    assert_eq!((s.in_class.arrivals, s.out_class.arrivals), (n_in, n_out));
    assert_eq!((s.in_class.drops(), s.out_class.drops()), (lost_in, lost_out));
    (lost_in as f64 / n_in as f64, lost_out as f64 / n_out as f64)
}

#[test]
fn coupled_rio_takes_the_overload_from_out_and_decoupled_rio_from_in_too() {
    let (c_in, c_out) = loss(true);
    let (d_in, d_out) = loss(false);
    // A sixth of 1.2·C must go: 0.2·C of 0.4·C is half of OUT if IN loses nothing.
    let total = |i: f64, o: f64| (0.8 * i + 0.4 * o) / 1.2;
    for (i, o) in [(c_in, c_out), (d_in, d_out)] {
        assert!((total(i, o) - 1.0 / 6.0).abs() < 0.01, "the link is full: loss {}", total(i, o));
    }
    assert!(c_in < 0.02 && c_out > 0.45, "coupled: IN {c_in}, OUT {c_out}");
    // Measured: coupled IN 0.4 %, OUT 49 %; decoupled IN 15 %, OUT 20 %.
    assert!(d_in > 0.1 && d_out < 0.3, "decoupled: IN {d_in}, OUT {d_out}");
}
