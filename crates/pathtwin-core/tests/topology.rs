//! Compiling both views into routes: which elements a packet crosses, and the queue sizes
//! the paths view derives.

use pathtwin_core::config::Config;
use pathtwin_core::topology::{compile, Network};
use pathtwin_core::units::QueueLimit;

mod common;
use common::P;

fn names(net: &Network<P>, src: &str, dst: &str) -> Vec<String> {
    let r = net.route(net.host_id(src).unwrap(), net.host_id(dst).unwrap()).expect("route");
    r.iter().map(|h| net.element_info[h.element].name.clone()).collect()
}

#[test]
fn dumbbell_routes_cross_the_bottleneck_in_order() {
    let cfg = Config::from_toml(
        r#"
hosts = ["s0", "s1", "d0", "d1"]
routers = ["r1", "r2"]
[[link]]
between = ["s0", "r1"]
rate = "100mbit"
delay = "2.5ms"
[[link]]
between = ["s1", "r1"]
rate = "100mbit"
delay = "2.5ms"
[[link]]
between = ["r1", "r2"]
rate = "10mbit"
delay = "45ms"
[[link]]
between = ["r2", "d0"]
rate = "100mbit"
delay = "2.5ms"
[[link]]
between = ["r2", "d1"]
rate = "100mbit"
delay = "2.5ms"
"#,
        "dumbbell.toml",
    )
    .unwrap();
    let net: Network<P> = compile(&cfg).unwrap();
    assert_eq!(
        names(&net, "s0", "d1"),
        ["s0->r1", "r1->r2", "r2->d1"]
    );
    assert_eq!(names(&net, "d0", "s1")[1], "r2->r1");
    // Both sources share the one bottleneck element.
    let a = net.route(net.host_id("s0").unwrap(), net.host_id("d0").unwrap()).unwrap()[1].element;
    let b = net.route(net.host_id("s1").unwrap(), net.host_id("d1").unwrap()).unwrap()[1].element;
    assert_eq!(a, b);
    // Hosts do not forward: s0 -> s1 goes through r1, not through any other host.
    assert_eq!(names(&net, "s0", "s1"), ["s0->r1", "r1->s1"]);
}

#[test]
fn paths_view_derives_queues_from_eq4_and_shares_classes() {
    let cfg = Config::from_toml(
        r#"
hosts = ["s", "d1", "d2"]
[[path]]
between = ["s", "d1"]
rtt = "30ms"
abw = "10mbit/3mbit"
[[path]]
between = ["s", "d2"]
rtt = "50ms"
abw = "4mbit"
[[shared]]
source = "s"
destinations = ["d1", "d2"]
"#,
        "shared.toml",
    )
    .unwrap();
    let net: Network<P> = compile(&cfg).unwrap();
    // Eq. 4 for s<->d1 by hand: 100e6/8 · (65535·8/10e6 − 0.030) = 280 350 B in total,
    // split equally.
    let d = net.resolved.iter().find(|r| r.from == "d1" && r.to == "s").unwrap();
    assert_eq!(d.queue, QueueLimit::Bytes(140_175));
    assert!(d.feasible && d.queue_derived);
    let s1 = net.route(net.host_id("s").unwrap(), net.host_id("d1").unwrap()).unwrap()[0];
    let s2 = net.route(net.host_id("s").unwrap(), net.host_id("d2").unwrap()).unwrap()[0];
    assert_eq!(s1.element, s2.element, "one shared queue");
    assert_eq!((s1.slot, s2.slot), (0, 1));
    // The return directions keep their own queues.
    let r1 = net.route(net.host_id("d1").unwrap(), net.host_id("s").unwrap()).unwrap()[0];
    let r2 = net.route(net.host_id("d2").unwrap(), net.host_id("s").unwrap()).unwrap()[0];
    assert_ne!(r1.element, r2.element);
    // Delay lines keep each path's own base RTT.
    assert_eq!(net.element_info[net.route(net.host_id("s").unwrap(), net.host_id("d2").unwrap()).unwrap()[1].element].name, "s->d2 delay");
}

