//! Connection tracking: which connection each TCP segment belongs to, and when a
//! connection is finished.
//!
//! Owns the flow table (4-tuple to live connection), role assignment (client, server), port
//! reuse (a new SYN on a closed 4-tuple starts a new connection) and eviction: a connection
//! that has closed and stayed quiet for [`AnalyzeOptions::linger_ns`] of capture time is
//! turned into its [`ConnRecord`] and forgotten, so memory follows the number of concurrent
//! connections, not the length of the capture. It also counts what could not be decoded.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::IpAddr;

use crate::conn::{Conn, Termination, DOWN, UP};
use crate::decode::{flags, Packet, Skip, TcpHeader, Transport};
use crate::record::ConnRecord;

/// What `analyze` should assume and keep.
#[derive(Debug, Clone)]
pub struct AnalyzeOptions {
    /// The server's address and optionally port: sets the roles and ignores connections
    /// not involving it. Without it the SYN's receiver is the server.
    pub server: Option<(IpAddr, Option<u16>)>,
    /// Capture time a closed connection stays in the table to absorb late retransmissions.
    pub linger_ns: u64,
}

impl Default for AnalyzeOptions {
    fn default() -> Self {
        AnalyzeOptions { server: None, linger_ns: 60_000_000_000 }
    }
}

/// Counts over the whole capture; per-packet problems are warnings here, never errors.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaptureStats {
    pub frames: u64,
    pub tcp_packets: u64,
    /// IP packets of other protocols, and TCP not involving `--server`.
    pub other_packets: u64,
    /// Frames that are not IP (ARP and the like).
    pub non_ip: u64,
    /// Warnings: frames whose link, IP or TCP header is cut short or invalid.
    pub bad_headers: u64,
    /// Non-first IP fragments (no TCP header to read).
    pub fragments: u64,
    /// TCP segments whose payload the snap length cut (headers still used).
    pub snapped: u64,
    /// Warning: the file ended inside a record.
    pub truncated_tail: bool,
    pub connections: u64,
    pub first_ns: u64,
    pub last_ns: u64,
}

/// FxHash (rustc's hasher): the flow table is hit once per packet and its keys are not
/// attacker-chosen in an offline analysis, so SipHash's DoS resistance buys nothing here.
#[derive(Default, Clone, Copy)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut buf = [0u8; 8];
            buf[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(buf));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64)
    }
    fn write_u16(&mut self, n: u16) {
        self.write_u64(n as u64)
    }
    fn write_u8(&mut self, n: u8) {
        self.write_u64(n as u64)
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64)
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type Endpoint = (IpAddr, u16);
/// Endpoints in canonical (sorted) order, so both directions find the same entry.
type Key = (Endpoint, Endpoint);

/// Sweep closed connections every this many TCP packets.
const SWEEP_EVERY: u64 = 1 << 16;

/// Creates a connection for a packet that matched none, deciding who is the client.
fn new_conn(index: u64, opts: &AnalyzeOptions, src: Endpoint, dst: Endpoint, tcp: &TcpHeader, now: u64) -> Conn {
    let syn = tcp.has(flags::SYN);
    let ack = tcp.has(flags::ACK);
    let (client, server, known) = if syn && !ack {
        (src, dst, true)
    } else if syn && ack {
        (dst, src, true)
    } else if let Some(s) = opts.server {
        if src.0 == s.0 && s.1.map_or(true, |p| p == src.1) {
            (dst, src, true)
        } else {
            (src, dst, true)
        }
    } else if src.1 < dst.1 {
        // Mid-stream: the lower port is usually the service's.
        (dst, src, false)
    } else {
        (src, dst, false)
    };
    Conn::new(index, client, server, known, now)
}

