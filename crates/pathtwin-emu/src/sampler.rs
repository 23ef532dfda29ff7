//! Per-flow time series from the hosts' kernels: every sample interval, the `tcp_info` of
//! every TCP socket in every host's namespace, read with one `NETLINK_SOCK_DIAG` dump per
//! address family and host (what `ss -ti` does), and turned at the end into the
//! `flow_series` table with the simulator's columns. Owns the sampling thread and its
//! netlink sockets; the wire format is in [`crate::tcpinfo`].
//!
//! # Where it runs, and why
//! On its own thread at the default scheduling policy, not in the packet loop. The loop is
//! single-threaded and runs as `SCHED_FIFO` (or at nice −20, see [`crate::priority`]); a
//! sweep (two dumps per host: system calls and a copy of every socket's state) took
//! 0.97 ms on average and 4.7 ms at most for two hosts during a 10 Mbit/s iperf3 transfer
//! on the 2-core development VM (wall time, preemptions included; `tcp_sampling` in
//! `run.json` reports it for every run), which inside the loop would be added to the
//! release lateness of every packet due meanwhile, once per interval. As a thread of its
//! own it left the loop's release lateness where it was: three alternating pairs of 5-s
//! iperf3 runs over 40 ms / 10 Mbit/s, sampling on vs off ([`crate::EmulatorOptions::tcp_info`]),
//! p50 26–30 vs 21–28 µs, p99 90–121 vs 78–143 µs, max 1.5–3.6 vs 6.8–11.3 ms (the
//! spread is the shared machine's), throughput 9.43–9.44 vs 9.42–9.45 Mbit/s.
//! A dump walks every bucket of its namespace's TCP hash table, so each host gets a table of
//! its own ([`crate::netns::TCP_HASH_BUCKETS`]): with the machine's shared one, a sweep of
//! the 13 hosts of `examples/groundtruth/swarm.toml` took 27.9 ms (a quarter of a core at
//! the default 100-ms interval), with their own 1.9 ms.
//! A normal thread never preempts the real-time loop; it competes with the hosts' own processes instead, so a sample may come late on a busy
//! machine — which is harmless, since each sample carries the time it was actually taken
//! (read from the engine's [`RealClock`], the same model time the queue series use).
//!
//! # Sockets
//! A socket belongs to the network namespace it was created in, so one `NETLINK_SOCK_DIAG`
//! socket per host is opened by a thread that entered the host's namespace
//! ([`crate::netns::Namespace::enter`]) and then kept for the whole run: no process is
//! spawned and no namespace entered per sample. A second one per host joins the kernel's
//! TCP destroy groups, so that the final `tcp_info` of a socket freed between two samples
//! is recorded when it is freed (the thread waits on those sockets between samples): a
//! flow's last bytes are not lost, and a flow shorter than one interval still appears.
//!
//! # Flows and the sender's view
//! Both ends of a connection are sockets in some host; each socket's `tcp_info` describes
//! the direction in which it *sends* (cwnd, RTT, bytes acked are the sender's state; a pure
//! receiver's cwnd is its untouched initial window). So a socket becomes the flow
//! `local host -> remote host` from the first sample in which it has sent data (bytes acked
//! beyond the SYN, or data in flight while established), and a connection carrying data
//! both ways gives two flows, one per direction, each from its sender's socket. Sockets
//! whose peer is not a host of this run (loopback) are not sampled. A socket of the
//! `[[flow]]` workload ([`crate::workload`]) is named as the simulator names it: its client's
//! rows carry the connection's number and label (`flow`, `label`, as in the `flows` table),
//! and its server's, when the server sends (request/response), the label followed by
//! ` (server)`. Other sockets are labelled `a->b` when only one such flow went from `a` to
//! `b`, else `a:port->b:port` each, and numbered after the workload's, in order of first
//! appearance.
//!
//! # Memory
//! Samples go to a [`Spill`] file as they are taken, not to memory: a long run with many
//! connections takes about 160 samples a second (a 1-Gbit/s soak with 4 long and 8
//! short-fetch flows), which kept in memory grew the process by 2.7 MB a minute. The rows
//! are built from the file when the results are asked for. The congestion control
//! remembered per socket (destroy notifications carry none) is forgotten when the socket's
//! destroy notification is read: that was the socket's last sample.

use std::collections::BTreeMap;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use pathtwin_core::results::KERNEL_FLOW_SERIES;
use pathtwin_core::table::{Cell, Table};
use pathtwin_core::time::{Duration, Instant};
use serde::{Deserialize, Serialize};

use crate::clock::{mono_ns, RealClock};
use crate::lab::Lab;
use crate::long_tables::{Groups, LongTable, Rows};
use crate::netns::NetnsError;
use crate::spill::Spill;
use crate::tcpinfo::{
    dump_request, parse_dump, sampled_states, DiagSocket, TcpInfo, INFINITE_SSTHRESH, SKNLGRP_INET6_TCP_DESTROY, SKNLGRP_INET_TCP_DESTROY,
};