#[test]
fn link_mode_uses_abw_as_capacity_and_73kb() {
    let cfg = Config::from_toml(
        "hosts = [\"a\", \"b\"]\n[[path]]\nbetween = [\"a\", \"b\"]\nrtt = \"64ms\"\nabw = \"2251kbit/2202kbit\"\nmode = \"link\"\n",
        "",
    )
    .unwrap();
    let net: Network<P> = compile(&cfg).unwrap();
    let r = &net.resolved[0];
    assert_eq!(r.capacity, r.abw);
    assert_eq!(r.queue, QueueLimit::Bytes(73_000));
}

#[test]
fn derived_infeasible_queue_warns_and_compromises() {
    // C = ABW = 10 Mbit/s at 20 ms: Figure 1's infeasible left edge.
    let cfg = Config::from_toml(
        "hosts = [\"a\", \"b\"]\n[[path]]\nbetween = [\"a\", \"b\"]\nrtt = \"20ms\"\nabw = \"10mbit\"\ncapacity = \"10mbit\"\nwmax = \"65KB\"\n",
        "",
    )
    .unwrap();
    let net: Network<P> = compile(&cfg).unwrap();
    assert_eq!(net.warnings.len(), 1);
    assert!(net.warnings[0].contains("no queue size satisfies"), "{}", net.warnings[0]);
}

#[test]
fn pipes_give_each_connection_its_own_path_with_monkeys_queues() {
    let cfg = Config::from_toml(
        r#"
hosts = ["server", "clients"]
[[pipe]]
between = ["server", "clients"]
rtt = "200ms"
rate = ["40kbit", "30kbit"]
[[pipe]]
between = ["server", "clients"]
rtt = "30ms"
rate = ["1.5mbit", "384kbit"]
loss = ["2%", "0%"]
[[pipe]]
between = ["server", "clients"]
rtt = "10ms"
rate = "20mbit"
queue = ["7pkt", "3pkt"]
"#,
        "pipes.toml",
    )
    .unwrap();
    let net: Network<P> = compile(&cfg).unwrap();
    assert_eq!(net.pipes.len(), 3);
    // No host-level route: the pipes are the only way between the two hosts' pipe addresses.
    assert!(net.route(0, 1).is_none());
    let limit = |e: usize| net.elements[e].as_queue().unwrap().limit();
    let rate = |e: usize| net.elements[e].as_queue().unwrap().capacity().bps();
    // Monkey §4.1: a modem (< 56 kbit/s) gets 5 packets each way, DSL 30 down and 10 up.
    let modem = &net.pipes[0];
    assert_eq!((modem.slot, modem.server, modem.client), (0, 0, 1));
    assert_eq!(
        (limit(modem.down[0].element), limit(modem.up[0].element)),
        (QueueLimit::Packets(5), QueueLimit::Packets(5))
    );
    assert_eq!(
        (rate(modem.down[0].element), rate(modem.up[0].element)),
        (40_000, 30_000)
    );
    let dsl = &net.pipes[1];
    assert_eq!(dsl.slot, 1);
    assert_eq!(
        (limit(dsl.down[0].element), limit(dsl.up[0].element)),
        (QueueLimit::Packets(30), QueueLimit::Packets(10))
    );
    // Loss only where asked: downstream of the DSL pipe.
    assert_eq!(dsl.down.len(), 2);
    assert_eq!(dsl.up.len(), 1);
    assert_eq!(net.element_info[dsl.down[1].element].kind, "pipe-loss");
    assert_eq!(
        net.element_info[dsl.down[0].element].name,
        "server->clients#1"
    );
    assert_eq!(
        net.element_info[dsl.up[0].element].name,
        "clients#1->server"
    );
    // An explicit queue wins over the rule.
    let fast = &net.pipes[2];
    assert_eq!(
        (limit(fast.down[0].element), limit(fast.up[0].element)),
        (QueueLimit::Packets(7), QueueLimit::Packets(3))
    );
    // Pipe queues stay out of the per-queue tables.
    assert_eq!(net.queue_ids().count(), 0);
}