/// Streams packets into connections; call [`Tracker::finish`] at the end of the capture.
pub struct Tracker {
    opts: AnalyzeOptions,
    /// Boxed so that the table's buckets stay small: probing then touches one cache line
    /// per candidate instead of a whole connection.
    table: HashMap<Key, Box<Conn>, BuildHasherDefault<FxHasher>>,
    done: Vec<ConnRecord>,
    next_index: u64,
    pub stats: CaptureStats,
}

impl Tracker {
    pub fn new(opts: AnalyzeOptions) -> Self {
        Tracker { opts, table: HashMap::default(), done: Vec::new(), next_index: 0, stats: CaptureStats::default() }
    }

    /// Connections currently in the table.
    pub fn live(&self) -> usize {
        self.table.len()
    }

    /// Records a frame that could not be decoded.
    pub fn on_skip(&mut self, ts_ns: u64, skip: Skip) {
        self.on_time(ts_ns);
        match skip {
            Skip::NotIp => self.stats.non_ip += 1,
            Skip::BadHeader => self.stats.bad_headers += 1,
            Skip::Fragment => self.stats.fragments += 1,
        }
    }

    fn on_time(&mut self, ts_ns: u64) {
        self.stats.frames += 1;
        if self.stats.first_ns == 0 || ts_ns < self.stats.first_ns {
            self.stats.first_ns = ts_ns;
        }
        self.stats.last_ns = self.stats.last_ns.max(ts_ns);
    }

    /// Feeds one decoded packet captured at `ts_ns`.
    pub fn on_packet(&mut self, ts_ns: u64, pkt: &Packet<'_>) {
        self.on_time(ts_ns);
        let Transport::Tcp(tcp, payload) = pkt.transport else {
            self.stats.other_packets += 1;
            return;
        };
        let src = (pkt.src, tcp.src_port);
        let dst = (pkt.dst, tcp.dst_port);
        if let Some(server) = self.opts.server {
            let is = |e: Endpoint| e.0 == server.0 && server.1.map_or(true, |p| p == e.1);
            if !is(src) && !is(dst) {
                self.stats.other_packets += 1;
                return;
            }
        }
        self.stats.tcp_packets += 1;
        if (payload.len() as u32) < tcp.payload_len {
            self.stats.snapped += 1;
        }
        let key = if src <= dst { (src, dst) } else { (dst, src) };
        let is_syn = tcp.has(flags::SYN) && !tcp.has(flags::ACK);
        if is_syn {
            if let Some(old) = self.table.get(&key) {
                if old.is_reused_by(tcp.seq) {
                    let old = self.table.remove(&key).expect("entry just seen");
                    self.done.push(ConnRecord::from_conn(&old));
                }
            }
        }
        // One hash lookup per packet: this is the hot path of the whole analysis.
        let conn = match self.table.entry(key) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let index = self.next_index;
                self.next_index += 1;
                self.stats.connections += 1;
                e.insert(Box::new(new_conn(index, &self.opts, src, dst, &tcp, ts_ns)))
            }
        };
        let dir = if src == conn.client { UP } else { DOWN };
        conn.on_segment(dir, ts_ns, &tcp, payload, pkt.ip_len);

        if self.stats.tcp_packets % SWEEP_EVERY == 0 {
            self.sweep(ts_ns);
        }
    }

    /// Finalizes closed connections quiet for longer than the linger time.
    fn sweep(&mut self, now: u64) {
        let linger = self.opts.linger_ns;
        let done = &mut self.done;
        self.table.retain(|_, c| {
            let closed = c.termination() != Termination::Incomplete;
            if closed && c.last_ns.saturating_add(linger) < now {
                done.push(ConnRecord::from_conn(c));
                false
            } else {
                true
            }
        });
    }

    /// Ends the capture: every remaining connection becomes a row, ordered by first packet.
    pub fn finish(mut self) -> (Vec<ConnRecord>, CaptureStats) {
        for (_, c) in self.table.drain() {
            self.done.push(ConnRecord::from_conn(&c));
        }
        self.done.sort_by_key(|r| r.conn_id);
        (self.done, self.stats)
    }
}
