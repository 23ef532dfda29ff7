//! The analysis split over threads gives exactly the single-threaded result: the same rows,
//! numbered the same, and the same capture counts.

mod common;

use common::*;
use pathtwin_trace::{analyze, analyze_slice, AnalyzeOptions};

/// Many interleaved conversations: distinct client ports, one port reused by a second
/// connection, every seventh with a retransmitted segment, plus frames of no flow.
fn busy_capture() -> Vec<u8> {
    let mut frames = Vec::new();
    for k in 0..300u32 {
        let port = if k == 299 { 1000 } else { 1000 + k as u16 };
        let t0 = k as u64 * 3_000_000 + if k == 299 { 2_000_000_000 } else { 0 };
        let mut segs = conversation(k.wrapping_mul(7919), k.wrapping_mul(104_729));
        if k % 7 == 0 {
            let mut again = segs[5];
            again.t_ns += 300_000;
            segs.insert(6, again);
        }
        for s in segs {
            let mut ip = ip_packet(&s, k % 5 == 0);
            // Client port: source of the client's segments, destination of the server's.
            let at = if ip[0] >> 4 == 6 { 40 } else { 20 } + if s.from_client { 0 } else { 2 };
            ip[at..at + 2].copy_from_slice(&port.to_be_bytes());
            frames.push((s.t_ns + t0, Link::Ethernet.frame(&ip)));
        }
    }
    let t = frames[10].0;
    frames.push((t, vec![0xff; 9]));
    frames.push((t, Link::Ethernet.frame(&[0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 53, 0, 53, 0, 8, 0, 0])));
    frames.sort_by_key(|f| f.0);
    pcap(&frames, Link::Ethernet, false, false, 65535)
}

#[test]
fn any_thread_count_gives_the_single_threaded_result() {
    let bytes = busy_capture();
    let base = AnalyzeOptions { exchanges: true, cross_traffic: true, ..AnalyzeOptions::default() };
    let single = analyze(&bytes[..], &base, |_| true).unwrap();
    assert_eq!(single.conns.len(), 300);
    assert_eq!(single.stats.connections, 300);
    assert_eq!((single.stats.bad_headers, single.stats.other_packets), (1, 1));
    assert!(single.conns.windows(2).all(|w| w[0].start_s <= w[1].start_s));
    assert!(single.conns.iter().enumerate().all(|(i, r)| r.conn_id == i as u64));
    assert_eq!(single.conns.iter().filter(|r| r.retrans_packets_s2c == 1).count(), 43);
    // One exchange per conversation, under its connection's number and with its bytes.
    assert_eq!(single.exchanges.len(), 300);
    assert!(single.exchanges.iter().enumerate().all(|(i, x)| (x.conn_id, x.exchange) == (i as u64, 0)));
    assert!(single.exchanges.iter().all(|x| (x.request_bytes, x.response_bytes) == (100, 3000)));
    for threads in [1, 2, 3, 5] {
        let opts = AnalyzeOptions { threads, ..base.clone() };
        let split = analyze_slice(&bytes, &opts, |_| true).unwrap();
        assert_eq!(split.stats, single.stats, "{threads} threads");
        assert!(split.conns == single.conns, "{threads} threads: rows differ");
        assert!(split.exchanges == single.exchanges, "{threads} threads: exchange rows differ");
        assert!(split.cross_traffic == single.cross_traffic, "{threads} threads: cross-traffic rows differ");
    }
    // Without the option the connection rows are the same and no exchange rows are kept.
    let plain = analyze_slice(&bytes, &AnalyzeOptions { threads: 3, ..AnalyzeOptions::default() }, |_| true).unwrap();
    assert!(plain.conns == single.conns && plain.exchanges.is_empty() && plain.cross_traffic.is_empty());
}

#[test]
fn cancelling_stops_every_thread() {
    let bytes = busy_capture();
    let opts = AnalyzeOptions { threads: 3, ..AnalyzeOptions::default() };
    let err = analyze_slice(&bytes, &opts, |_| false).unwrap_err();
    assert!(matches!(err, pathtwin_trace::TraceError::Cancelled), "{err}");
}
