//! `[tcp] ecn` end to end through the simulator: the key reaches the endpoints, the ECN
//! codepoint travels with the packets (read back from the server's capture, whose IPv4 TOS
//! byte carries it, RFC 3168 §5) and the flow table has the ECN counters.

mod common;

fn scenario(tcp: &str) -> String {
    format!(
        r#"
hosts = ["client", "server"]
{tcp}
[run]
duration = "3s"
seed = 1
pcap = ["server"]
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
"#
    )
}

/// (TCP flags, IP ECN bits, TCP payload length, sent by the client) of each captured packet.
fn run(tcp: &str, name: &str) -> (Vec<(u8, u8, usize, bool)>, pathtwin_sim::Results) {
    let (results, datagrams) = common::run_capturing_server(&scenario(tcp), name);
    let out = datagrams
        .iter()
        .map(|ip| {
            let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
            let tcp = &ip[20..];
            let tcp_len = (tcp[12] >> 4) as usize * 4;
            let from_client = u16::from_be_bytes([tcp[2], tcp[3]]) == 80;
            (tcp[13], ip[1] & 0b11, total - 20 - tcp_len, from_client)
        })
        .collect();
    (out, results)
}

const ECE: u8 = 0x40;
const CWR: u8 = 0x80;
const SYN: u8 = 0x02;

#[test]
fn tcp_ecn_key_makes_data_ect_and_negotiates_in_the_handshake() {
    let (pkts, results) = run("[tcp]\necn = true", "on");
    let syn = pkts.iter().find(|p| p.0 & SYN != 0 && p.3).unwrap();
    assert_eq!(syn.0 & (ECE | CWR), ECE | CWR, "ECN-setup SYN");
    let synack = pkts.iter().find(|p| p.0 & SYN != 0 && !p.3).unwrap();
    assert_eq!(synack.0 & (ECE | CWR), ECE, "ECN-setup SYN-ACK");
    let data: Vec<_> = pkts.iter().filter(|p| p.3 && p.2 > 0).collect();
    assert!(data.len() > 100);
    // ECT(0) = 10 on new data; the few retransmissions (none expected here) would be 00.
    let ect = data.iter().filter(|p| p.1 == 0b10).count();
    let retransmits = results.flows.i64s("retransmits")[0] as usize;
    assert_eq!(ect + retransmits, data.len());
    assert!(pkts.iter().filter(|p| !p.3).all(|p| p.1 == 0), "pure ACKs are not ECT");
    // No queue on this path marks (DropTail), so there is nothing to echo or react to.
    assert_eq!(results.flows.i64s("ce_received"), [0]);
    assert_eq!(results.flows.i64s("ecn_reductions"), [0]);
}

#[test]
fn without_the_key_nothing_is_ect_and_no_ecn_flags_are_sent() {
    let (pkts, results) = run("", "off");
    assert!(pkts.iter().filter(|p| p.3 && p.2 > 0).count() > 100);
    assert!(pkts.iter().all(|p| p.1 == 0 && p.0 & (ECE | CWR) == 0));
    assert_eq!(results.flows.i64s("ecn_reductions"), [0]);
}