/// TCP state `ESTABLISHED` (`include/net/tcp_states.h`).
const TCP_ESTABLISHED: u8 = 1;
/// A namespace's default congestion control (what a socket uses unless it sets its own).
const CC_DEFAULT: &str = "/proc/sys/net/ipv4/tcp_congestion_control";
/// Most a dump may wait for the kernel's answer before the sample is given up.
const RECV_TIMEOUT_US: i64 = 500_000;
/// Receive buffer for one `recv` of a dump (the kernel fills it with as many whole messages
/// as fit; `ss` uses 32 KiB as well).
const RECV_BUF: usize = 32 * 1024;

/// Which socket a sample is of: the sending host and its peer, by index into the run's
/// hosts, and the ports (addresses are the hosts', IPv4 or IPv6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SocketKey {
    pub host: usize,
    pub peer: usize,
    pub local: IpAddr,
    pub local_port: u16,
    pub remote: IpAddr,
    pub remote_port: u16,
}

/// One socket's state at one time.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RawSample {
    #[serde(with = "instant_ns")]
    pub t: Instant,
    pub key: SocketKey,
    pub info: TcpInfo,
    pub cc: Option<String>,
}

/// One row of the `flow_series` table. Columns shared with the simulator have its names and
/// units; the rest are the kernel's own.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct FlowSeriesRow {
    pub time_s: f64,
    pub flow: u32,
    pub label: String,
    pub src: String,
    pub dst: String,
    pub src_port: u16,
    pub dst_port: u16,
    /// Congestion window in bytes: `tcpi_snd_cwnd` (segments) × `tcpi_snd_mss`.
    pub cwnd_bytes: i64,
    /// Slow-start threshold in bytes (segments × MSS); `i64::MAX` before the first loss, as
    /// the kernel's "infinite" 0x7fffffff segments and as the simulator's unbounded value.
    pub ssthresh_bytes: i64,
    /// Smoothed RTT (`tcpi_rtt`), ms.
    pub srtt_ms: f64,
    /// Bytes the receiver acknowledged since the previous row, per second of the time
    /// between the rows, in bit/s (the first row counts from zero at the previous sample).
    pub goodput_bps: f64,
    /// Data bytes acknowledged (`tcpi_bytes_acked` less the SYN's and FIN's sequence
    /// numbers, see `delivered_bytes`).
    pub delivered_bytes: i64,
    /// Segments retransmitted so far (`tcpi_total_retrans`).
    pub retransmits: i64,
    pub cc: Option<String>,
    /// `tcpi_state` and `tcpi_ca_state` as numbers (`tcp_states.h`; 0 Open, 1 Disorder,
    /// 2 CWR, 3 Recovery, 4 Loss).
    pub state: u8,
    pub ca_state: Option<u8>,
    /// Unrecovered RTO timeouts in a row (`tcpi_retransmits`).
    pub rto_retransmits: Option<u8>,
    pub rttvar_ms: Option<f64>,
    pub min_rtt_ms: Option<f64>,
    pub rto_ms: Option<f64>,
    pub mss: Option<u32>,
    pub cwnd_segments: Option<u32>,
    pub unacked_segments: Option<u32>,
    pub lost_segments: Option<u32>,
    /// The kernel's delivery-rate estimate and pacing rate, in bit/s.
    pub delivery_rate_bps: Option<f64>,
    pub pacing_rate_bps: Option<f64>,
    pub bytes_sent: Option<u64>,
    pub bytes_retrans: Option<u64>,
    pub bytes_received: Option<u64>,
}

/// Appends `r` to a `flow_series` table ([`pathtwin_core::results::KERNEL_FLOW_SERIES`]).
pub fn push_flow_series_row(t: &mut Table, r: &FlowSeriesRow) {
    let opt = |v: Option<i64>| v.map_or(Cell::Null, Cell::I);
    let optf = |v: Option<f64>| v.map_or(Cell::Null, Cell::F);
    t.push(vec![
        Cell::F(r.time_s),
        Cell::I(r.flow.into()),
        Cell::T(&r.label),
        Cell::I(r.cwnd_bytes),
        Cell::I(r.ssthresh_bytes),
        Cell::F(r.srtt_ms),
        Cell::F(r.goodput_bps),
        Cell::I(r.delivered_bytes),
        Cell::I(r.retransmits),
        Cell::T(&r.src),
        Cell::T(&r.dst),
        Cell::I(r.src_port.into()),
        Cell::I(r.dst_port.into()),
        r.cc.as_deref().map_or(Cell::Null, Cell::T),
        Cell::I(r.state.into()),
        opt(r.ca_state.map(i64::from)),
        opt(r.rto_retransmits.map(i64::from)),
        optf(r.rttvar_ms),
        optf(r.min_rtt_ms),
        optf(r.rto_ms),
        opt(r.mss.map(i64::from)),
        opt(r.cwnd_segments.map(i64::from)),
        opt(r.unacked_segments.map(i64::from)),
        opt(r.lost_segments.map(i64::from)),
        optf(r.delivery_rate_bps),
        optf(r.pacing_rate_bps),
        // Byte counters stay far below 2^63.
        opt(r.bytes_sent.map(|b| b as i64)),
        opt(r.bytes_retrans.map(|b| b as i64)),
        opt(r.bytes_received.map(|b| b as i64)),
    ]);
}

