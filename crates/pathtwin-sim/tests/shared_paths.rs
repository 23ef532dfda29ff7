//! A `[[shared]]` class of paths from different sources, end to end through the simulator:
//! what its members' flows achieve together is the class's ABW, split as TCP splits a
//! bottleneck between flows of equal round trips; a direction in two classes is held by
//! both (max-min: a host's uplink class binds its two paths, the other source takes the
//! rest of the bottleneck they share).

use pathtwin_core::config::Config;
use pathtwin_sim::Simulation;

const SECONDS: f64 = 40.0;
/// The first seconds left out of the rates: slow start and the first losses.
const WARMUP_S: f64 = 5.0;
/// Goodput of an IP-level rate: 1460 payload bytes of each 1500 (the "ns2" profile).
const PAYLOAD: f64 = 1460.0 / 1500.0;

/// Paths a-b, c-b, a-d of 20 Mbit/s each at 40 ms, one bulk flow on each listed direction,
/// and the `[[shared]]` classes given.
fn scenario(shared: &str, flows: &[(&str, &str)]) -> String {
    let mut s = format!(
        "hosts = [\"a\", \"b\", \"c\", \"d\"]\n[run]\nduration = \"{SECONDS}s\"\nseed = 3\n[tcp]\nmax_window = \"1MB\"\n"
    );
    for (x, y) in [("a", "b"), ("c", "b"), ("a", "d")] {
        s += &format!("[[path]]\nbetween = [\"{x}\", \"{y}\"]\nrtt = \"40ms\"\nabw = \"20mbit\"\nwmax = \"1MB\"\n");
    }
    for (x, y) in flows {
        s += &format!("[[flow]]\nfrom = \"{x}\"\nto = \"{y}\"\napp = \"bulk\"\nstart = \"0s\"\n");
    }
    s + shared
}

/// Each flow's goodput after the warm-up (Mbit/s), in the order the flows were given, from
/// the receivers' delivered bytes over time.
fn rates(shared: &str, flows: &[(&str, &str)]) -> Vec<f64> {
    let cfg = Config::from_toml(&scenario(shared, flows), "shared_paths.toml").unwrap();
    let mut sim = Simulation::new(cfg).unwrap();
    let warm = sim.now() + pathtwin_core::time::Duration::from_secs_f64(WARMUP_S);
    sim.advance(warm);
    let at_warm = sim.results().flows.i64s("bytes_delivered").to_vec();
    sim.advance(sim.end());
    let end = sim.results().flows.i64s("bytes_delivered").to_vec();
    end.iter().zip(at_warm).map(|(e, w)| (e - w) as f64 * 8.0 / (SECONDS - WARMUP_S) / 1e6).collect()
}

const TWO_SOURCES: &str = "[[shared]]\npaths = [[\"a\", \"b\"], [\"c\", \"b\"]]\nabw = \"10mbit\"\n";

#[test]
fn two_sources_in_one_class_get_its_abw_together_in_equal_shares() {
    let flows = [("a", "b"), ("c", "b")];
    let r = rates(TWO_SOURCES, &flows);
    let class = 10.0 * PAYLOAD;
    let total: f64 = r.iter().sum();
    // Together no more than the class's ABW, and the queue kept busy (a 100-Mbit/s class
    // queue with 90 of placeholders: TCP fills what is left to within a few per cent).
    // (1.02: bytes counted at the window's edges, which the queue held when it opened.)
    assert!(total <= class * 1.02 && total >= 0.9 * class, "together {total:.2} Mbit/s, class {class:.2}: {r:?}");
    // Equal flows of equal round trips: equal shares, to within 10 % of the share.
    assert!((r[0] - r[1]).abs() <= 0.1 * total / 2.0, "{r:?}");
    // Without the class each path has its own 20 Mbit/s: the class is what holds them.
    let free: f64 = rates("", &flows).iter().sum();
    assert!(free >= 1.8 * 20.0 * PAYLOAD, "without the class {free:.2} Mbit/s");
}

#[test]
fn a_path_alone_in_its_class_gets_its_own_abw() {
    // A member's own ABW is what it carried measured alone, through the class's link too: with
    // one member active the class adds nothing, even where its ABW (10 Mbit/s, what the
    // members carried loaded together) is below that member's own (20).
    let alone = rates(TWO_SOURCES, &[("a", "b")])[0];
    assert!((alone - 20.0 * PAYLOAD).abs() <= 0.05 * 20.0 * PAYLOAD, "{alone:.2}");
}

#[test]
fn a_direction_in_two_classes_is_held_by_both() {
    // a's uplink (a->b and a->d together: 6 Mbit/s) and b's downlink from a and c (10): each
    // class carries its ABW and no more, and a->b, which crosses both, gets the least (TCP
    // across two congested queues loses to the flows that cross one: not max-min's 3/3/7).
    let shared = format!("{TWO_SOURCES}[[shared]]\npaths = [[\"a\", \"b\"], [\"a\", \"d\"]]\nabw = \"6mbit\"\n");
    let r = rates(&shared, &[("a", "b"), ("a", "d"), ("c", "b")]);
    let (uplink, downlink) = (r[0] + r[1], r[0] + r[2]);
    for (got, abw, what) in [(uplink, 6.0, "a's uplink"), (downlink, 10.0, "b's downlink")] {
        let want = abw * PAYLOAD;
        assert!(got <= 1.02 * want && got >= 0.9 * want, "{what} carried {got:.2} Mbit/s of {want:.2}: {r:?}");
    }
    assert!(r[0] < r[1] && r[0] < r[2], "{r:?}");
}
