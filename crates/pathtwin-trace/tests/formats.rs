//! Every file format, byte order, timestamp resolution and link type must give the same
//! connection as the plain Ethernet pcap; malformed files give one-line errors or warning
//! counts, never a panic. The expected values come from the conversation's construction
//! (`common::conversation`), not from running the analyzer.

mod common;

use common::*;
use pathtwin_trace::{analyze, AnalyzeOptions, ConnRecord, TraceError};

fn run(bytes: &[u8]) -> Result<pathtwin_trace::Analysis, TraceError> {
    analyze(bytes, &AnalyzeOptions::default(), |_| true)
}

fn only(bytes: &[u8]) -> ConnRecord {
    let a = run(bytes).expect("readable capture");
    assert_eq!(a.conns.len(), 1, "one connection expected");
    a.conns.into_iter().next().unwrap()
}

/// What `conversation` contains, by construction.
fn check_conversation(r: &ConnRecord) {
    assert_eq!(r.packets_c2s, 6);
    assert_eq!(r.packets_s2c, 6);
    assert_eq!(r.bytes_c2s, 100);
    assert_eq!(r.bytes_s2c, 3000);
    assert_eq!(r.retrans_packets_s2c, 0);
    assert_eq!(r.termination.as_deref(), Some("fin"));
    assert!(r.handshake_complete);
    assert_eq!(r.client_port, 40000);
    assert_eq!(r.server_port, 80);
    assert_eq!(r.mss_client, Some(1460.0));
    // SYN at 0, SYN-ACK at 50 µs, ACK 10 ms later.
    assert!((r.handshake_rtt_ms.unwrap() - 10.0).abs() < 1e-3, "{:?}", r.handshake_rtt_ms);
    assert!((r.syn_rtt_ms.unwrap() - 0.05).abs() < 1e-3);
    // Request at 11 ms, response at 41 ms: 30 ms server delay.
    assert!((r.server_delay_ms.unwrap() - 30.0).abs() < 1e-3);
    // Response time: request start (11 ms) to last response byte (41.2 ms).
    assert!((r.response_time_ms.unwrap() - 30.2).abs() < 1e-3);
}

#[test]
fn ethernet_pcap_baseline() {
    let segs = conversation(1000, 5000);
    check_conversation(&only(&pcap(&frames(&segs, Link::Ethernet, false), Link::Ethernet, false, false, 65535)));
}

#[test]
fn every_link_type_and_byte_order_agrees() {
    let segs = conversation(1000, 5000);
    let reference = only(&pcap(&frames(&segs, Link::Ethernet, false), Link::Ethernet, false, false, 65535));
    for link in [Link::Ethernet, Link::Vlan, Link::Sll, Link::Sll2, Link::Raw, Link::BsdLoopbackLe] {
        for (be, ns) in [(false, false), (true, false), (false, true), (true, true)] {
            let r = only(&pcap(&frames(&segs, link, false), link, be, ns, 65535));
            assert_eq!(r, reference, "{link:?} big-endian={be} nanoseconds={ns}");
        }
    }
}

#[test]
fn ipv6_gives_the_same_connection() {
    let segs = conversation(1000, 5000);
    let r = only(&pcap(&frames(&segs, Link::Ethernet, true), Link::Ethernet, false, true, 65535));
    check_conversation(&r);
    assert_eq!(r.client_ip.as_deref(), Some("2001:db8::1"));
}

#[test]
fn pcapng_sections_and_interfaces() {
    let segs = conversation(1000, 5000);
    let reference = only(&pcap(&frames(&segs, Link::Ethernet, false), Link::Ethernet, false, false, 65535));
    let r = only(&pcapng(&ip_frames(&segs, false), [Link::Sll2, Link::Vlan]));
    assert_eq!(r, reference);
}

#[test]
fn sequence_wraparound() {
    // Both ISNs just below 2^32: the response crosses the wrap.
    let segs = conversation(u32::MAX - 40, u32::MAX - 1500);
    let r = only(&pcap(&frames(&segs, Link::Raw, false), Link::Raw, false, false, 65535));
    check_conversation(&r);
    assert_eq!(r.unique_bytes_s2c, 3000);
}

#[test]
fn snaplen_truncated_packets_keep_their_lengths() {
    let segs = conversation(1000, 5000);
    let a = run(&pcap(&frames(&segs, Link::Ethernet, false), Link::Ethernet, false, false, 68)).unwrap();
    check_conversation(&a.conns[0]);
    // The three 1000-byte segments and the 100-byte request were cut.
    assert_eq!(a.stats.snapped, 4);
}

#[test]
fn duplicate_and_reordered_packets() {
    let mut segs = conversation(1000, 5000);
    // Capture the second response segment twice and swap the first two.
    segs.insert(5, segs[5]);
    segs.swap(4, 5);
    let r = only(&pcap(&frames(&segs, Link::Ethernet, false), Link::Ethernet, false, false, 65535));
    assert_eq!(r.packets_s2c, 7);
    assert_eq!(r.bytes_s2c, 4000);
    assert_eq!(r.unique_bytes_s2c, 3000);
    // tcptrace's definition: the copy overlaps seen bytes, so it is one retransmission.
    assert_eq!(r.retrans_packets_s2c, 1);
}

#[test]
fn truncated_tail_is_a_warning() {
    let segs = conversation(1000, 5000);
    let full = pcap(&frames(&segs, Link::Ethernet, false), Link::Ethernet, false, false, 65535);
    let cut = &full[..full.len() - 30];
    let a = run(cut).unwrap();
    assert!(a.stats.truncated_tail);
    assert_eq!(a.stats.frames, segs.len() as u64 - 1);
}

#[test]
fn unreadable_files_are_one_line_errors() {
    let segs = conversation(1000, 5000);
    let full = pcap(&frames(&segs, Link::Ethernet, false), Link::Ethernet, false, false, 65535);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", vec![]),
        ("short", full[..3].to_vec()),
        ("header cut", full[..10].to_vec()),
        ("bad magic", b"GIF89a this is not a capture".to_vec()),
        ("unknown link type", {
            let mut f = full.clone();
            f[20..24].copy_from_slice(&147u32.to_le_bytes());
            f
        }),
        ("absurd record length", {
            let mut f = full.clone();
            f[24 + 8..24 + 12].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
            f
        }),
    ];
    for (what, bytes) in cases {
        let err = run(&bytes).expect_err(what).to_string();
        assert!(!err.contains('\n') && !err.is_empty(), "{what}: {err}");
    }
}

#[test]
fn garbage_frames_are_counted_not_fatal() {
    let segs = conversation(1000, 5000);
    let mut fr = frames(&segs, Link::Ethernet, false);
    let t = fr[0].0;
    fr.push((t, vec![0xff; 7]));
    fr.push((t, {
        let mut f = Link::Ethernet.frame(&[0x45, 0, 0, 60, 0, 0, 0, 0, 64, 6, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
        f.truncate(30);
        f
    }));
    fr.push((t, Link::Ethernet.frame(&[0x60; 10])));
    let a = run(&pcap(&fr, Link::Ethernet, false, false, 65535)).unwrap();
    assert_eq!(a.stats.bad_headers, 3);
    check_conversation(&a.conns[0]);
}

#[test]
fn empty_capture_has_no_connections() {
    let a = run(&pcap(&[], Link::Ethernet, false, false, 65535)).unwrap();
    assert!(a.conns.is_empty());
    assert_eq!(a.stats.frames, 0);
}