/// [`Instant`] as its nanoseconds, for spilling.
mod instant_ns {
    use pathtwin_core::time::Instant;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(t: &Instant, s: S) -> Result<S::Ok, S::Error> {
        t.as_nanos().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Instant, D::Error> {
        u64::deserialize(d).map(Instant::from_nanos)
    }
}

/// Flow numbers and labels of sockets whose owner named them (the workload's connections).
pub type KnownFlows = BTreeMap<SocketKey, (u32, String)>;

/// Whether a socket's sample shows it sending (see the module doc).
fn is_sending(s: &RawSample) -> bool {
    s.info.bytes_acked.is_some_and(|b| b > 1) || (s.info.state == Some(TCP_ESTABLISHED) && s.info.unacked.is_some_and(|u| u > 0))
}

/// Data bytes the peer acknowledged. `tcpi_bytes_acked` counts sequence numbers, so it
/// includes the SYN's one and, once acknowledged, the FIN's; where the kernel reports the
/// bytes it sent (Linux ≥ 4.19), the unique data bytes sent bound it, which removes the FIN.
fn delivered_bytes(info: &TcpInfo) -> u64 {
    let acked = info.bytes_acked.unwrap_or(0).saturating_sub(1);
    match (info.bytes_sent, info.bytes_retrans) {
        (Some(sent), Some(retrans)) => acked.min(sent.saturating_sub(retrans)),
        _ => acked,
    }
}

/// Builds the `flow_series` rows from raw samples (in time order), naming hosts by `names`.
/// `known` names the sockets it holds (see the module doc).
pub fn flow_series(samples: &[RawSample], names: &[String], interval: Duration, known: &KnownFlows) -> Vec<FlowSeriesRow> {
    let mut pass = |each: &mut dyn FnMut(usize, &RawSample)| {
        samples.iter().enumerate().for_each(|(i, s)| each(i, s));
        Ok(())
    };
    let labels = FlowLabels::find(&mut pass, names, known).expect("samples in memory cannot fail to read");
    let mut rows = Vec::new();
    labels.rows(&mut pass, names, interval, &mut |r| rows.push(r)).expect("samples in memory cannot fail to read");
    rows
}

/// Hands every sample over (index, sample) in time order, once per call.
type SamplePass<'a> = dyn FnMut(&mut dyn FnMut(usize, &RawSample)) -> io::Result<()> + 'a;

/// Which sockets are flows, from which sample on, and their numbers and labels: what a
/// first pass over the samples finds (see the module doc), before a second makes the rows.
struct FlowLabels {
    /// A flow starts at its socket's first sending sample and keeps every later one.
    first_seen: BTreeMap<SocketKey, usize>,
    labels: BTreeMap<SocketKey, (u32, String)>,
}

impl FlowLabels {
    fn find(pass: &mut SamplePass<'_>, names: &[String], known: &KnownFlows) -> io::Result<FlowLabels> {
        let mut first_seen: BTreeMap<SocketKey, usize> = BTreeMap::new();
        pass(&mut |i, s| {
            if is_sending(s) {
                first_seen.entry(s.key).or_insert(i);
            }
        })?;
        let mut order: Vec<(usize, SocketKey)> = first_seen.iter().filter(|(k, _)| !known.contains_key(k)).map(|(k, i)| (*i, *k)).collect();
        order.sort();
        let mut per_pair: BTreeMap<(usize, usize), u32> = BTreeMap::new();
        for (_, k) in &order {
            *per_pair.entry((k.host, k.peer)).or_default() += 1;
        }
        let first_free = known.values().map(|(n, _)| n + 1).max().unwrap_or(0);
        let mut labels: BTreeMap<SocketKey, (u32, String)> = order
            .iter()
            .enumerate()
            .map(|(n, (_, k))| {
                let (a, b) = (&names[k.host], &names[k.peer]);
                let label = if per_pair[&(k.host, k.peer)] == 1 {
                    format!("{a}->{b}")
                } else {
                    format!("{a}:{}->{b}:{}", k.local_port, k.remote_port)
                };
                (*k, (first_free + n as u32, label))
            })
            .collect();
        labels.extend(known.iter().filter(|(k, _)| first_seen.contains_key(k)).map(|(k, v)| (*k, v.clone())));
        Ok(FlowLabels { first_seen, labels })
    }

