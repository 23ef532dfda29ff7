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
//!
//! The diagnosis streams: a flow's memory is bounded, whatever the number of its probes.
//! Each flow keeps counters and a window of probes, from the oldest one that may still be
//! answered to the newest, with the pending probes' keys. A response is classified as
//! reordered when it arrives (the responses that overtook it are those of later probes in
//! the window, answered already); the window's front leaves as soon as it is answered, or
//! can no longer be (a later probe reused its key, or the capture ended), and the
//! consecutive-probe ID deltas and the losses between answered probes are counted as
//! answered probes leave, in probe order. Whether the IDs are usable, and in which byte
//! order, is only known at the end, so the deltas, losses and reorderings are counted under
//! both readings of the IDs (reorderings also by whether they would be downstream if the
//! IDs turn out usable) and the reading is picked at the end, as a pass over every probe
//! would pick it. The result is the one of keeping every probe and diagnosing at the end
//! (the tests hold the two side by side), with one bound: a probe still unanswered when
//! 2^16 later probes have been sent is given up as lost, and a response arriving later is
//! ignored. This changes no result on a real capture: a Monarch flow carries a TCP flow,
//! each probe a segment, so a response comes back while less than a window of data has
//! been sent after its probe, far below 2^16 segments (~95 MB of 1448-byte ones); and a
//! response overtaken by answers to 2^16 later probes is beyond what 16-bit IP IDs can
//! tell (its ID, compared mod 2^16 with theirs, would wrap around). A probe takes 4 bytes
//! in the window (its state and response ID) and, while it waits, a pending key; a window
//! holds up to 2^16 probes (256 kB) while a lost probe is at its front, otherwise about a
//! round trip's worth. Time goes with it: a response is compared with those to the probes between
//! its own and the highest answered (its displacement), where a pass over the whole flow
//! compared each response with every one that arrived before it.

use std::collections::{BTreeMap, HashMap, VecDeque};
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

/// Probes a response may still arrive for, per flow: the front of the window is given up as
/// lost once this many later probes have been sent. See the module doc for why this changes
/// no result on a real capture: 2^16 is also where comparing 16-bit IP IDs stops working.
const WINDOW: usize = 1 << 16;

/// A probe in the window, in sending order: 4 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// Unanswered, its key still pending.
    Waiting,
    /// Answered; the response's IP ID as read (big-endian).
    Answered(u16),
    /// Unanswered for good: a later probe took over its key, or it was given up.
    Dead,
}

/// Loss counts under one byte order.
#[derive(Debug, Default, Clone, Copy)]
struct Losses {
    downstream: u64,
    upstream: u64,
    unclassified: u64,
}

/// Reordering counts under one byte order, split by whether the overtaking responses' IDs
/// are all smaller (`sent_before`: downstream if the IDs turn out usable) and by how many
/// overtook (`[minor, harmful]`).
#[derive(Debug, Default, Clone, Copy)]
struct Reorders {
    sent_before: [u64; 2],
    otherwise: [u64; 2],
}

#[derive(Debug, Default)]
struct Flow {
    /// The window: probes from the oldest that may still be answered to the newest, the
    /// first being probe number `base`. Its front is always `Waiting`: answered and dead
    /// probes there are passed on to the counters at once.
    probes: VecDeque<Slot>,
    base: u64,
    /// Probe key (identifier/sequence, expected RST sequence, quoted IP ID) to probe number,
    /// for the `Waiting` probes of the window, and for probes given up since the last sweep
    /// (before `base`: stale), at most twice the window's length and 64 more.
    pending: HashMap<u64, u64>,
    /// Responses matched so far.
    arrivals: u64,
    /// The highest probe number answered so far.
    max_answered: Option<u64>,
    /// A TCP flow that also carried a real connection (SYN-ACK seen) is not a probe flow.
    real_tcp: bool,
    // What has left the window, in probe order.
    first_answered: Option<u64>,
    last_answered: Option<(u64, u16)>,
    /// Answers to consecutive probes: how many pairs, how many deltas in [1, 3] per byte
    /// order (big, little), the first ID, whether any ID is non-zero and any differs from
    /// the first (byte order changes neither).
    pairs: u64,
    pairs_good: [u64; 2],
    pairs_first: Option<u16>,
    pairs_nonzero: bool,
    pairs_vary: bool,
    /// Per byte order (big, little).
    losses: [Losses; 2],
    reorders: [Reorders; 2],
}