#[test]
fn a_pipe_server_cannot_be_a_pipe_client() {
    let e = Config::from_toml(
        "hosts = [\"a\", \"b\", \"c\"]\n[[pipe]]\nbetween = [\"a\", \"b\"]\nrtt = \"10ms\"\nrate = \"1mbit\"\n[[pipe]]\nbetween = [\"c\", \"a\"]\nrtt = \"10ms\"\nrate = \"1mbit\"\n",
        "t.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("pipe[1].between[1]:") && e.contains("server of other pipes"),
        "{e}"
    );
    let e = Config::from_toml("hosts = [\"a\", \"b\"]\n[[pipe]]\nbetween = [\"a\", \"x\"]\nrtt = \"10ms\"\nrate = \"1mbit\"\n", "t.toml")
        .unwrap_err()
        .to_string();
    assert_eq!(e, "pipe[0].between[1]: unknown host \"x\"");
}

#[test]
fn reordering_is_an_element_of_the_directions_that_ask_for_it() {
    let cfg = Config::from_toml(
        "hosts = [\"a\", \"b\"]\n[[path]]\nbetween = [\"a\", \"b\"]\nrtt = \"40ms\"\nabw = \"4mbit\"\nmode = \"link\"\nreorder = [\"2%\", \"0%\"]\nreorder_delay = \"3ms\"\n",
        "t.toml",
    )
    .unwrap();
    let net: Network<P> = compile(&cfg).unwrap();
    let kinds = |s: &str, d: &str| {
        net.route(net.host_id(s).unwrap(), net.host_id(d).unwrap()).unwrap().iter().map(|h| net.element_info[h.element].kind).collect::<Vec<_>>()
    };
    assert_eq!(kinds("a", "b").last(), Some(&"reorder"));
    assert!(!kinds("b", "a").contains(&"reorder"));
}

#[test]
fn abw_steps_follow_their_direction_and_are_checked_against_its_capacity() {
    let base = "hosts = [\"a\", \"b\", \"c\"]\n[[path]]\nbetween = [\"a\", \"b\"]\nrtt = \"40ms\"\nabw = \"8mbit\"\ncapacity = \"20mbit\"\n";
    let cfg = Config::from_toml(&format!("{base}[path.abw_steps]\nb_to_a = [[\"0s\", \"3mbit\"]]\n"), "t.toml").unwrap();
    let net: Network<P> = compile(&cfg).unwrap();
    let abw = |from: &str| net.resolved.iter().find(|r| r.from == from).map(|r| r.abw.bps()).unwrap();
    // `resolved` reports the configured constant ABW; the element follows the steps.
    assert_eq!((abw("a"), abw("b")), (8_000_000, 8_000_000));
    let queue_abw = |name: &str| match &net.elements[net.element_info.iter().position(|e| e.name == name).unwrap()] {
        pathtwin_core::element::Element::Queue(q) => q.abw().bps(),
        _ => panic!("{name} is not a queue"),
    };
    assert_eq!(queue_abw("a->b"), 8_000_000);
    assert_eq!(queue_abw("b->a"), 3_000_000);

    let over = Config::from_toml(&format!("{base}[path.abw_steps]\na_to_b = [[\"1s\", \"30mbit\"]]\n"), "t.toml").unwrap();
    let e = compile::<P>(&over).err().expect("above capacity").to_string();
    assert!(e.starts_with("path[0].abw_steps.a_to_b[0]") && e.contains("capacity"), "{e}");

    let shared = format!(
        "{base}[[path]]\nbetween = [\"a\", \"c\"]\nrtt = \"40ms\"\nabw = \"8mbit\"\ncapacity = \"20mbit\"\n[[shared]]\nsource = \"a\"\ndestinations = [\"b\", \"c\"]\n[path.abw_steps]\na_to_b = [[\"1s\", \"3mbit\"]]\n"
    );
    let e = compile::<P>(&Config::from_toml(&shared, "t.toml").unwrap()).err().expect("shared").to_string();
    assert!(e.contains("abw_steps") && e.contains("shared[0]"), "{e}");
}