    /// The second pass: hands `each` every row, in order.
    fn rows(&self, pass: &mut SamplePass<'_>, names: &[String], interval: Duration, each: &mut dyn FnMut(FlowSeriesRow)) -> io::Result<()> {
        let mut last: BTreeMap<SocketKey, (Instant, u64)> = BTreeMap::new();
        pass(&mut |i, s| {
            let Some((flow, label)) = self.labels.get(&s.key) else { return };
            if i < self.first_seen[&s.key] {
                return;
            }
            let info = &s.info;
            let mss = info.snd_mss.unwrap_or(0) as i64;
            let delivered = delivered_bytes(info);
            // The first row of a flow counts from zero one interval earlier, as the simulator's.
            let (t0, d0) = last.get(&s.key).copied().unwrap_or((Instant::from_nanos(s.t.as_nanos().saturating_sub(interval.as_nanos())), 0));
            let dt = s.t.saturating_since(t0).as_secs_f64();
            let goodput = if dt > 0.0 { delivered.saturating_sub(d0) as f64 * 8.0 / dt } else { f64::NAN };
            last.insert(s.key, (s.t, delivered));
            let ssthresh = match info.snd_ssthresh {
                Some(x) if x < INFINITE_SSTHRESH => x as i64 * mss,
                _ => i64::MAX,
            };
            let ms = |us: Option<u32>| us.map(|u| u as f64 / 1000.0);
            each(FlowSeriesRow {
                time_s: s.t.as_secs_f64(),
                flow: *flow,
                label: label.clone(),
                src: names[s.key.host].clone(),
                dst: names[s.key.peer].clone(),
                src_port: s.key.local_port,
                dst_port: s.key.remote_port,
                cwnd_bytes: info.snd_cwnd.unwrap_or(0) as i64 * mss,
                ssthresh_bytes: ssthresh,
                srtt_ms: ms(info.rtt_us).unwrap_or(f64::NAN),
                goodput_bps: goodput,
                delivered_bytes: delivered as i64,
                retransmits: info.total_retrans.unwrap_or(0) as i64,
                cc: s.cc.clone(),
                state: info.state.unwrap_or(0),
                ca_state: info.ca_state,
                rto_retransmits: info.retransmits,
                rttvar_ms: ms(info.rttvar_us),
                min_rtt_ms: ms(info.min_rtt_us),
                rto_ms: ms(info.rto_us),
                mss: info.snd_mss,
                cwnd_segments: info.snd_cwnd,
                unacked_segments: info.unacked,
                lost_segments: info.lost,
                delivery_rate_bps: info.delivery_rate.map(|r| r as f64 * 8.0),
                pacing_rate_bps: info.pacing_rate.filter(|&r| r != u64::MAX).map(|r| r as f64 * 8.0),
                bytes_sent: info.bytes_sent,
                bytes_retrans: info.bytes_retrans,
                bytes_received: info.bytes_received,
            });
        })
    }
}

/// `flow_series`' rows read from the sampler's spill file, a row group at a time
/// ([`crate::long_tables`]); the numbers and labels are found on the first reading.
pub struct FlowSeriesRows {
    shared: Arc<Mutex<Shared>>,
    names: Vec<String>,
    interval: Duration,
    known: KnownFlows,
    labels: Option<FlowLabels>,
}

impl Rows for FlowSeriesRows {
    fn rows(&mut self, groups: &mut Groups<'_>) -> Result<(), String> {
        let mut shared = self.shared.lock().expect("sampler lock");
        let samples = &mut shared.samples;
        let mut pass = |each: &mut dyn FnMut(usize, &RawSample)| samples.for_each(|i, s| each(i, &s));
        let read_back = |e: io::Error| format!("reading the spilled TCP_INFO samples back: {e}");
        if self.labels.is_none() {
            self.labels = Some(FlowLabels::find(&mut pass, &self.names, &self.known).map_err(read_back)?);
        }
        let labels = self.labels.as_ref().expect("found above");
        labels.rows(&mut pass, &self.names, self.interval, &mut |r| groups.row(|t| push_flow_series_row(t, &r))).map_err(read_back)
    }
}

/// The `NETLINK_SOCK_DIAG` sockets of one host's namespace: one for dumps, and one that
/// receives the kernel's destroy notifications (`None` if the kernel refused).
struct HostSockets {
    host: usize,
    dump: OwnedFd,
    destroyed: Option<OwnedFd>,
    /// The namespace's default congestion control, for a socket freed before any dump saw it.
    default_cc: Option<String>,
}

fn open_diag_socket(nonblocking: bool) -> io::Result<OwnedFd> {
    let flags = libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | if nonblocking { libc::SOCK_NONBLOCK } else { 0 };
    // SAFETY: plain socket(2); the result is checked and owned below.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, flags, libc::NETLINK_SOCK_DIAG) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn set_sockopt<T>(fd: &OwnedFd, level: i32, name: i32, value: &T) -> io::Result<()> {
    // SAFETY: setsockopt with a value we own and its size.
    let r = unsafe {
        libc::setsockopt(fd.as_raw_fd(), level, name, (value as *const T).cast(), std::mem::size_of::<T>() as libc::socklen_t)
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The dump socket, with a receive timeout so that a kernel that never answers cannot
/// hang the thread.
fn open_dump_socket() -> io::Result<OwnedFd> {
    let fd = open_diag_socket(false)?;
    let tv = libc::timeval { tv_sec: 0, tv_usec: RECV_TIMEOUT_US as libc::suseconds_t };
    set_sockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv)?;
    Ok(fd)
}

/// A socket in the TCP destroy groups (IPv4 and IPv6): the kernel sends it the final
/// `inet_diag_msg` and `tcp_info` of every full TCP socket it frees, so a flow's last bytes
/// are recorded even when it closes between two samples, and a flow shorter than an interval
/// is recorded at all (Linux ≥ 4.9; needs `CAP_NET_ADMIN`, which the emulator has).
fn open_destroy_socket() -> io::Result<OwnedFd> {
    let fd = open_diag_socket(true)?;
    // Bound, so that it has a port id: the kernel skips group members whose port id is 0,
    // the sender's own (`do_one_broadcast`).
    // SAFETY: sockaddr_nl is plain data; all-zero is a valid value (family set below).
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: bind(2) with an address we own and its size.
    let r = unsafe {
        libc::bind(fd.as_raw_fd(), (&addr as *const libc::sockaddr_nl).cast(), std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t)
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    for group in [SKNLGRP_INET_TCP_DESTROY, SKNLGRP_INET6_TCP_DESTROY] {
        set_sockopt(&fd, libc::SOL_NETLINK, libc::NETLINK_ADD_MEMBERSHIP, &group)?;
    }
    Ok(fd)
}

/// Dumps the TCP sockets of `family` through `fd` (the namespace's diag socket).
fn dump(fd: &OwnedFd, family: i32, seq: u32, buf: &mut [u8], out: &mut Vec<DiagSocket>) -> io::Result<()> {
    let req = dump_request(family as u8, sampled_states(), seq);
    // SAFETY: send(2) of a buffer we own; an unconnected netlink socket sends to the kernel.
    if unsafe { libc::send(fd.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    loop {
        // SAFETY: recv(2) into a buffer we own, of its length.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Ok(());
        }
        let part = parse_dump(&buf[..n as usize]);
        out.extend(part.sockets);
        if let Some(errno) = part.error {
            return Err(io::Error::from_raw_os_error(errno));
        }
        if part.done {
            return Ok(());
        }
    }
}

/// Reads every destroy notification waiting on `fd` (non-blocking).
fn drain(fd: &OwnedFd, buf: &mut [u8], out: &mut Vec<DiagSocket>) -> io::Result<()> {
    loop {
        // SAFETY: recv(2) into a buffer we own, of its length.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock => Ok(()),
                io::ErrorKind::Interrupted => continue,
                _ => Err(e),
            };
        }
        if n == 0 {
            return Ok(());
        }
        out.extend(parse_dump(&buf[..n as usize]).sockets);
    }
}

/// What sampling cost: sweeps (one dump of every host) and their duration, so that a run
/// records its own overhead.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct SamplingStats {
    pub sweeps: u64,
    pub mean_sweep_us: f64,
    pub max_sweep_us: f64,
    /// Final states taken from destroy notifications.
    pub destroyed_sockets: u64,
}

/// What the sampling thread shares with its owner.
#[derive(Default)]
struct Shared {
    samples: Spill<RawSample>,
    stats: SamplingStats,
    /// First error per host (a dump that failed), reported once in the run's warnings.
    errors: BTreeMap<usize, String>,
    /// The first error writing or reading the spilled samples.
    spill_error: Option<String>,
}

/// The sampling thread of a run. Dropping it stops the thread (after a last sample).
pub struct TcpSampler {
    shared: Arc<Mutex<Shared>>,
    /// An `eventfd` the thread polls beside the destroy sockets: written to stop it.
    wake: Arc<OwnedFd>,
    thread: Option<JoinHandle<()>>,
    interval: Duration,
    names: Vec<String>,
}

impl TcpSampler {
    /// Opens the diag sockets in every host of `lab` and starts sampling every `interval`
    /// of `clock`'s time (at its multiples, as the simulator does).
    pub fn start(lab: &Lab, clock: RealClock, interval: Duration) -> Result<TcpSampler, NetnsError> {
        let mut sockets = Vec::new();
        let mut errors = BTreeMap::new();
        for (host, ns) in lab.namespaces().iter().enumerate() {
            let (dump, destroyed, default_cc) = ns.enter(|| {
                // Read inside the namespace: /proc/sys/net shows the reading thread's namespace.
                let cc = std::fs::read_to_string(CC_DEFAULT).ok().map(|c| c.trim().to_string());
                Ok((open_dump_socket()?, open_destroy_socket(), cc))
            })?;
            let destroyed = destroyed.map_err(|e| errors.insert(host, format!("no destroy notifications ({e}); flows closing between samples lose their last interval"))).ok();
            sockets.push(HostSockets { host, dump, destroyed, default_cc });
        }
        // SAFETY: eventfd(2) with flags; checked and owned below.
        let wake = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if wake < 0 {
            return Err(NetnsError::Os { what: "eventfd for the TCP sampling thread".into(), source: io::Error::last_os_error() });
        }
        // SAFETY: a fresh descriptor owned by no one else.
        let wake = Arc::new(unsafe { OwnedFd::from_raw_fd(wake) });
        let addrs: Vec<(IpAddr, usize)> = lab
            .hosts()
            .iter()
            .enumerate()
            .flat_map(|(i, h)| [(IpAddr::V4(h.ipv4), i), (IpAddr::V6(h.ipv6), i)])
            .collect();
        let shared = Arc::new(Mutex::new(Shared { errors, ..Shared::default() }));
        let thread = {
            let (shared, wake) = (shared.clone(), wake.clone());
            std::thread::Builder::new()
                .name(format!("pathtwin-tcpinfo-{}", lab.run_id()))
                .spawn(move || Sampling { sockets, addrs, clock, cc_of: BTreeMap::new(), buf: vec![0u8; RECV_BUF], seq: 0 }.run(interval, &wake, &shared))
                .map_err(|e| NetnsError::Os { what: "starting the TCP sampling thread".into(), source: e })?
        };
        let names = lab.hosts().iter().map(|h| h.name.clone()).collect();
        Ok(TcpSampler { shared, wake, thread: Some(thread), interval, names })
    }

