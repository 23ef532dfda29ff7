//! Monarch's self-diagnosis: from a capture of probes and their responses, tell whether an
//! emulated flow saw the path as a real flow would.
//!
//! Source: Haeberlen et al., "Monarch: A Tool to Emulate Transport Protocol Flows over the
//! Internet at Large", IMC 2006, §3.3 and §4.3–4.4 (Table 5), with the thresholds of
//! `ALGORITHMS.md` §6. Owns probe/response matching and the per-flow verdict; reading the
//! capture is `capture`'s and `decode`'s.
//!
//! Direction names follow the paper, where the remote host is a broadband client: a probe
//! travels *downstream* (towards the remote host), its response *upstream*. A probe lost
//! downstream is a loss a real flow would also suffer; a response lost upstream is the
//! emulation's inaccuracy (a real flow's cumulative ACKs would hide it). `ALGORITHMS.md` §6
//! swaps the two words; the arithmetic is the same.
//!
//! The remote host's IP ID counter tells the two apart. Between received responses j < k
//! (probe order) with m = k − j − 1 probes unanswered, Δ = id_k − id_j (mod 2^16) responses
//! were sent: Δ = 1 means all m probes were lost downstream, Δ = k − j that all m responses
//! were lost upstream, values between split them (Δ − 1 upstream, the rest downstream), and
//! Δ > k − j (the host sent other packets) leaves the loss unclassified. IDs are usable if
//! not all zero, not constant, and ≥ 90 % of the deltas between answers to consecutive
//! probes lie in [1, 3]; counters stored little-endian (old Windows) are recognised too.
//!
//! Reordering: responses arriving in an order other than their probes' is *downstream*
//! reordering if the IDs follow the arrival order (the remote host received the probes
//! reordered, as a real flow's packets would be) and *upstream* otherwise. Upstream
//! reordering is harmful [P] when a response arrives after those of three or more later
//! probes: the emulated receiver then sends the duplicate ACKs that trigger a fast
//! retransmit (RFC 5681's threshold) a real flow would not see; smaller displacements are
//! counted as minor, as in §4.4.
//!
//! Verdict: *Indeterminate* if the IDs are unusable or a loss is unclassified (the paper
//! aborts the diagnosis), *Inaccurate* if any upstream loss or harmful reordering was found,
//! otherwise *Confirmed*.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use crate::decode::{flags, Packet, Transport};

/// Share of consecutive-probe ID deltas that must lie in [1, 3] (ALGORITHMS.md §6 [P]).
const USABLE_SHARE: f64 = 0.9;
/// Upstream displacement from which reordering is harmful (RFC 5681 duplicate ACK threshold).
const HARMFUL_DISPLACEMENT: usize = 3;

/// The kinds of probe Monarch sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProbeKind {
    /// ICMP echo (v4 or v6); the reply has the same identifier and sequence number.
    IcmpEcho,
    /// ICMP timestamp request; likewise.
    IcmpTimestamp,
    /// TCP ACK or SYN to a closed port; the response is a RST.
    Tcp,
    /// UDP to a closed port; the response is ICMP port unreachable quoting the probe.
    Udp,
}

impl ProbeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeKind::IcmpEcho => "icmp-echo",
            ProbeKind::IcmpTimestamp => "icmp-timestamp",
            ProbeKind::Tcp => "tcp",
            ProbeKind::Udp => "udp",
        }
    }
}

/// Self-diagnosis result of one flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Confirmed,
    Inaccurate,
    Indeterminate,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Confirmed => "Confirmed",
            Verdict::Inaccurate => "Inaccurate",
            Verdict::Indeterminate => "Indeterminate",
        }
    }
}

/// One flow's diagnosis.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowDiagnosis {
    pub local: IpAddr,
    pub remote: IpAddr,
    pub kind: ProbeKind,
    pub probes: u64,
    pub responses: u64,
    pub ipid_usable: bool,
    pub ipid_little_endian: bool,
    pub lost_downstream: u64,
    pub lost_upstream: u64,
    pub lost_unclassified: u64,
    pub reordered_downstream: u64,
    pub reordered_upstream_minor: u64,
    pub reordered_upstream_harmful: u64,
    pub verdict: Verdict,
    /// Why the verdict is what it is, in a few words.
    pub reason: &'static str,
}

/// A probe and, once matched, its response.
#[derive(Debug, Clone, Copy)]
struct Probe {
    response: Option<Response>,
}