/// Three hosts into b and out of a: paths a-b, c-b, a-d.
const CROSS: &str = r#"
hosts = ["a", "b", "c", "d"]
[[path]]
between = ["a", "b"]
rtt = "40ms"
abw = "20mbit"
[[path]]
between = ["c", "b"]
rtt = "60ms"
abw = "20mbit"
[[path]]
between = ["a", "d"]
rtt = "40ms"
abw = "20mbit"
"#;

#[test]
fn a_paths_class_is_one_queue_crossed_after_each_members_own() {
    let cfg = Config::from_toml(
        &format!("{CROSS}[[shared]]\npaths = [[\"a\", \"b\"], [\"c\", \"b\"]]\nabw = \"10mbit\"\n[[shared]]\npaths = [[\"a\", \"b\"], [\"a\", \"d\"]]\n"),
        "cross.toml",
    )
    .unwrap();
    let net: Network<P> = compile(&cfg).unwrap();
    // a->b is in both classes: its own queue, then each class's in config order, then its delay.
    assert_eq!(names(&net, "a", "b"), ["a->b", "shared[0] {a->b,c->b}", "shared[1] {a->b,a->d}", "a->b delay"]);
    assert_eq!(names(&net, "c", "b"), ["c->b", "shared[0] {a->b,c->b}", "c->b delay"]);
    assert_eq!(names(&net, "a", "d"), ["a->d", "shared[1] {a->b,a->d}", "a->d delay"]);
    // Directions in no class keep the one queue that carries their propagation delay.
    assert_eq!(names(&net, "b", "a"), ["b->a"]);
    // Each member is its own slot of the class queue, in the order the class lists them.
    let slot = |s: &str, d: &str, i: usize| net.route(net.host_id(s).unwrap(), net.host_id(d).unwrap()).unwrap()[i].slot;
    assert_eq!((slot("a", "b", 1), slot("c", "b", 1)), (0, 1));
    assert_eq!((slot("a", "b", 2), slot("a", "d", 1)), (0, 1));
    let r = net.resolved.iter().find(|r| r.from == "a" && r.to == "b").unwrap();
    assert_eq!((r.shared_class, r.shared_classes.clone()), (None, vec![0, 1]));
    // The delay line holds the half RTT the queue would have: 20 ms and 30 ms.
    let rc = net.resolved.iter().find(|r| r.from == "c" && r.to == "b").unwrap();
    assert_eq!(rc.one_way_delay, pathtwin_core::time::Duration::from_millis(30));
}

#[test]
fn a_paths_class_beside_a_source_class_crosses_both() {
    let cfg = Config::from_toml(
        &format!("{CROSS}[[shared]]\nsource = \"a\"\ndestinations = [\"b\", \"d\"]\n[[shared]]\npaths = [[\"a\", \"b\"], [\"c\", \"b\"]]\n"),
        "both.toml",
    )
    .unwrap();
    let net: Network<P> = compile(&cfg).unwrap();
    // The source's class replaces a->b's own queue; the paths class comes after it.
    assert_eq!(names(&net, "a", "b"), ["shared[0] a->{b,d}", "shared[1] {a->b,c->b}", "a->b delay"]);
    assert_eq!(names(&net, "a", "d"), ["shared[0] a->{b,d}", "a->d delay"]);
}