/// An IP ID read in byte order `le` (0 big-endian, 1 little-endian).
fn ordered(id: u16, le: usize) -> u16 {
    if le == 1 {
        id.swap_bytes()
    } else {
        id
    }
}

impl Flow {
    fn probe(&mut self, id: u64, window: usize) {
        if self.probes.len() >= window {
            // The front has waited for `window` later probes: take it as unanswered. Its key
            // stays pending, stale (before `base`), until the next sweep.
            self.probes[0] = Slot::Dead;
            self.advance();
        }
        let idx = self.base + self.probes.len() as u64;
        self.probes.push_back(Slot::Waiting);
        // A repeated key (a retransmitted probe) points at the newest copy: the older one
        // can no longer be answered.
        if let Some(old) = self.pending.insert(id, idx).filter(|&old| old >= self.base) {
            self.probes[(old - self.base) as usize] = Slot::Dead;
            self.advance();
        }
        // The sweep: stale keys match nothing (lookups ignore keys before `base`), so
        // dropping them changes no result, and doing it once they outnumber the window
        // twice over keeps `pending` within 2 × window + 64 after every probe.
        if self.pending.len() > 2 * self.probes.len() + 64 {
            let base = self.base;
            self.pending.retain(|_, &mut i| i >= base);
        }
    }

    fn response(&mut self, id: u64, ip_id: u16) {
        let Some(idx) = self.pending.remove(&id).filter(|&idx| idx >= self.base) else { return };
        self.arrivals += 1;
        let pos = (idx - self.base) as usize;
        self.probes[pos] = Slot::Answered(ip_id);
        // Reordering: the responses to later probes that arrived before this one are all in
        // the window (it runs from an older probe to the newest), and none lies beyond the
        // highest probe answered so far.
        if let Some(max) = self.max_answered.filter(|&m| m > idx) {
            let mut overtaken = 0;
            let mut sent_before = [true; 2];
            for slot in self.probes.range(pos + 1..=(max - self.base) as usize) {
                if let Slot::Answered(id2) = *slot {
                    overtaken += 1;
                    for (le, sb) in sent_before.iter_mut().enumerate() {
                        // Smaller ID (mod 2^16) on the later probe: sent earlier.
                        *sb &= (ordered(ip_id, le).wrapping_sub(ordered(id2, le)) as i16) > 0;
                    }
                }
            }
            let harmful = (overtaken >= HARMFUL_DISPLACEMENT) as usize;
            for (r, sb) in self.reorders.iter_mut().zip(sent_before) {
                if sb {
                    r.sent_before[harmful] += 1;
                } else {
                    r.otherwise[harmful] += 1;
                }
            }
        }
        self.max_answered = self.max_answered.max(Some(idx));
        self.advance();
    }

    /// Passes the answered or given-up probes at the front of the window on to the counters.
    fn advance(&mut self) {
        while let Some(&slot) = self.probes.front() {
            if slot == Slot::Waiting {
                break;
            }
            self.probes.pop_front();
            let idx = self.base;
            self.base += 1;
            if let Slot::Answered(id) = slot {
                self.answered(idx, id);
            }
        }
    }