#[derive(Debug, Clone, Copy)]
struct Response {
    /// Order of arrival among this flow's responses.
    arrival: u64,
    ip_id: u16,
}

#[derive(Debug, Default)]
struct Flow {
    probes: Vec<Probe>,
    /// Probe key (identifier/sequence, expected RST sequence, quoted IP ID) to index.
    pending: HashMap<u64, usize>,
    arrivals: u64,
    /// A TCP flow that also carried a real connection (SYN-ACK seen) is not a probe flow.
    real_tcp: bool,
}

type FlowKey = (IpAddr, IpAddr, ProbeKind, u32);

/// Collects probes and responses; call [`Diagnoser::finish`] at the end of the capture.
#[derive(Default)]
pub struct Diagnoser {
    flows: BTreeMap<FlowKey, Flow>,
}

impl Diagnoser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one decoded packet.
    pub fn on_packet(&mut self, pkt: &Packet<'_>) {
        match pkt.transport {
            Transport::Icmp { icmp_type, rest, .. } => {
                let v6 = pkt.src.is_ipv6();
                let ident = |r: &[u8]| r.get(..4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as u64);
                match (v6, icmp_type) {
                    (false, 8) | (true, 128) => self.probe((pkt.src, pkt.dst, ProbeKind::IcmpEcho, 0), ident(rest)),
                    (false, 0) | (true, 129) => self.response((pkt.dst, pkt.src, ProbeKind::IcmpEcho, 0), ident(rest), pkt.ip_id),
                    (false, 13) => self.probe((pkt.src, pkt.dst, ProbeKind::IcmpTimestamp, 0), ident(rest)),
                    (false, 14) => self.response((pkt.dst, pkt.src, ProbeKind::IcmpTimestamp, 0), ident(rest), pkt.ip_id),
                    // Destination unreachable quoting a UDP probe: rest = 4 unused bytes,
                    // then the original IP header and its first 8 payload bytes.
                    (false, 3) => {
                        if let Some((orig_id, sport, dport)) = quoted_udp(rest.get(4..).unwrap_or(&[])) {
                            let key = (pkt.dst, pkt.src, ProbeKind::Udp, ((sport as u32) << 16) | dport as u32);
                            self.response(key, Some(orig_id as u64), pkt.ip_id);
                        }
                    }
                    _ => {}
                }
            }
            Transport::Udp { src_port, dst_port } if !pkt.src.is_ipv6() => {
                let key = (pkt.src, pkt.dst, ProbeKind::Udp, ((src_port as u32) << 16) | dst_port as u32);
                self.probe(key, Some(pkt.ip_id as u64));
            }
            Transport::Tcp(tcp, _) => {
                let rst = tcp.has(flags::RST);
                if rst {
                    // The RST answering an ACK probe carries the probe's ACK number as its
                    // sequence number (RFC 9293 §3.10.7.1).
                    let key = (pkt.dst, pkt.src, ProbeKind::Tcp, ((tcp.dst_port as u32) << 16) | tcp.src_port as u32);
                    let expect = if tcp.has(flags::ACK) && tcp.seq == 0 { tcp.ack } else { tcp.seq };
                    self.response(key, Some(expect as u64), pkt.ip_id);
                } else if tcp.has(flags::SYN) && tcp.has(flags::ACK) {
                    // A real connection, not a probe flow, in both directions: forget what was
                    // taken for probes and record no more of it, so that a capture of ordinary
                    // traffic costs memory per connection, not per packet.
                    let client = (pkt.dst, pkt.src, ProbeKind::Tcp, ((tcp.dst_port as u32) << 16) | tcp.src_port as u32);
                    let server = (pkt.src, pkt.dst, ProbeKind::Tcp, ((tcp.src_port as u32) << 16) | tcp.dst_port as u32);
                    for key in [client, server] {
                        let flow = self.flows.entry(key).or_default();
                        flow.real_tcp = true;
                        flow.probes = Vec::new();
                        flow.pending = HashMap::new();
                    }
                } else {
                    let key = (pkt.src, pkt.dst, ProbeKind::Tcp, ((tcp.src_port as u32) << 16) | tcp.dst_port as u32);
                    // A SYN probe is answered by RST-ACK acknowledging seq + 1.
                    let expect = if tcp.has(flags::SYN) { tcp.seq.wrapping_add(1) } else { tcp.ack };
                    self.probe(key, Some(expect as u64));
                }
            }
            _ => {}
        }
    }

    fn probe(&mut self, key: FlowKey, id: Option<u64>) {
        let Some(id) = id else { return };
        let flow = self.flows.entry(key).or_default();
        if flow.real_tcp {
            return;
        }
        let idx = flow.probes.len();
        flow.probes.push(Probe { response: None });
        // A repeated key (a retransmitted probe) points at the newest copy.
        flow.pending.insert(id, idx);
    }

    fn response(&mut self, key: FlowKey, id: Option<u64>, ip_id: u16) {
        let (Some(id), Some(flow)) = (id, self.flows.get_mut(&key)) else { return };
        if let Some(idx) = flow.pending.remove(&id) {
            let arrival = flow.arrivals;
            flow.arrivals += 1;
            flow.probes[idx].response = Some(Response { arrival, ip_id });
        }
    }

    /// Diagnoses every probe flow.
    pub fn finish(self) -> Vec<FlowDiagnosis> {
        self.flows
            .into_iter()
            .filter(|((_, _, kind, _), f)| !(*kind == ProbeKind::Tcp && (f.real_tcp || f.arrivals == 0)))
            .map(|((local, remote, kind, _), f)| diagnose(local, remote, kind, &f.probes))
            .collect()
    }
}