/// A class's `queue_delay` is a drop-tail queue of delay × capacity bytes (full, it delays a
/// packet by exactly that at the rate it drains): at the class's own capacity when given,
/// else at its members' largest.
#[test]
fn a_queue_delay_is_that_time_at_the_class_capacity() {
    let limit = |class: &str| {
        let cfg = Config::from_toml(&format!("{CROSS}[[shared]]\npaths = [[\"a\", \"b\"], [\"c\", \"b\"]]\n{class}"), "t.toml").unwrap();
        let net: Network<P> = compile(&cfg).unwrap();
        let hop = net.route(net.host_id("c").unwrap(), net.host_id("b").unwrap()).unwrap()[1];
        match &net.elements[hop.element] {
            pathtwin_core::element::Element::Queue(q) => q.limit(),
            _ => panic!("the class is a queue"),
        }
    };
    // 2 Mbit/s for 600 ms: 2e6 · 0.6 / 8 = 150 000 B (a DSL uplink's 100 packets).
    assert_eq!(limit("abw = \"1900kbit\"\ncapacity = \"2mbit\"\nqueue_delay = \"600ms\"\n"), QueueLimit::Bytes(150_000));
    // The members' default capacity, 100 Mbit/s, for 80 ms: 1e8 · 0.08 / 8 = 1 000 000 B.
    assert_eq!(limit("abw = \"10mbit\"\nqueue_delay = \"80ms\"\n"), QueueLimit::Bytes(1_000_000));
}

#[test]
fn paths_class_errors_name_the_key() {
    let cases = [
        ("[[shared]]\npaths = [[\"a\", \"b\"], [\"b\", \"d\"]]\n", "shared[0].paths[1]: no [[path]] between b and d"),
        ("[[shared]]\npaths = [[\"a\", \"b\"], [\"c\", \"b\"]]\nabw = \"200mbit\"\n", "shared[0].abw: ABW 200mbit is above the class's capacity 100mbit"),
        ("[[shared]]\npaths = [[\"a\", \"b\"], [\"c\", \"b\"]]\nqueue_delay = \"100us\"\n", "shared[0].queue_delay: 100us at the class's capacity 100mbit holds less than one 1500-byte packet"),
    ];
    for (extra, want) in cases {
        let cfg = Config::from_toml(&format!("{CROSS}{extra}"), "t.toml").unwrap();
        let e = compile::<P>(&cfg).err().expect("refused").to_string();
        assert_eq!(e, want, "{extra:?}");
    }
}

/// A pipe's `drop` puts a trace-loss element ahead of the queue (and of random loss) in the
/// directions that list offsets; an offset past 32 bits is refused naming its key.
#[test]
fn a_pipe_drop_list_is_an_element_ahead_of_the_queue_and_checked() {
    let pipe = |drop: &str| format!("hosts = [\"s\", \"c\"]\n[[pipe]]\nbetween = [\"s\", \"c\"]\nrtt = \"10ms\"\nrate = \"1mbit\"\nloss = [\"1%\", \"0%\"]\ndrop = {drop}\n");
    let cfg = Config::from_toml(&pipe("[[1448, 1448, 2896], []]"), "t.toml").unwrap();
    let net: Network<P> = compile(&cfg).unwrap();
    let p = &net.pipes[0];
    let names: Vec<&str> = p.down.iter().map(|h| net.element_info[h.element].name.as_str()).collect();
    assert_eq!(names, ["s->c#0 drop", "s->c#0", "s->c#0 loss"]);
    assert_eq!(net.element_info[p.down[0].element].kind, "pipe-loss");
    assert_eq!(p.up.len(), 1, "no offsets upstream: no element");
    let e = Config::from_toml(&pipe("[[0], [1, 4294967296]]"), "t.toml").unwrap_err().to_string();
    assert!(e.starts_with("pipe[0].drop[1][1]:") && e.contains("32-bit"), "{e}");
}