    /// Probe `k`, answered with `id`, the next answered probe in probe order.
    fn answered(&mut self, k: u64, id: u16) {
        match self.last_answered {
            None => self.first_answered = Some(k),
            Some((j, prev)) if k == j + 1 => {
                let first = *self.pairs_first.get_or_insert(prev);
                self.pairs += 1;
                self.pairs_nonzero |= prev != 0 || id != 0;
                self.pairs_vary |= prev != first || id != first;
                for (le, good) in self.pairs_good.iter_mut().enumerate() {
                    *good += (1..=3).contains(&ordered(id, le).wrapping_sub(ordered(prev, le))) as u64;
                }
            }
            // Losses between received responses.
            Some((j, prev)) => {
                let missing = k - j - 1;
                for (le, l) in self.losses.iter_mut().enumerate() {
                    let delta = ordered(id, le).wrapping_sub(ordered(prev, le)) as u64;
                    if delta == 0 || delta > k - j {
                        l.unclassified += missing;
                    } else {
                        l.upstream += delta - 1;
                        l.downstream += missing - (delta - 1);
                    }
                }
            }
        }
        self.last_answered = Some((k, id));
    }

    /// Whether the IDs of answers to consecutive probes are usable as a counter, read in
    /// byte order `le`.
    fn usable(&self, le: usize) -> bool {
        self.pairs > 0
            && self.pairs_nonzero
            && self.pairs_vary
            && self.pairs_good[le] as f64 >= USABLE_SHARE * self.pairs as f64
    }

    /// The flow's diagnosis; every probe still waiting is taken as unanswered.
    fn diagnose(mut self, local: IpAddr, remote: IpAddr, kind: ProbeKind) -> FlowDiagnosis {
        let probes = self.base + self.probes.len() as u64;
        self.probes.iter_mut().for_each(|s| {
            if *s == Slot::Waiting {
                *s = Slot::Dead
            }
        });
        self.advance();
        let (usable_be, usable_le) = (self.usable(0), self.usable(1));
        let little_endian = !usable_be && usable_le;
        let le = little_endian as usize;
        let ipid_usable = usable_be || usable_le;
        let Losses { downstream, upstream, mut unclassified } = self.losses[le];
        // Probes before the first or after the last response have no ID on one side.
        if let (Some(first), Some((last, _))) = (self.first_answered, self.last_answered) {
            unclassified += first + (probes - 1 - last);
        } else {
            unclassified += probes;
        }
        let r = self.reorders[le];
        let (reordered_downstream, [minor, harmful]) = if ipid_usable {
            (r.sent_before[0] + r.sent_before[1], r.otherwise)
        } else {
            (0, [r.sent_before[0] + r.otherwise[0], r.sent_before[1] + r.otherwise[1]])
        };
        let mut d = FlowDiagnosis {
            local,
            remote,
            kind,
            probes,
            responses: self.arrivals,
            ipid_usable,
            ipid_little_endian: little_endian,
            lost_downstream: downstream,
            lost_upstream: upstream,
            lost_unclassified: unclassified,
            reordered_downstream,
            reordered_upstream_minor: minor,
            reordered_upstream_harmful: harmful,
            verdict: Verdict::Indeterminate,
            reason: "",
        };
        (d.verdict, d.reason) = verdict(&d);
        d
    }
}

type FlowKey = (IpAddr, IpAddr, ProbeKind, u32);

/// Collects probes and responses; call [`Diagnoser::finish`] at the end of the capture.
pub struct Diagnoser {
    flows: BTreeMap<FlowKey, Flow>,
    /// Bound of each flow's window ([`WINDOW`]; smaller in tests).
    window: usize,
}

impl Default for Diagnoser {
    fn default() -> Self {
        Diagnoser { flows: BTreeMap::new(), window: WINDOW }
    }
}

impl Diagnoser {
    pub fn new() -> Self {
        Self::default()
    }

