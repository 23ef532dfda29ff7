//! Handshake option negotiation (MSS, SACK-permitted, window scale) and the receiver's acknowledgment
//! policy, driven segment by segment against a hand-written peer.

mod common;

use common::*;
use pathtwin_core::time::Instant;
use pathtwin_tcp::{Endpoint, Event, Flags, Segment, State, TcpConfig};

const WND: u64 = 1 << 20;

#[test]
fn mss_is_the_smaller_of_both_ends() {
    let client = TcpConfig::default();
    let server = TcpConfig { mss: 536, ..Default::default() };
    let mut sim = Sim::new(client, server, LinkCfg::delay(ms(10)), LinkCfg::delay(ms(10)));
    sim.ep[0].send(10_000);
    sim.ep[0].close();
    sim.run_until(at_ms(5_000));
    let syn = sim.sent[0][0].1;
    let syn_ack = sim.sent[1][0].1;
    assert_eq!((syn.flags, syn.mss), (Flags::SYN, Some(1460)));
    assert_eq!((syn_ack.flags, syn_ack.mss), (Flags::SYN | Flags::ACK, Some(536)));
    assert_eq!(syn.header_bytes(), 28, "MSS + SACK-permitted, padded");
    assert_eq!((sim.ep[0].mss(), sim.ep[1].mss()), (536, 536));
    let data: Vec<u32> = sim.sent[0].iter().map(|(_, s)| s.len).filter(|&l| l > 0).collect();
    assert_eq!(data.len(), 19); // ceil(10000 / 536)
    assert!(data.iter().all(|&l| l <= 536));
    assert_eq!(sim.ep[1].stats().bytes_delivered, 10_000);
}

/// A listener that has accepted a SYN from a hand-written client (ISN 0) and the ACK of
/// its SYN-ACK; returns it connected, with the SYN-ACK it sent.
fn accept(cfg: TcpConfig, syn: Segment) -> (Endpoint, Segment) {
    let t = Instant::ZERO;
    let mut server = Endpoint::listen(cfg, 5000);
    server.handle_segment(t, &syn);
    let syn_ack = server.poll_transmit(t).unwrap();
    assert_eq!(server.poll_transmit(t), None);
    server.handle_segment(t, &Segment { seq: 1, ack: 5001, flags: Flags::ACK, wnd: WND, ..Default::default() });
    assert_eq!(server.state(), State::Established);
    assert_eq!(server.poll_event(), Some(Event::Connected));
    (server, syn_ack)
}

fn syn(mss: Option<u16>, sack_permitted: bool) -> Segment {
    Segment { seq: 0, flags: Flags::SYN, wnd: WND, mss, sack_permitted, ..Default::default() }
}

fn data(seq: u64, len: u32) -> Segment {
    Segment { seq, ack: 5001, flags: Flags::ACK, len, wnd: WND, ..Default::default() }
}

#[test]
fn a_syn_without_mss_option_means_536() {
    let (server, syn_ack) = accept(TcpConfig::default(), syn(None, true));
    assert_eq!(server.mss(), 536);
    assert_eq!(syn_ack.mss, Some(1460));
    assert!(syn_ack.sack_permitted && server.sack_enabled());
}

#[test]
fn sack_is_used_only_if_both_ends_permit_it() {
    let (server, syn_ack) = accept(TcpConfig::default(), syn(Some(1460), false));
    assert!(!syn_ack.sack_permitted && !server.sack_enabled());
    let (server, syn_ack) = accept(TcpConfig { sack: false, ..Default::default() }, syn(Some(1460), true));
    assert!(!syn_ack.sack_permitted && !server.sack_enabled());
    // Without SACK, out-of-order data is acknowledged without blocks.
    let mut server = server;
    server.handle_segment(at_ms(1), &data(1461, 1460));
    let ack = server.poll_transmit(at_ms(1)).unwrap();
    assert_eq!((ack.ack, ack.sack.len()), (1, 0));
}

#[test]
fn window_scaling_is_in_effect_only_if_both_ends_offer_it() {
    // RFC 7323 §2.2: the option applies once both SYNs carried it.
    let linux = TcpConfig::linux();
    let offered = Segment { window_scale: true, ..syn(Some(1460), true) };
    let (server, syn_ack) = accept(linux.clone(), offered);
    assert!(syn_ack.window_scale && server.window_scale_enabled());
    let (server, syn_ack) = accept(linux, syn(Some(1460), true));
    assert!(!syn_ack.window_scale && !server.window_scale_enabled());
    let (server, syn_ack) = accept(TcpConfig::default(), offered);
    assert!(!syn_ack.window_scale && !server.window_scale_enabled());
}