    /// Takes a last sample and ends the thread; samples stay readable. Idempotent.
    pub fn stop(&mut self) {
        if let Some(t) = self.thread.take() {
            let one = 1u64.to_ne_bytes();
            // SAFETY: write(2) of 8 bytes we own to our eventfd.
            unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), one.len()) };
            let _ = t.join();
        }
    }

    /// The `flow_series` table of everything sampled, read from the spill file when asked
    /// (call after [`TcpSampler::stop`]); `known` names the workload's sockets. It keeps the
    /// samples after the sampler is dropped.
    pub fn flow_series(&self, known: KnownFlows) -> LongTable {
        let rows = FlowSeriesRows { shared: self.shared.clone(), names: self.names.clone(), interval: self.interval, known, labels: None };
        LongTable::new("flow_series", KERNEL_FLOW_SERIES, Box::new(rows))
    }

    pub fn stats(&self) -> SamplingStats {
        self.shared.lock().expect("sampler lock").stats
    }

    /// One line per host whose sampling failed (the first error).
    pub fn warnings(&self) -> Vec<String> {
        let shared = self.shared.lock().expect("sampler lock");
        let hosts = shared.errors.iter().map(|(h, e)| format!("TCP_INFO sampling of host {}: {e}", self.names[*h]));
        hosts.chain(shared.spill_error.clone()).collect()
    }
}

