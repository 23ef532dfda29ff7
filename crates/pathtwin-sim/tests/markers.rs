//! `[[marker]]` end to end through the simulator: a bulk flow leaving a marked host gets IN
//! marks at the bucket's rate (the thesis's B/T = 296 KB / 400 ms, and a continuous r), the
//! `markers` results table says so, and the marks travel with the packets — the server's
//! capture carries each packet's DSCP (AF11 IN, AF12 OUT, RFC 2597).

mod common;

use pathtwin_sim::Results;

const SECONDS: f64 = 20.0;

/// Client → server at 10 Mbit/s, 40 ms RTT; the window (64 KB) keeps the queue (150 KB)
/// from overflowing, so every marked packet reaches the server.
fn scenario(markers: &str, flows: u32) -> String {
    format!(
        r#"
hosts = ["client", "server"]
[run]
duration = "{SECONDS}s"
seed = 1
pcap = ["server"]
[tcp]
max_window = "64KB"
[[path]]
between = ["client", "server"]
rtt = "40ms"
abw = "10mbit"
mode = "link"
queue = "150KB"
[[flow]]
from = "client"
to = "server"
app = "bulk"
count = {flows}
{markers}
"#
    )
}

/// Runs the scenario; returns the results and (DSCP, sent by the client) of every packet in
/// the server's capture.
fn run(markers: &str, flows: u32, name: &str) -> (Results, Vec<(u8, bool)>) {
    let (results, datagrams) = common::run_capturing_server(&scenario(markers, flows), name);
    let out = datagrams.iter().map(|ip| (ip[1] >> 2, ip[12..16] == pathtwin_sim::pcap::host_addr(0))).collect();
    (results, out)
}

fn mbps(bytes: i64) -> f64 {
    bytes as f64 * 8.0 / SECONDS / 1e6
}

#[test]
fn token_buckets_at_a_host_and_on_a_path_direction_mark_at_their_rates() {
    let markers = r#"
[[marker]]
at = "client"
kind = "token-bucket"
interval = "400ms"
bucket = "296KB"
[[marker]]
between = ["client", "server"]
kind = "token-bucket"
rate = "3mbit"
depth = "15KB"
"#;
    let (r, pkts) = run(markers, 1, "tb");
    let m = &r.markers;
    assert_eq!(m.strs("marker"), ["marker[0] client", "marker[1] client->server"]);
    assert_eq!(m.strs("kind"), ["token-bucket", "token-bucket"]);
    let (inb, outb) = (m.i64s("in_bytes"), m.i64s("out_bytes"));
    let offered = mbps(inb[0] + outb[0]);
    assert!(offered > 9.0, "the flow fills the 10 Mbit/s path: {offered:.2} Mbit/s");
    // Thesis bucket: B/T = 5.92 Mbit/s; an interval can strand up to one packet (0.5 %).
    let in0 = mbps(inb[0]);
    assert!((in0 / 5.92 - 1.0).abs() < 0.02, "per-interval IN rate {in0:.3} Mbit/s");
    // Continuous: r plus the initial bucket.
    let in1 = mbps(inb[1]);
    let want = 3.0 + 15_000.0 * 8.0 / SECONDS / 1e6;
    assert!((in1 / want - 1.0).abs() < 0.01, "continuous IN rate {in1:.3} Mbit/s, want {want:.3}");
    // Both see the same packets (the client's only), and a two-colour bucket has no yellow.
    assert_eq!(inb[0] + outb[0], inb[1] + outb[1]);
    assert_eq!(m.i64s("yellow_packets"), [0, 0]);
    assert_eq!(m.i64s("green_bytes"), inb);
    // The last marker's decision reaches the server in the DSCP; the server's own packets
    // cross no marker.
    let af11 = pkts.iter().filter(|&&(d, c)| c && d == 10).count() as i64;
    let af12 = pkts.iter().filter(|&&(d, c)| c && d == 12).count() as i64;
    let (mi, mo) = (m.i64s("in_packets")[1], m.i64s("out_packets")[1]);
    // Up to a window (64 KB, ≤ 62 segments) is still on the way when the run ends.
    assert!(af11 <= mi && af12 <= mo && (mi + mo) - (af11 + af12) <= 62, "captured {af11}/{af12}, marked {mi}/{mo}");
    assert!(pkts.iter().filter(|&&(_, c)| c).all(|&(d, _)| d == 10 || d == 12), "every client packet is marked");
    assert!(pkts.iter().filter(|p| !p.1).all(|p| p.0 == 0));
    assert_eq!(r.queues.i64s("drops").iter().sum::<i64>(), 0, "no loss, so every mark is seen");
}

#[test]
fn three_colour_and_tcp_friendly_markers_report_their_colours() {
    let markers = r#"
[[marker]]
at = "client"
kind = "srtcm"
cir = "4mbit"
cbs = "15KB"
ebs = "30KB"
[[marker]]
between = ["client", "server"]
kind = "tcp-friendly"
interval = "400ms"
budget = "296KB"
rtt = "40ms"
"#;
    let (r, pkts) = run(markers, 4, "tf");
    let m = &r.markers;
    assert_eq!(m.strs("kind"), ["srtcm", "tcp-friendly"]);
    // srTCM: green at CIR (plus CBS); E is filled only by what overflows C (RFC 2697 §3), so
    // green and yellow together never exceed CBS + EBS + CIR·T.
    let (green, yellow) = (m.i64s("green_bytes")[0], m.i64s("yellow_bytes")[0]);
    let cir_bytes = 4e6 / 8.0 * SECONDS;
    assert!((green as f64 / (cir_bytes + 15_000.0) - 1.0).abs() < 0.01, "green {:.3} Mbit/s", mbps(green));
    assert!(yellow > 0 && (green + yellow) as f64 <= cir_bytes + 45_000.0, "green {green} + yellow {yellow}");
    assert_eq!(m.i64s("out_bytes")[0], m.i64s("yellow_bytes")[0] + m.i64s("red_bytes")[0]);
    // TCP-friendly: the IN rate never exceeds B/T; the four flows' handshakes and small
    // windows are protected.
    let in_tf = mbps(m.i64s("in_bytes")[1]);
    assert!(in_tf <= 5.92 * 1.001 && in_tf > 5.0, "TF IN rate {in_tf:.3} Mbit/s");
    assert!(m.i64s("protected_packets")[1] >= 4, "{:?}", m.i64s("protected_packets"));
    let af11 = pkts.iter().filter(|&&(d, c)| c && d == 10).count() as i64;
    let in_tf = m.i64s("in_packets")[1];
    assert!(af11 <= in_tf && in_tf - af11 <= 62, "captured {af11} IN, marked {in_tf}");
}

#[test]
fn marking_is_deterministic() {
    let markers = "[[marker]]\nat = \"client\"\nkind = \"tcp-friendly\"\ninterval = \"400ms\"\nbudget = \"296KB\"\nrtt = \"40ms\"\n";
    let (a, pa) = run(markers, 3, "det-a");
    let (b, pb) = run(markers, 3, "det-b");
    for col in ["in_packets", "in_bytes", "out_packets", "out_bytes", "protected_packets"] {
        assert_eq!(a.markers.i64s(col), b.markers.i64s(col), "{col}");
    }
    assert_eq!(pa, pb, "the same packets carry the same marks");
    assert!(a.markers.i64s("out_packets")[0] > 0);
}
