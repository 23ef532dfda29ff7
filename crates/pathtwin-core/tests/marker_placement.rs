//! Where `[[marker]]` entries land on the compiled routes of both views: a host's egress
//! marker first on every route leaving the host, a direction's marker right before that
//! direction's queue on every route crossing it, nothing on the other direction.

mod common;

use common::P;
use pathtwin_core::config::Config;
use pathtwin_core::topology::{compile, Network};

fn names(net: &Network<P>, src: &str, dst: &str) -> Vec<String> {
    let r = net.route(net.host_id(src).unwrap(), net.host_id(dst).unwrap()).expect("route");
    r.iter().map(|h| net.element_info[h.element].name.clone()).collect()
}

const TB: &str = "kind = \"token-bucket\"\ninterval = \"400ms\"\nbucket = \"296KB\"\n";

#[test]
fn paths_view_egress_and_direction_markers() {
    let cfg = Config::from_toml(
        &format!(
            "hosts = [\"a\", \"b\", \"c\"]\n\
             [[path]]\nbetween = [\"a\", \"b\"]\nrtt = \"50ms\"\nabw = \"10mbit\"\n\
             [[path]]\nbetween = [\"a\", \"c\"]\nrtt = \"50ms\"\nabw = \"10mbit\"\n\
             [[marker]]\nbetween = [\"a\", \"b\"]\n{TB}\
             [[marker]]\nat = \"a\"\n{TB}\
             [[marker]]\nat = \"a\"\n{TB}\
             [[marker]]\nbetween = [\"c\", \"a\"]\n{TB}"
        ),
        "t.toml",
    )
    .unwrap();
    let net: Network<P> = compile(&cfg).unwrap();
    assert_eq!(names(&net, "a", "b"), ["marker[1] a", "marker[2] a", "marker[0] a->b", "a->b"]);
    assert_eq!(names(&net, "a", "c"), ["marker[1] a", "marker[2] a", "a->c"]);
    assert_eq!(names(&net, "b", "a"), ["b->a"]);
    assert_eq!(names(&net, "c", "a"), ["marker[3] c->a", "c->a"]);
    // One element per entry, shared by the routes it is on, listed in config order.
    let markers: Vec<_> = net.marker_ids().map(|e| net.element_info[e].name.clone()).collect();
    assert_eq!(markers, ["marker[0] a->b", "marker[1] a", "marker[2] a", "marker[3] c->a"]);
    assert!(net.marker_ids().all(|e| net.elements[e].as_marker().is_some()));
    let first = |s: &str, d: &str| net.route(net.host_id(s).unwrap(), net.host_id(d).unwrap()).unwrap()[0].element;
    assert_eq!(first("a", "b"), first("a", "c"));
}

#[test]
fn links_view_marker_sits_before_the_link_direction_queue_on_every_route() {
    let cfg = Config::from_toml(
        "hosts = [\"s0\", \"s1\", \"d0\"]\nrouters = [\"r1\", \"r2\"]\n\
             [[link]]\nbetween = [\"s0\", \"r1\"]\nrate = \"100mbit\"\ndelay = \"1ms\"\n\
             [[link]]\nbetween = [\"s1\", \"r1\"]\nrate = \"100mbit\"\ndelay = \"1ms\"\n\
             [[link]]\nbetween = [\"r1\", \"r2\"]\nrate = \"10mbit\"\ndelay = \"20ms\"\n\
             [[link]]\nbetween = [\"r2\", \"d0\"]\nrate = \"100mbit\"\ndelay = \"1ms\"\n\
             [[marker]]\nbetween = [\"r1\", \"r2\"]\nkind = \"tcp-friendly\"\ninterval = \"400ms\"\nbudget = \"296KB\"\n\
             [[marker]]\nat = \"s0\"\nkind = \"srtcm\"\ncir = \"1mbit\"\ncbs = \"3KB\"\nebs = \"3KB\"\n",
        "t.toml",
    )
    .unwrap();
    let net: Network<P> = compile(&cfg).unwrap();
    assert_eq!(names(&net, "s0", "d0"), ["marker[1] s0", "s0->r1", "marker[0] r1->r2", "r1->r2", "r2->d0"]);
    assert_eq!(names(&net, "s1", "d0"), ["s1->r1", "marker[0] r1->r2", "r1->r2", "r2->d0"]);
    assert_eq!(names(&net, "d0", "s1"), ["d0->r2", "r2->r1", "r1->s1"]);
    assert_eq!(names(&net, "s0", "s1"), ["marker[1] s0", "s0->r1", "r1->s1"]);
    let e = Config::from_toml(
        "hosts = [\"a\", \"b\"]\nrouters = [\"r\"]\n[[link]]\nbetween = [\"a\", \"r\"]\nrate = \"1mbit\"\ndelay = \"1ms\"\n\
         [[marker]]\nbetween = [\"a\", \"b\"]\nkind = \"tcp-friendly\"\ninterval = \"400ms\"\nbudget = \"296KB\"\n",
        "t.toml",
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "marker[0].between: no [[link]] between a and b");
}