impl Drop for TcpSampler {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The sampling thread's own state.
struct Sampling {
    sockets: Vec<HostSockets>,
    addrs: Vec<(IpAddr, usize)>,
    clock: RealClock,
    /// Each socket's congestion control as last dumped (destroy notifications carry none;
    /// a socket no dump saw gets its host's default).
    cc_of: BTreeMap<SocketKey, String>,
    buf: Vec<u8>,
    seq: u32,
}

impl Sampling {
    fn run(mut self, interval: Duration, wake: &OwnedFd, shared: &Mutex<Shared>) {
        // Whatever thread started the emulation, this one runs under the default policy (a
        // thread inherits its creator's): it must never compete with the loop.
        let _ = crate::priority::set_thread_fifo(false);
        let mut next = Instant::ZERO + interval;
        loop {
            // Until the next multiple of the interval: record destroyed sockets as they go.
            let stopping = loop {
                let due = self.clock.to_mono_ns(next);
                let now = mono_ns();
                if now >= due {
                    break false;
                }
                let mut fds: Vec<libc::pollfd> = std::iter::once(wake.as_raw_fd())
                    .chain(self.sockets.iter().filter_map(|s| s.destroyed.as_ref().map(|d| d.as_raw_fd())))
                    .map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 })
                    .collect();
                let wait = due - now;
                let ts = libc::timespec { tv_sec: (wait / 1_000_000_000) as libc::time_t, tv_nsec: (wait % 1_000_000_000) as libc::c_long };
                // SAFETY: ppoll on descriptors we own, with a timeout we own and no signal mask.
                let n = unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, &ts, std::ptr::null()) };
                if n > 0 && fds[0].revents != 0 {
                    break true;
                }
                if n > 0 {
                    self.take_destroyed(shared);
                }
            };
            self.take_destroyed(shared);
            self.take_dumps(shared);
            if stopping {
                return;
            }
            // A late sample skips the instants it missed instead of bunching up.
            let now = self.clock.now();
            while next <= now {
                next += interval;
            }
        }
    }

    /// Turns the sockets `found` in host `i` at `t` into samples; `destroyed`: they come
    /// from destroy notifications, the last any of them will give.
    fn record(&mut self, i: usize, t: Instant, found: Vec<DiagSocket>, destroyed: bool, out: &mut Vec<RawSample>) {
        let host = self.sockets[i].host;
        for d in found {
            let Some(peer) = self.addrs.iter().find(|(a, _)| *a == d.remote).map(|(_, h)| *h) else { continue };
            let Some(info) = d.info else { continue };
            let key = SocketKey { host, peer, local: d.local, local_port: d.local_port, remote: d.remote, remote_port: d.remote_port };
            let cc = match d.cc {
                Some(cc) => {
                    self.cc_of.insert(key, cc.clone());
                    Some(cc)
                }
                None if destroyed => self.cc_of.remove(&key).or_else(|| self.sockets[i].default_cc.clone()),
                None => self.cc_of.get(&key).or(self.sockets[i].default_cc.as_ref()).cloned(),
            };
            out.push(RawSample { t, key, info, cc });
        }
    }

    /// The final state of every socket freed since the last call, at the time it was read.
    fn take_destroyed(&mut self, shared: &Mutex<Shared>) {
        let mut taken = Vec::new();
        let mut errors = Vec::new();
        for i in 0..self.sockets.len() {
            let Some(fd) = &self.sockets[i].destroyed else { continue };
            let mut found = Vec::new();
            if let Err(e) = drain(fd, &mut self.buf, &mut found) {
                errors.push((self.sockets[i].host, format!("reading destroy notifications: {e}")));
            }
            let t = self.clock.now();
            self.record(i, t, found, true, &mut taken);
        }
        let n = taken.len() as u64;
        Self::publish(shared, taken, errors);
        if n > 0 {
            shared.lock().expect("sampler lock").stats.destroyed_sockets += n;
        }
    }

    /// One dump per host and address family.
    fn take_dumps(&mut self, shared: &Mutex<Shared>) {
        let start = mono_ns();
        let mut taken = Vec::new();
        let mut errors = Vec::new();
        for i in 0..self.sockets.len() {
            let t = self.clock.now();
            let mut found = Vec::new();
            for family in [libc::AF_INET, libc::AF_INET6] {
                self.seq = self.seq.wrapping_add(1);
                if let Err(e) = dump(&self.sockets[i].dump, family, self.seq, &mut self.buf, &mut found) {
                    errors.push((self.sockets[i].host, e.to_string()));
                }
            }
            self.record(i, t, found, false, &mut taken);
        }
        let took_us = mono_ns().saturating_sub(start) as f64 / 1e3;
        Self::publish(shared, taken, errors);
        let st = &mut shared.lock().expect("sampler lock").stats;
        st.mean_sweep_us = (st.mean_sweep_us * st.sweeps as f64 + took_us) / (st.sweeps + 1) as f64;
        st.max_sweep_us = st.max_sweep_us.max(took_us);
        st.sweeps += 1;
    }

    fn publish(shared: &Mutex<Shared>, taken: Vec<RawSample>, errors: Vec<(usize, String)>) {
        if taken.is_empty() && errors.is_empty() {
            return;
        }
        let mut g = shared.lock().expect("sampler lock");
        let Shared { samples, spill_error, .. } = &mut *g;
        // After a failed write the file ends in a partial record: nothing more is appended.
        for s in taken.iter().filter(|_| spill_error.is_none()) {
            if let Err(e) = samples.push(s) {
                spill_error.get_or_insert(format!("spilling TCP_INFO samples to a temporary file: {e}; flow_series lacks samples from {:.3} s on", s.t.as_secs_f64()));
                break;
            }
        }
        for (h, e) in errors {
            g.errors.entry(h).or_insert(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::long_tables::columns_as_text;
    use std::net::Ipv4Addr;

    fn key(host: usize, peer: usize, lp: u16, rp: u16) -> SocketKey {
        let ip = |h: usize| IpAddr::V4(Ipv4Addr::new(10, 64, 1, h as u8 + 1));
        SocketKey { host, peer, local: ip(host), local_port: lp, remote: ip(peer), remote_port: rp }
    }

    fn sample(ms: u64, key: SocketKey, acked: u64, cwnd: u32) -> RawSample {
        let info = TcpInfo {
            len: 248,
            state: Some(TCP_ESTABLISHED),
            snd_mss: Some(1448),
            snd_cwnd: Some(cwnd),
            snd_ssthresh: Some(INFINITE_SSTHRESH),
            rtt_us: Some(40_500),
            bytes_acked: Some(acked),
            unacked: Some(0),
            ..TcpInfo::default()
        };
        RawSample { t: Instant::ZERO + Duration::from_millis(ms), key, info, cc: Some("reno".into()) }
    }

    #[test]
    fn sender_sockets_become_labelled_flows_in_bytes_and_bits() {
        let names = vec!["a".to_string(), "b".to_string()];
        let send = key(0, 1, 40000, 5201);
        let recv = key(1, 0, 5201, 40000);
        let samples = vec![
            sample(100, send, 1, 10),  // handshake done, nothing sent yet: not a flow yet
            sample(100, recv, 1, 10),  // the receiver never sends: never a flow
            sample(200, send, 14_481, 20),
            sample(200, recv, 1, 10),
            sample(300, send, 139_481, 30),
        ];
        let rows = flow_series(&samples, &names, Duration::from_millis(100), &KnownFlows::new());
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| r.label == "a->b" && r.flow == 0 && r.src == "a" && r.dst == "b"));
        assert_eq!(rows[0].cwnd_bytes, 20 * 1448);
        assert_eq!(rows[0].ssthresh_bytes, i64::MAX);
        assert_eq!(rows[0].srtt_ms, 40.5);
        assert_eq!(rows[0].delivered_bytes, 14_480);
        // 14 480 B over the 100 ms before the first row, then 125 000 B in the next 100 ms.
        assert!((rows[0].goodput_bps - 14_480.0 * 8.0 / 0.1).abs() < 1e-6);
        assert!((rows[1].goodput_bps - 10e6).abs() < 1e-6);
        assert!((rows[1].time_s - 0.3).abs() < 1e-12);
    }

    #[test]
    fn an_acknowledged_fin_is_not_a_delivered_byte() {
        let names = vec!["a".to_string(), "b".to_string()];
        // 30 000 data bytes: SYN + data + FIN acknowledged = 30 002 sequence numbers.
        let mut s = sample(100, key(0, 1, 40000, 7100), 30_002, 10);
        s.info.state = Some(7);
        s.info.bytes_sent = Some(30_000 + 1448);
        s.info.bytes_retrans = Some(1448);
        assert_eq!(flow_series(&[s.clone()], &names, Duration::from_millis(100), &KnownFlows::new())[0].delivered_bytes, 30_000);
        // Without bytes_sent (Linux < 4.19) only the SYN can be taken off.
        s.info.bytes_sent = None;
        assert_eq!(flow_series(&[s], &names, Duration::from_millis(100), &KnownFlows::new())[0].delivered_bytes, 30_001);
    }

    /// Rows built from the spill file are the rows built from the samples in memory: every
    /// `tcp_info` field, IPv6 keys, and a destroyed socket's last sample survive the trip.
    #[test]
    fn rows_from_spilled_samples_are_the_rows_from_memory() {
        let names = vec!["a".to_string(), "b".to_string()];
        let v6 = |h: u16| IpAddr::V6(std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, h + 1));
        let k6 = SocketKey { host: 1, peer: 0, local: v6(1), local_port: 443, remote: v6(0), remote_port: 51_000 };
        let mut samples = Vec::new();
        for n in 0..500u64 {
            let mut s = sample(100 * (n + 1), if n % 2 == 0 { key(0, 1, 40000, 5201) } else { k6 }, 1 + n * 14_480, 10 + n as u32);
            let i = &mut s.info;
            (i.ca_state, i.retransmits, i.backoff, i.rto_us, i.lost, i.rttvar_us) = (Some(3), Some(1), Some(2), Some(204_000), Some(n as u32), Some(7_000));
            (i.total_retrans, i.pacing_rate, i.bytes_received, i.min_rtt_us) = (Some(n as u32 / 7), Some(u64::MAX - n), Some(n * 99), Some(20_123));
            (i.delivery_rate, i.delivered, i.bytes_sent, i.bytes_retrans) = (Some(125_000_000 + n), Some(n as u32 * 10), Some(n * 15_000), Some(n * 7));
            s.cc = [None, Some("cubic".to_string()), Some("bbr".to_string())][n as usize % 3].clone();
            samples.push(s);
        }
        let mut spill = Spill::new();
        for s in &samples {
            spill.push(s).unwrap();
        }
        assert!(spill.on_disk());
        let shared = Arc::new(Mutex::new(Shared { samples: spill, ..Shared::default() }));
        let rows = FlowSeriesRows { shared, names: names.clone(), interval: Duration::from_millis(100), known: KnownFlows::new(), labels: None };
        let mut spilled = LongTable::new("flow_series", KERNEL_FLOW_SERIES, Box::new(rows));
        let in_memory = flow_series(&samples, &names, Duration::from_millis(100), &KnownFlows::new());
        // The first sample has acknowledged only the SYN: not a flow yet.
        assert_eq!(in_memory.len(), 499);
        let whole = [crate::emulator::kernel_flow_series(&in_memory)];
        // In groups smaller than the table (twice: the Parquet writer reads it twice), and whole.
        for _ in 0..2 {
            let mut groups = Vec::new();
            let handed = spilled.for_each_group(64, &mut |t| {
                groups.push(t);
                Ok(())
            });
            assert_eq!((handed, groups.iter().map(Table::rows).max()), (Ok(8), Some(64)));
            assert_eq!(columns_as_text(&groups), columns_as_text(&whole));
        }
        assert_eq!(columns_as_text(&[spilled.to_table().unwrap()]), columns_as_text(&whole));
    }

    #[test]
    fn two_flows_between_the_same_hosts_are_told_apart_by_port() {
        let names = vec!["a".to_string(), "b".to_string()];
        let (c, d) = (key(0, 1, 40000, 5201), key(0, 1, 40002, 5201));
        let rows = flow_series(&[sample(100, d, 5000, 10), sample(100, c, 5000, 10)], &names, Duration::from_millis(100), &KnownFlows::new());
        assert_eq!(rows[0].label, "a:40002->b:5201");
        assert_eq!(rows[0].flow, 0);
        assert_eq!(rows[1].label, "a:40000->b:5201");
        assert_eq!(rows[1].flow, 1);
    }

    #[test]
    fn the_workloads_sockets_carry_its_numbers_and_labels_and_the_rest_come_after() {
        let names = vec!["a".to_string(), "b".to_string()];
        let (c, d, other) = (key(0, 1, 40000, 20000), key(1, 0, 20000, 40000), key(0, 1, 40002, 5201));
        let known: KnownFlows = [(c, (0, "web".to_string())), (d, (3, "web (server)".to_string()))].into();
        let samples = [sample(100, other, 5000, 10), sample(100, c, 5000, 10), sample(200, d, 9000, 10)];
        let rows = flow_series(&samples, &names, Duration::from_millis(100), &known);
        let got: Vec<(u32, &str)> = rows.iter().map(|r| (r.flow, r.label.as_str())).collect();
        assert_eq!(got, [(4, "a->b"), (0, "web"), (3, "web (server)")]);
    }
}