    /// A diagnoser whose flows give up a waiting probe after `window` later ones.
    #[cfg(test)]
    fn with_window(window: usize) -> Self {
        Diagnoser { flows: BTreeMap::new(), window }
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
                    self.real_connection(client);
                    self.real_connection(server);
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

    fn real_connection(&mut self, key: FlowKey) {
        let flow = self.flows.entry(key).or_default();
        *flow = Flow { real_tcp: true, ..Flow::default() };
    }

    fn probe(&mut self, key: FlowKey, id: Option<u64>) {
        let Some(id) = id else { return };
        let flow = self.flows.entry(key).or_default();
        if !flow.real_tcp {
            flow.probe(id, self.window);
        }
    }

    fn response(&mut self, key: FlowKey, id: Option<u64>, ip_id: u16) {
        let (Some(id), Some(flow)) = (id, self.flows.get_mut(&key)) else { return };
        flow.response(id, ip_id);
    }

    /// Diagnoses every probe flow.
    pub fn finish(self) -> Vec<FlowDiagnosis> {
        self.flows
            .into_iter()
            .filter(|((_, _, kind, _), f)| !(*kind == ProbeKind::Tcp && (f.real_tcp || f.arrivals == 0)))
            .map(|((local, remote, kind, _), f)| f.diagnose(local, remote, kind))
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

/// The verdict and its reason from a flow's counts.
fn verdict(d: &FlowDiagnosis) -> (Verdict, &'static str) {
    if !d.ipid_usable {
        (Verdict::Indeterminate, "no usable IP IDs")
    } else if d.lost_unclassified > 0 {
        (Verdict::Indeterminate, "loss not classifiable")
    } else if d.lost_upstream > 0 {
        (Verdict::Inaccurate, "upstream loss")
    } else if d.reordered_upstream_harmful > 0 {
        (Verdict::Inaccurate, "harmful upstream reordering")
    } else {
        (Verdict::Confirmed, "no upstream loss or harmful reordering")
    }
}

/// The diagnosis as it was before it streamed, kept to check the streaming one against: every
/// probe of a flow in memory, diagnosed at the end.
#[cfg(test)]
mod batch {
    use super::*;

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
        pending: HashMap<u64, usize>,
        arrivals: u64,
        real_tcp: bool,
    }

    #[derive(Default)]
    pub(super) struct Diagnoser {
        flows: BTreeMap<FlowKey, Flow>,
    }

    impl Diagnoser {
        pub(super) fn real_connection(&mut self, key: FlowKey) {
            let flow = self.flows.entry(key).or_default();
            flow.real_tcp = true;
            flow.probes = Vec::new();
            flow.pending = HashMap::new();
        }

        pub(super) fn probe(&mut self, key: FlowKey, id: Option<u64>) {
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

        pub(super) fn response(&mut self, key: FlowKey, id: Option<u64>, ip_id: u16) {
            let (Some(id), Some(flow)) = (id, self.flows.get_mut(&key)) else { return };
            if let Some(idx) = flow.pending.remove(&id) {
                let arrival = flow.arrivals;
                flow.arrivals += 1;
                flow.probes[idx].response = Some(Response { arrival, ip_id });
            }
        }

        pub(super) fn finish(self) -> Vec<FlowDiagnosis> {
            self.flows
                .into_iter()
                .filter(|((_, _, kind, _), f)| !(*kind == ProbeKind::Tcp && (f.real_tcp || f.arrivals == 0)))
                .map(|((local, remote, kind, _), f)| diagnose(local, remote, kind, &f.probes))
                .collect()
        }
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

        // The verdict is a function of the counts, shared; the counts are what is checked.
        (d.verdict, d.reason) = verdict(&d);
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::TcpHeader;
    use proptest::prelude::*;

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

    /// One probe of a simulated flow, as drawn.
    #[derive(Debug, Clone)]
    struct ProbeDraw {
        /// Below 8: the probe reuses the key of one of the four before it (a retransmission).
        reuse: u8,
        lost_down: u8,
        lost_up: u8,
        /// Delays towards the remote host and back (reordering either way).
        down: u32,
        up: u32,
        /// Other packets the remote host sends before answering (bumping its IP ID).
        other: u8,
        /// An ID for the flows whose IDs are random.
        noise: u16,
        /// Below 8: the response comes twice.
        dup: u8,
        /// Below the flow's `late_rate`: a straggler, held up by a few probes' time on the way
        /// there (odd) or back (even).
        late: u8,
    }

    /// One simulated probe flow: the remote host numbers its responses with an IP ID counter
    /// (`ids` 0: big-endian, 1: little-endian, 2: zero, 3: constant, 4: random).
    #[derive(Debug, Clone)]
    struct FlowDraw {
        kind: u8,
        ids: u8,
        start: u16,
        loss_down: u8,
        loss_up: u8,
        other_rate: u8,
        late_rate: u8,
        max_down: u32,
        max_up: u32,
        /// For a TCP flow: a SYN-ACK seen before this probe, if any.
        reset: Option<usize>,
        probes: Vec<ProbeDraw>,
    }

    #[derive(Debug, Clone, Copy)]
    enum Event {
        Probe(FlowKey, u64),
        Response(FlowKey, u64, u16),
        Reset(FlowKey),
    }

    fn probe_draw() -> impl Strategy<Value = ProbeDraw> {
        (any::<u8>(), any::<u8>(), any::<u8>(), any::<u32>(), any::<u32>(), any::<u8>(), any::<u16>(), any::<u8>(), any::<u8>()).prop_map(
            |(reuse, lost_down, lost_up, down, up, other, noise, dup, late)| ProbeDraw { reuse, lost_down, lost_up, down, up, other, noise, dup, late },
        )
    }

    /// A rate in 256ths: none, low or anything.
    fn rate() -> impl Strategy<Value = u8> {
        prop_oneof![2 => Just(0u8), 2 => 0u8..8, 1 => any::<u8>()]
    }

    /// A largest delay, probes leaving every 10: none, reordering by a probe or two, or more
    /// (up to 300 probes, as far as IDs read in the wrong byte order compare differently).
    fn delay() -> impl Strategy<Value = u32> {
        prop_oneof![4 => Just(0u32), 4 => 0u32..20, 2 => 0u32..200, 1 => 0u32..3000]
    }

    fn flow_draw() -> impl Strategy<Value = FlowDraw> {
        (
            // IDs: mostly counters, some starting just before they wrap.
            (0u8..4, prop_oneof![3 => 0u8..2, 1 => 2u8..5], prop_oneof![any::<u16>(), 0xfff0u16..=0xffff]),
            (rate(), rate(), rate(), rate()),
            (delay(), delay(), proptest::option::weighted(0.2, 0usize..200)),
            proptest::collection::vec(probe_draw(), 0..200),
        )
            .prop_map(|((kind, ids, start), (loss_down, loss_up, other_rate, late_rate), (max_down, max_up, reset), probes)| FlowDraw {
                kind,
                ids,
                start,
                loss_down,
                loss_up,
                other_rate,
                late_rate,
                max_down,
                max_up,
                reset,
                probes,
            })
    }

    /// The events of simulated flows in capture order. Probe i of a flow leaves at 10 i; every
    /// response arrives before probe i + `window` leaves (the streaming diagnosis's bound).
    fn simulate(flows: &[FlowDraw], window: usize) -> Vec<Event> {
        let mut timed: Vec<(u64, usize, Event)> = Vec::new();
        let kinds = [ProbeKind::IcmpEcho, ProbeKind::IcmpTimestamp, ProbeKind::Tcp, ProbeKind::Udp];
        // Delays towards the remote host and back sum to under 10 (window − 1) + 8.
        let budget = 10 * window.min(1000) as u32 - 3;
        for (n, f) in flows.iter().enumerate() {
            let key: FlowKey = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 1, n as u8]), kinds[f.kind as usize], 7);
            let mut push = |t: u64, e: Event| {
                let order = timed.len();
                timed.push((t, order, e));
            };
            let max_down = f.max_down.min(budget);
            let max_up = f.max_up.min(budget - max_down);
            let spare = budget - max_down - max_up;
            let late = |p: &ProbeDraw, way: u8| {
                if p.late < f.late_rate && p.late % 2 == way { (10 * (1 + p.late as u32 % 6) + 5).min(spare) } else { 0 }
            };
            let mut keys = Vec::new();
            // (arrival at the remote host, probe) of the probes that get there.
            let mut received = Vec::new();
            for (i, p) in f.probes.iter().enumerate() {
                let k = if p.reuse < 8 && i > 0 { keys[i - 1 - (p.reuse as usize % i.min(4))] } else { 1000 + i as u64 };
                keys.push(k);
                if f.kind == 2 && f.reset == Some(i) {
                    push(10 * i as u64, Event::Reset(key));
                }
                push(10 * i as u64, Event::Probe(key, k));
                if p.lost_down >= f.loss_down {
                    received.push((10 * i as u64 + 1 + (p.down % (max_down + 1) + late(p, 1)) as u64, i));
                }
            }
            received.sort();
            let mut counter = f.start;
            for (t, i) in received {
                let p = &f.probes[i];
                let id = match f.ids {
                    0 => counter,
                    1 => counter.swap_bytes(),
                    2 => 0,
                    3 => f.start,
                    _ => p.noise,
                };
                // Now and then the host sends two packets with one ID.
                if p.noise % 32 != 0 {
                    counter = counter.wrapping_add(1);
                }
                if p.other < f.other_rate {
                    counter = counter.wrapping_add(1 + p.other as u16 % 4);
                }
                if p.lost_up >= f.loss_up {
                    let at = t + 1 + (p.up % (max_up + 1) + late(p, 0)) as u64;
                    push(at, Event::Response(key, keys[i], id));
                    if p.dup < 8 {
                        push(at + 3, Event::Response(key, keys[i], id));
                    }
                }
            }
            // A response to no probe.
            push(5, Event::Response(key, 1 << 40, 1));
        }
        timed.sort_by_key(|&(t, order, _)| (t, order));
        timed.into_iter().map(|(_, _, e)| e).collect()
    }

    fn streaming_and_batch(events: &[Event], window: usize) -> (Vec<FlowDiagnosis>, Vec<FlowDiagnosis>) {
        let mut s = Diagnoser::with_window(window);
        let mut b = batch::Diagnoser::default();
        for &e in events {
            match e {
                Event::Probe(key, id) => {
                    s.probe(key, Some(id));
                    b.probe(key, Some(id));
                }
                Event::Response(key, id, ip_id) => {
                    s.response(key, Some(id), ip_id);
                    b.response(key, Some(id), ip_id);
                }
                Event::Reset(key) => {
                    s.real_connection(key);
                    b.real_connection(key);
                }
            }
            assert!(s.flows.values().all(|f| f.probes.len() <= window && f.pending.len() <= 2 * window + 64));
        }
        (s.finish(), b.finish())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// The streaming diagnosis equals the batch one (every probe kept, diagnosed at the
        /// end) on captures whose responses come back within the window: losses both ways,
        /// reordering both ways, retransmitted probe keys, duplicate and stray responses,
        /// big- and little-endian, zero, constant and random IDs, other traffic, real TCP
        /// connections; with the real window and with small ones that make it give up probes.
        #[test]
        fn streaming_diagnosis_equals_batch(
            flows in proptest::collection::vec(flow_draw(), 1..4),
            window in prop_oneof![Just(WINDOW), 1usize..24],
        ) {
            let (streaming, batch) = streaming_and_batch(&simulate(&flows, window), window);
            prop_assert_eq!(streaming, batch);
        }
    }

    /// Hand-made cases the property covers too, kept readable: in-order counter, upstream and
    /// downstream loss, a response overtaken by four later ones.
    #[test]
    fn streaming_diagnosis_equals_batch_by_hand() {
        let key: FlowKey = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 9]), ProbeKind::IcmpEcho, 0);
        let mut events = Vec::new();
        for i in 0..40u64 {
            events.push(Event::Probe(key, i));
        }
        // Probe 5 lost downstream (no ID used), 9's response lost upstream (ID 109 used), 20's
        // response arrives after those of 21..=24.
        for i in (0..40u64).filter(|&i| i != 5 && i != 9 && i != 20) {
            events.push(Event::Response(key, i, 100 + i as u16 - (i > 5) as u16));
            if i == 24 {
                events.push(Event::Response(key, 20, 119));
            }
        }
        let (s, b) = streaming_and_batch(&events, WINDOW);
        assert_eq!(s, b);
        let d = &s[0];
        assert_eq!((d.lost_downstream, d.lost_upstream, d.reordered_upstream_harmful), (1, 1, 1));
        assert_eq!(d.verdict, Verdict::Inaccurate);

        // A little-endian counter, and responses to probes 150..=152 arriving before those
        // to 10..=149: the IDs of 10..=24 and 150.. are 128 or more apart, where reading them
        // in the wrong byte order flips their comparison.
        let id = |i: u64| (1000 + i as u16).swap_bytes();
        let mut events: Vec<Event> = (0..200u64).map(|i| Event::Probe(key, i)).collect();
        let order = (0..10).chain(150..153).chain(10..150).chain(153..200);
        events.extend(order.map(|i| Event::Response(key, i, id(i))));
        let (s, b) = streaming_and_batch(&events, WINDOW);
        assert_eq!(s, b);
        let d = &s[0];
        assert!(d.ipid_little_endian && d.ipid_usable);
        assert_eq!((d.reordered_downstream, d.reordered_upstream_harmful, d.reordered_upstream_minor), (0, 140, 0));

        // One pair of answers, 0xffff then 0: a counter read either way; big-endian wins.
        let events = [Event::Probe(key, 0), Event::Probe(key, 1), Event::Response(key, 0, 0xffff), Event::Response(key, 1, 0)];
        let (s, b) = streaming_and_batch(&events, WINDOW);
        assert_eq!(s, b);
        assert!(s[0].ipid_usable && !s[0].ipid_little_endian);
    }

    /// A response later than the window (here 4 probes) is taken as lost: the one case where
    /// the streaming diagnosis differs from keeping every probe, documented in the module doc.
    #[test]
    fn a_response_later_than_the_window_is_a_loss() {
        let key: FlowKey = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 9]), ProbeKind::IcmpEcho, 0);
        let mut d = Diagnoser::with_window(4);
        // Sending probe 4 gives up probe 0.
        for i in 0..5u64 {
            d.probe(key, Some(i));
        }
        for i in 1..5u64 {
            d.response(key, Some(i), 10 + i as u16);
        }
        d.response(key, Some(0), 10);
        let f = &d.finish()[0];
        assert_eq!((f.probes, f.responses, f.lost_unclassified), (5, 4, 1));
    }

    /// A flow's state stays bounded however long it runs: over 1,000,000 probes with 1 % loss
    /// each way and responses reordered within a few probes, the window never exceeds its bound,
    /// nor the pending keys theirs. A slot is 4 bytes: a window of 2^16 is 256 kB.
    #[test]
    fn a_flows_state_is_bounded_over_a_million_probes() {
        const N: u64 = 1_000_000;
        assert_eq!(std::mem::size_of::<Slot>(), 4);
        for window in [WINDOW, 64] {
            let key: FlowKey = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 9]), ProbeKind::IcmpEcho, 0);
            let mut d = Diagnoser::with_window(window);
            let mut rng = 0x9e37_79b9_7f4a_7c15u64;
            let mut next = move || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            // Responses in flight: (arrival, key, IP ID); 8 probes in flight, ±3 reordering.
            let mut flight: Vec<(u64, u64, u16)> = Vec::new();
            let (mut id, mut max_len, mut max_pending) = (0u16, 0, 0);
            for i in 0..N {
                d.probe(key, Some(i));
                if next() % 100 != 0 {
                    id = id.wrapping_add(1);
                    if next() % 100 != 0 {
                        flight.push((8 * i + 64 + next() % 24, i, id));
                    }
                }
                flight.sort_unstable_by(|a, b| b.cmp(a));
                while flight.last().is_some_and(|&(t, _, _)| t <= 8 * i) {
                    let (_, k, ip_id) = flight.pop().unwrap();
                    d.response(key, Some(k), ip_id);
                }
                let f = &d.flows[&key];
                max_len = max_len.max(f.probes.len());
                max_pending = max_pending.max(f.pending.len());
            }
            assert!(max_len <= window && max_pending <= 2 * window + 64, "{window}: {max_len} {max_pending}");
            let f = &d.finish()[0];
            assert_eq!(f.probes, N);
            assert!(f.responses > N * 97 / 100 && f.lost_downstream > 0 && f.lost_upstream > 0, "{f:?}");
        }
    }
}