/// Original IPv4 ID and UDP ports quoted in an ICMP error.
fn quoted_udp(q: &[u8]) -> Option<(u16, u16, u16)> {
    let ihl = (*q.first()? & 0x0f) as usize * 4;
    if q.first()? >> 4 != 4 || ihl < 20 || *q.get(9)? != 17 {
        return None;
    }
    let id = u16::from_be_bytes([q[4], q[5]]);
    let udp = q.get(ihl..ihl + 4)?;
    Some((id, u16::from_be_bytes([udp[0], udp[1]]), u16::from_be_bytes([udp[2], udp[3]])))
}

/// Whether a sequence of IDs (answers to consecutive probes) is usable as a counter.
fn usable(pairs: &[(u16, u16)]) -> bool {
    if pairs.is_empty() {
        return false;
    }
    let ids = || pairs.iter().flat_map(|&(a, b)| [a, b]);
    if ids().all(|x| x == 0) || ids().all(|x| x == pairs[0].0) {
        return false;
    }
    let good = pairs.iter().filter(|&&(a, b)| (1..=3).contains(&b.wrapping_sub(a))).count();
    good as f64 >= USABLE_SHARE * pairs.len() as f64
}

/// Diagnoses one flow from its probes in sending order.
fn diagnose(local: IpAddr, remote: IpAddr, kind: ProbeKind, probes: &[Probe]) -> FlowDiagnosis {
    let answered: Vec<(usize, Response)> =
        probes.iter().enumerate().filter_map(|(i, p)| p.response.map(|r| (i, r))).collect();
    let consecutive: Vec<(u16, u16)> = answered
        .windows(2)
        .filter(|w| w[1].0 == w[0].0 + 1)
        .map(|w| (w[0].1.ip_id, w[1].1.ip_id))
        .collect();
    let (usable_be, usable_le) = (usable(&consecutive), {
        let swapped: Vec<(u16, u16)> = consecutive.iter().map(|&(a, b)| (a.swap_bytes(), b.swap_bytes())).collect();
        usable(&swapped)
    });
    let little_endian = !usable_be && usable_le;
    let id_of = |r: &Response| if little_endian { r.ip_id.swap_bytes() } else { r.ip_id };

    let mut d = FlowDiagnosis {
        local,
        remote,
        kind,
        probes: probes.len() as u64,
        responses: answered.len() as u64,
        ipid_usable: usable_be || usable_le,
        ipid_little_endian: little_endian,
        lost_downstream: 0,
        lost_upstream: 0,
        lost_unclassified: 0,
        reordered_downstream: 0,
        reordered_upstream_minor: 0,
        reordered_upstream_harmful: 0,
        verdict: Verdict::Indeterminate,
        reason: "",
    };

    // Losses between received responses.
    for w in answered.windows(2) {
        let (j, rj) = w[0];
        let (k, rk) = w[1];
        let missing = (k - j - 1) as u64;
        if missing == 0 {
            continue;
        }
        let delta = id_of(&rk).wrapping_sub(id_of(&rj)) as u64;
        if delta == 0 || delta > (k - j) as u64 {
            d.lost_unclassified += missing;
        } else {
            d.lost_upstream += delta - 1;
            d.lost_downstream += missing - (delta - 1);
        }
    }
    // Probes before the first or after the last response have no ID on one side.
    if let (Some(first), Some(last)) = (answered.first(), answered.last()) {
        d.lost_unclassified += (first.0 + (probes.len() - 1 - last.0)) as u64;
    } else {
        d.lost_unclassified += probes.len() as u64;
    }

    // Reordering: for each response, how many responses to later probes arrived before it.
    let mut by_arrival: Vec<(u64, usize, u16)> = answered.iter().map(|(i, r)| (r.arrival, *i, id_of(r))).collect();
    by_arrival.sort_unstable();
    for (pos, &(_, probe, id)) in by_arrival.iter().enumerate() {
        let overtaken_by: Vec<u16> =
            by_arrival[..pos].iter().filter(|&&(_, p, _)| p > probe).map(|&(_, _, id2)| id2).collect();
        if overtaken_by.is_empty() {
            continue;
        }
        // If the later probes' responses were also sent earlier (smaller ID, mod 2^16), the
        // remote host got the probes in that order: the reordering happened downstream.
        let sent_before = overtaken_by.iter().all(|&id2| (id.wrapping_sub(id2) as i16) > 0);
        if sent_before && d.ipid_usable {
            d.reordered_downstream += 1;
        } else if overtaken_by.len() >= HARMFUL_DISPLACEMENT {
            d.reordered_upstream_harmful += 1;
        } else {
            d.reordered_upstream_minor += 1;
        }
    }

    (d.verdict, d.reason) = if !d.ipid_usable {
        (Verdict::Indeterminate, "no usable IP IDs")
    } else if d.lost_unclassified > 0 {
        (Verdict::Indeterminate, "loss not classifiable")
    } else if d.lost_upstream > 0 {
        (Verdict::Inaccurate, "upstream loss")
    } else if d.reordered_upstream_harmful > 0 {
        (Verdict::Inaccurate, "harmful upstream reordering")
    } else {
        (Verdict::Confirmed, "no upstream loss or harmful reordering")
    };
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::TcpHeader;

    #[allow(clippy::too_many_arguments)]
    fn tcp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, fl: u8, seq: u32, ack: u32, ip_id: u16) -> Packet<'static> {
        let h = TcpHeader { src_port: sport, dst_port: dport, seq, ack, flags: fl, window: 65535, raw_options: &[], payload_len: 0 };
        Packet { src: IpAddr::from(src), dst: IpAddr::from(dst), ip_id, ip_len: 40, transport: Transport::Tcp(h, &[]) }
    }

    /// A capture of an ordinary connection holds no probe flow, and once its SYN-ACK is seen
    /// neither direction's packets are kept: memory per connection, not per packet.
    #[test]
    fn a_real_connection_is_not_kept_as_probes() {
        let (c, s) = ([10, 0, 0, 1], [10, 0, 0, 2]);
        let mut d = Diagnoser::new();
        d.on_packet(&tcp(c, s, 4000, 80, flags::SYN, 1, 0, 1));
        d.on_packet(&tcp(s, c, 80, 4000, flags::SYN | flags::ACK, 100, 2, 1));
        for i in 0..1000 {
            d.on_packet(&tcp(s, c, 80, 4000, flags::ACK, 101 + i * 1000, 2, 2 + i as u16));
            d.on_packet(&tcp(c, s, 4000, 80, flags::ACK, 2, 101 + i * 1000, 2 + i as u16));
        }
        assert!(d.flows.values().all(|f| f.probes.is_empty() && f.pending.is_empty()));
        assert!(d.finish().is_empty());
    }

    /// ACK probes to a closed port answered by RSTs with a counting IP ID: one flow, confirmed.
    #[test]
    fn ack_probes_answered_by_rsts_are_a_confirmed_flow() {
        let (m, t) = ([10, 0, 0, 1], [10, 0, 0, 9]);
        let mut d = Diagnoser::new();
        for i in 0..20u32 {
            d.on_packet(&tcp(m, t, 5000, 33434, flags::ACK, 1, 1000 + i, 0));
            d.on_packet(&tcp(t, m, 33434, 5000, flags::RST, 1000 + i, 0, 7 + i as u16));
        }
        let flows = d.finish();
        assert_eq!(flows.len(), 1);
        assert_eq!((flows[0].probes, flows[0].responses, flows[0].verdict), (20, 20, Verdict::Confirmed));
    }
}
