//! `qdisc = "rio"` and `"frio"` as a user writes them: defaults, the resolved parameters,
//! the compiled discipline on [[link]] and [[path]], round trips and one-line errors.

use pathtwin_core::config::{Config, PathConfig, QdiscKind};
use pathtwin_core::qdisc::{FrioParams, RioParams};
use pathtwin_core::topology::{compile, Network};
use pathtwin_core::units::QueueLimit;

mod common;
use common::P;

fn link(extra: &str) -> String {
    format!("hosts = [\"a\", \"b\"]\n[[link]]\nbetween = [\"a\", \"b\"]\nrate = \"10mbit\"\ndelay = \"10ms\"\n{extra}\n")
}

/// The FRIO limits a path's queue runs with.
fn frio(p: &PathConfig) -> FrioParams {
    FrioParams::from_settings(p.frio.as_ref(), &RioParams::from_settings(p.rio.as_ref()))
}

fn error(extra: &str) -> String {
    Config::from_toml(&link(extra), "t.toml").unwrap_err().to_string()
}

/// The thesis's "appropriate" RIO (papers/tcp-friendly-marker-thesis-ch3-4.txt).
const THESIS: &str = r#"qdisc = "rio"
rio = { in = { min_th = "50KB", max_th = "490KB", max_p = 0.005 }, out = { min_th = "10KB", max_th = "200KB", max_p = 0.25 }, w_q = 0.002, coupled = true, gentle = false, wait = false, ecn = true }"#;

#[test]
fn rio_without_a_table_takes_ns2_defaults_and_compiles_on_links() {
    let cfg = Config::from_toml(&link("qdisc = \"rio\""), "t.toml").unwrap();
    assert_eq!(cfg.links[0].qdisc, QdiscKind::Rio);
    let p = RioParams::from_settings(cfg.links[0].rio.as_ref());
    assert_eq!(p, RioParams::ns2_default());
    assert_eq!((p.in_class.min_th, p.in_class.max_th, p.in_class.max_p), (QueueLimit::Packets(15), QueueLimit::Packets(30), 0.02));
    assert_eq!((p.out_class.min_th, p.out_class.max_th, p.out_class.max_p, p.out_class.w_q), (QueueLimit::Packets(5), QueueLimit::Packets(15), 0.2, 0.002));
    let net: Network<P> = compile(&cfg).unwrap();
    let names: Vec<_> = net.elements.iter().filter_map(|e| e.as_queue()).map(|q| q.qdisc_name()).collect();
    assert_eq!(names, ["rio", "rio"]);
}

#[test]
fn the_thesis_table_resolves_per_class_and_round_trips() {
    let cfg = Config::from_toml(&link(THESIS), "t.toml").unwrap();
    let p = RioParams::from_settings(cfg.links[0].rio.as_ref());
    assert_eq!((p.in_class.min_th, p.in_class.max_th, p.in_class.max_p), (QueueLimit::Bytes(50_000), QueueLimit::Bytes(490_000), 0.005));
    assert_eq!((p.out_class.min_th, p.out_class.max_th, p.out_class.max_p), (QueueLimit::Bytes(10_000), QueueLimit::Bytes(200_000), 0.25));
    for c in [p.in_class, p.out_class] {
        assert!(!c.gentle && !c.wait && c.ecn && c.w_q == 0.002, "shared keys apply to both classes: {c:?}");
    }
    assert!(p.coupled);
    let json = serde_json::to_string(&cfg).unwrap();
    assert_eq!(Config::from_json(&json).unwrap(), cfg);
}

#[test]
fn frio_on_a_path_with_default_and_explicit_limits() {
    let path = |extra: &str| format!("hosts = [\"a\", \"b\"]\n[[path]]\nbetween = [\"a\", \"b\"]\nrtt = \"40ms\"\nabw = \"10mbit\"\nmode = \"link\"\nqdisc = \"frio\"\n{extra}\n");
    let cfg = Config::from_toml(&path(""), "t.toml").unwrap();
    // FRED's maxq is min_th: ns-2's OUT min_th, 5 packets.
    assert_eq!(frio(&cfg.paths[0]), FrioParams { min_q: 2, max_q: 5 });
    let cfg = Config::from_toml(&path("frio = { min_q = 4, max_q = 30 }"), "t.toml").unwrap();
    assert_eq!(frio(&cfg.paths[0]), FrioParams { min_q: 4, max_q: 30 });
    // Byte thresholds: 10 KB over the 500-byte mean packet.
    let cfg = Config::from_toml(&path(&THESIS.replace("qdisc = \"rio\"", "")), "t.toml").unwrap();
    assert_eq!(frio(&cfg.paths[0]).max_q, 20);
    let net: Network<P> = compile(&cfg).unwrap();
    assert!(net.elements.iter().filter_map(|e| e.as_queue()).all(|q| q.qdisc_name() == "frio"));
}

#[test]
fn errors_are_one_line_and_name_the_key() {
    let cases = [
        ("qdisc = \"rio\"\nrio = { out = { min_th = \"15p\", max_th = \"5p\" } }", "link[0].rio.out.max_th: must be above min_th"),
        ("qdisc = \"rio\"\nrio = { in = { min_th = \"15p\", max_th = \"30KB\" } }", "link[0].rio.in.max_th: min_th and max_th must both be packets or both bytes"),
        ("qdisc = \"rio\"\nrio = { in = { min_th = \"15p\", max_th = \"30p\" }, out = { min_th = \"5KB\", max_th = \"15KB\" } }", "link[0].rio.out.min_th: in and out thresholds must both be packets or both bytes"),
        ("qdisc = \"rio\"\nrio = { out = { min_th = \"5KB\", max_th = \"15KB\" } }", "link[0].rio.in: byte thresholds need both classes"),
        ("qdisc = \"rio\"\nrio = { in = { min_th = \"15p\", max_th = \"30p\", max_p = 1.5 } }", "link[0].rio.in.max_p: 1.5 must be in (0, 1]"),
        ("qdisc = \"rio\"\nrio = { w_q = 0 }", "link[0].rio.w_q: 0 must be in (0, 1]"),
        ("rio = { coupled = false }", "link[0].rio: a rio table needs qdisc = \"rio\" or \"frio\""),
        ("qdisc = \"rio\"\nfrio = { min_q = 2 }", "link[0].frio: a frio table needs qdisc = \"frio\""),
        ("qdisc = \"frio\"\nfrio = { min_q = 4, max_q = 4 }", "link[0].frio.max_q: max_q (4) must be above min_q (4)"),
        ("qdisc = \"frio\"\nfrio = { min_q = 6 }", "link[0].frio.min_q: max_q (5) must be above min_q (6)"),
        ("qdisc = \"red\"\nrio = { coupled = true }", "link[0].rio: a rio table needs qdisc = \"rio\" or \"frio\""),
        ("qdisc = \"red\"\nred = { min_th = \"5p\" }", "link[0].red.max_th: give both thresholds, or neither for ns-2's automatic ones"),
    ];
    for (extra, want) in cases {
        let e = error(extra);
        assert!(e.contains(want), "{extra}\n  gave {e}\n  want {want}");
        assert!(!e.contains('\n'), "{e}");
    }
    let e = error("qdisc = \"rio\"\nrio = { in = { min_th = \"15p\", max_th = \"30p\", max_pp = 1 } }");
    assert!(e.contains("link[0].rio.in") && e.contains("max_pp"), "{e}");
}