#[test]
fn ack_policy_follows_rfc5681_section_4_2() {
    let (mut s, _) = accept(TcpConfig::default(), syn(Some(1460), true));
    let t = at_ms(10);
    // One full segment in order: the ACK is delayed.
    s.handle_segment(t, &data(1, 1460));
    assert_eq!(s.poll_transmit(t), None);
    assert_eq!(s.poll_timeout(), Some(t + ms(40)));
    // The second full segment: acknowledged at once.
    s.handle_segment(t, &data(1461, 1460));
    let a = s.poll_transmit(t).unwrap();
    assert_eq!((a.ack, a.len, a.flags), (2921, 0, Flags::ACK));
    assert_eq!(s.poll_timeout(), None);
    // Out of order (segment 3 lost): at once, with a SACK block for what arrived.
    s.handle_segment(t, &data(4381, 1460));
    let a = s.poll_transmit(t).unwrap();
    assert_eq!(a.ack, 2921);
    assert_eq!(a.sack.as_slice(), [(4381, 5841)]);
    assert_eq!(a.header_bytes(), 32);
    // Filling the hole: at once, cumulative over both.
    s.handle_segment(t, &data(2921, 1460));
    let a = s.poll_transmit(t).unwrap();
    assert_eq!((a.ack, a.sack.len()), (5841, 0));
    // A duplicate: at once.
    s.handle_segment(t, &data(1, 1460));
    assert_eq!(s.poll_transmit(t).map(|a| a.ack), Some(5841));
    // A FIN: at once, and the application hears of it after the data.
    let fin = Segment { flags: Flags::ACK | Flags::FIN, ..data(5841, 0) };
    s.handle_segment(t, &fin);
    assert_eq!(s.poll_transmit(t).map(|a| a.ack), Some(5842));
    assert_eq!(s.poll_event(), Some(Event::Received { bytes: 5840 }));
    assert_eq!(s.poll_event(), Some(Event::PeerClosed));
    assert_eq!(s.state(), State::CloseWait);
}

#[test]
fn a_lone_segment_is_acked_when_the_timer_fires() {
    let (mut s, _) = accept(TcpConfig::default(), syn(Some(1460), true));
    s.handle_segment(at_ms(10), &data(1, 100));
    assert_eq!(s.poll_transmit(at_ms(10)), None);
    let due = s.poll_timeout().unwrap();
    assert_eq!(due, at_ms(50));
    s.handle_timeout(at_ms(49)); // early: nothing happens
    assert_eq!(s.poll_transmit(at_ms(49)), None);
    s.handle_timeout(due);
    assert_eq!(s.poll_transmit(due).map(|a| a.ack), Some(101));
}

#[test]
fn delayed_acks_can_be_turned_off_or_spaced_wider() {
    let (mut s, _) = accept(TcpConfig { delayed_ack: false, ..Default::default() }, syn(Some(1460), true));
    s.handle_segment(at_ms(1), &data(1, 1460));
    assert_eq!(s.poll_transmit(at_ms(1)).map(|a| a.ack), Some(1461));
    let (mut s, _) = accept(TcpConfig { delayed_ack_every: 3, ..Default::default() }, syn(Some(1460), true));
    for i in 0..2 {
        s.handle_segment(at_ms(1), &data(1 + i * 1460, 1460));
        assert_eq!(s.poll_transmit(at_ms(1)), None);
    }
    s.handle_segment(at_ms(1), &data(2921, 1460));
    assert_eq!(s.poll_transmit(at_ms(1)).map(|a| a.ack), Some(4381));
}

#[test]
fn an_ack_for_unsent_data_is_answered_and_ignored() {
    let (mut s, _) = accept(TcpConfig::default(), syn(Some(1460), true));
    s.send(1000);
    let seg = s.poll_transmit(at_ms(1)).unwrap();
    assert_eq!((seg.seq, seg.len), (5001, 1000));
    s.handle_segment(at_ms(2), &Segment { ack: 9999, ..data(1, 0) });
    assert_eq!(s.flight_size(), 1000);
    assert_eq!(s.poll_transmit(at_ms(2)).map(|a| a.ack), Some(1));
}

/// The client's first segments after the SYN-ACK when its application writes `request`
/// bytes the moment it is told it is connected: (length, flags) of each.
fn after_syn_ack(cfg: TcpConfig, request: u64) -> Vec<(u32, Flags)> {
    let t = Instant::ZERO;
    let mut client = Endpoint::connect(cfg, t, 0);
    let syn = client.poll_transmit(t).unwrap();
    assert_eq!(syn.flags, Flags::SYN);
    let syn_ack = Segment { seq: 7000, ack: 1, flags: Flags::SYN | Flags::ACK, wnd: WND, mss: Some(1460), sack_permitted: true, ..Default::default() };
    client.handle_segment(at_ms(100), &syn_ack);
    assert_eq!(client.poll_event(), Some(Event::Connected));
    client.send(request);
    std::iter::from_fn(|| client.poll_transmit(at_ms(100))).inspect(|s| assert_eq!(s.ack, 7001)).map(|s| (s.len, s.flags)).collect()
}

/// Linux acknowledges a SYN-ACK at once with a pure ACK and sends the request after it
/// (`tcp_rcv_synsent_state_process` → `tcp_send_ack`; a kernel capture of any HTTP client
/// shows SYN, SYN-ACK, ACK, then the request). Riding the ACK on the request instead delays
/// the handshake's completion at the server by the request's serialization, which Monkey See
/// reads as the path's round trip (150 ms too much on a dial-up uplink for 600 bytes).
#[test]
fn the_linux_client_acknowledges_the_syn_ack_alone_before_its_request() {
    assert_eq!(after_syn_ack(TcpConfig::linux(), 600), vec![(0, Flags::ACK), (600, Flags::ACK)]);
    // Nothing to send: the one pure ACK, as before.
    assert_eq!(after_syn_ack(TcpConfig::linux(), 0), vec![(0, Flags::ACK)]);
    // The simulator's own TCP (ns-2's agents have no handshake) keeps the piggybacked ACK.
    assert_eq!(after_syn_ack(TcpConfig::ns2(), 600), vec![(600, Flags::ACK)]);
}
