//! The real-time loop: reads datagrams from the hosts' devices, pushes them through their
//! route's elements on model time, and writes each one to its destination when the last
//! element releases it.
//!
//! One thread, one epoll set: every host device plus a `timerfd` armed (absolutely) at the
//! earliest `next_wakeup()` of any element. Each wake-up runs, in order:
//! 1. reads — the model is first brought up to the real clock, then every readable device is
//!    drained (bounded per device, so one busy host cannot starve the others); a datagram's
//!    arrival time is the real clock at its read, and the model (step 2) runs after each
//!    read, so a datagram whose path lets it leave at once is written before the next read;
//! 2. the model — `pathtwin-core`'s [`Driver`] (the simulator's too) moves packets through
//!    the elements; the engine is its clock: due elements are woken in departure-time order
//!    (a heap of the wake-ups the driver asks for), each *at its own wake-up time*, not at
//!    the (later) real time: an element is never advanced past a moment at which an upstream
//!    element may still hand it a packet, so a shared queue sees its inputs in model-time
//!    order even when they come from different upstream elements. (A bandwidth queue ignores
//!    a push earlier than the time it was advanced to and would start serving it in the past,
//!    on link time its placeholders already used.) The driver pushes an output into the next
//!    hop *at its model departure time*, so lateness in the loop never becomes extra delay in
//!    the model;
//! 3. writes — a packet leaving its last hop at model time t is written at once (t ≤ now);
//!    `now − t`, taken as it is handed to the kernel, is its release lateness, recorded in a
//!    histogram.
//!
//! Between wake-ups the loop sleeps in `epoll_wait` (or, with [`TimingOptions::spin`],
//! polls); its own CPU time over each window tells the [`crate::priority::Governor`] how busy
//! it is.
//!
//! The engine knows nothing about namespaces or configs: it is given devices, a compiled
//! network and routes (see [`crate::emulator`] for building those from a topology).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use pathtwin_core::driver::{self, Driver, QueueSample, RouteId, Routed};
use pathtwin_core::element::Element;
use pathtwin_core::packet::{FlowKey, Mark, PacketMeta, TcpFlags};
use pathtwin_core::time::{Duration, Instant};
pub use pathtwin_core::topology::Hop;
use pathtwin_core::topology::Network;
use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::clock::{mono_ns, set_min_timer_slack, DeadlineTimer, RealClock};
use crate::device::PacketIo;
use crate::flow_records::FlowRecords;
use crate::gso::{self, VnetHdr, MAX_MERGED};
use crate::lateness::Histogram;
use crate::monarch::Translator;
use crate::real_target::{NotSent, RealTarget};
use crate::packet::{FiveTuple, IpPacket};
use crate::priority::{set_thread_fifo, set_thread_nice, thread_cpu_ns, Governor, Switch, LOOP_NICE};
use crate::spill::SpillThread;

/// Largest datagram read from a device: a 64-KB super-packet with offload (the kernel's
/// default `gso_max_size`); without, devices have a 1500-byte MTU, which a user may raise to
/// jumbo frames.
const READ_BUF: usize = 65_536;
/// Datagrams read from one device before turning to the others.
const READ_BATCH: usize = 64;
/// Delivered packets' buffers kept for reuse (beyond that, they are freed).
const SPARE_BUFFERS: usize = 1024;
/// Longest single sleep, so that `run_until` returns to its caller (signal checks, stop
/// requests, statistics) at least this often.
const MAX_SLEEP_NS: u64 = 20_000_000;

/// A packet inside the model: the datagram plus where it is on its route.
#[derive(Debug)]
pub struct EmuPacket {
    pub ip: IpPacket,
    route: u32,
    hop: u16,
}

impl Routed for EmuPacket {
    fn route(&self) -> RouteId {
        self.route
    }
    fn hop(&self) -> usize {
        usize::from(self.hop)
    }
    fn set_hop(&mut self, hop: usize) {
        self.hop = hop as u16;
    }
}

impl PacketMeta for EmuPacket {
    fn wire_len(&self) -> u32 {
        self.ip.wire_len()
    }
    fn payload_len(&self) -> u32 {
        self.ip.payload_len()
    }
    fn flow_key(&self) -> FlowKey {
        self.ip.flow_key()
    }
    fn tcp_flags(&self) -> Option<TcpFlags> {
        self.ip.tcp_flags()
    }
    fn tcp_seq(&self) -> Option<u64> {
        self.ip.tcp_seq()
    }
    fn mark(&self) -> Mark {
        self.ip.mark()
    }
    fn set_mark(&mut self, mark: Mark) {
        self.ip.set_mark(mark)
    }
    fn ecn_capable(&self) -> bool {
        self.ip.ecn_capable()
    }
    fn set_ce(&mut self) {
        self.ip.set_ce()
    }
    fn priority(&self) -> u8 {
        self.ip.priority_band()
    }
}

/// Everything from host `src` to host `dst` crosses `hops` in order — or, for a pipe's
/// route, only what goes from one address of `src` to one address of `dst`.
#[derive(Clone, Debug)]
pub struct Route {
    pub src: usize,
    pub dst: usize,
    pub hops: Vec<Hop>,
    /// `(source, destination)`: the one address pair this route carries (a pipe); `None`:
    /// every pair of the two hosts' addresses.
    pub only: Option<(IpAddr, IpAddr)>,
}

/// A host as the engine sees it: its device and its addresses.
pub struct HostPort<D> {
    pub name: String,
    pub device: D,
    pub addrs: Vec<IpAddr>,
}

/// Counters of one route.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct RouteCounters {
    pub packets_in: u64,
    pub bytes_in: u64,
    pub packets_out: u64,
    pub bytes_out: u64,
    /// Packets whose write to the destination failed (device full or down).
    pub write_drops: u64,
}

/// Counters of one host's device.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct HostCounters {
    /// Datagrams read, super-packets counted as the segments they were cut into.
    pub packets_read: u64,
    /// Super-packets read (offload), and merged datagrams written.
    pub super_packets_read: u64,
    pub super_packets_written: u64,
    pub malformed: u64,
    /// Datagrams to an address no route leads to (e.g. IPv6 multicast the host's kernel
    /// sends by itself); dropped.
    pub unrouted: u64,
}

/// How the loop waits for deadlines.
#[derive(Clone, Copy, Debug)]
pub struct TimingOptions {
    /// Poll instead of sleeping when the next deadline is closer than this, and wake this
    /// much before farther deadlines to poll through the rest (0: never spin).
    pub spin: Duration,
    /// Interval between queue samples (0: no time series).
    pub sample_every: Duration,
    /// Run the loop's thread at nice −20, as `SCHED_FIFO` while it has idle time (see
    /// [`crate::priority`]); false keeps the caller's priority.
    pub high_priority: bool,
    /// With `high_priority`, also run as `SCHED_FIFO` while mostly idle (see
    /// [`crate::priority`]).
    pub fifo_while_idle: bool,
}

impl Default for TimingOptions {
    fn default() -> Self {
        TimingOptions {
            spin: Duration::ZERO,
            sample_every: Duration::from_millis(10),
            high_priority: true,
            fifo_while_idle: true,
        }
    }
}

/// Monarch's proxy in the loop (see [`crate::monarch`]): what `sender` sends to `receiver`
/// is held and a probe goes to the target instead (`way`); an answer to `sender` releases the
/// held packet to `receiver`, at once (the proxy is local). What `receiver` sends to
/// `sender`, and other traffic (a real TCP flow from `sender` to an emulated target, say), is
/// routed as usual.
pub struct MonarchProxy {
    pub translator: Translator,
    pub sender: usize,
    pub receiver: usize,
    pub way: ProbeWay,
    /// Packets released to the receiver, and their bytes.
    pub released: u64,
    pub released_bytes: u64,
    /// Packets dropped because their probe would have exceeded a real target's rate cap, and
    /// probes the kernel refused to send (a real target only).
    pub capped: u64,
    pub send_failures: u64,
    /// Where the proxy records each probe as it leaves and each answer as it arrives (the
    /// vantage point of Monarch's self-diagnosis, `pathtwin trace diagnose`).
    pub capture: Option<std::io::BufWriter<std::fs::File>>,
}

/// Where Monarch's probes go.
pub enum ProbeWay {
    /// A host of the emulation: probes cross the model along `route` to host `host`, whose
    /// packets get the next sequential IP ID when `sequential_ids` is set (`None`: its
    /// kernel's own).
    Emulated { route: u32, host: usize, sequential_ids: Option<u16> },
    /// A host outside the emulation, through the machine's own stack. What the proxy takes
    /// in from the sender and releases to the receiver is counted on `route`, the
    /// element-less route between them.
    Real { target: RealTarget, route: u32 },
}

impl MonarchProxy {
    fn record(&mut self, at: Instant, pkt: &IpPacket) {
        record_probe(&mut self.capture, at, pkt);
    }
}

/// Writes a probe or an answer to Monarch's capture, if there is one.
fn record_probe(capture: &mut Option<std::io::BufWriter<std::fs::File>>, at: Instant, pkt: &IpPacket) {
    if let Some(w) = capture.as_mut() {
        if pathtwin_core::pcapfile::write_record(w, at.as_nanos(), pkt.bytes(), pkt.bytes().len() as u32).is_err() {
            // A full disk must not stop the emulation; the capture just ends here.
            *capture = None;
        }
    }
}

/// Errors that stop the loop (a device vanished, epoll failed): the emulation cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("{what}: {source}")]
    Os { what: &'static str, source: io::Error },
    /// Two routes for the same address pair, or a route naming a missing host or element.
    #[error("invalid route table: {0}")]
    Routes(String),
}

fn os(what: &'static str) -> impl FnOnce(io::Error) -> EngineError {
    move |source| EngineError::Os { what, source }
}

pub struct Engine<D> {
    clock: RealClock,
    hosts: Vec<HostPort<D>>,
    /// The network, moved by the one driver both engines run; its route `i` is `routes[i]`.
    driver: Driver<EmuPacket>,
    /// The driver's clock and destinations.
    io: Io,
    routes: Vec<Route>,
    /// FxHash: looked up once per packet with keys the hosts' own addresses, not chosen by
    /// an adversary, so SipHash's flooding resistance buys nothing here.
    by_addrs: FxHashMap<(IpAddr, IpAddr), u32>,
    epoll: OwnedFd,
    timer: DeadlineTimer,
    timing: TimingOptions,
    buf: Vec<u8>,
    /// Segments of the super-packet being read, and the packets of one read on their way
    /// into the model (kept for their allocations).
    segments: Vec<Vec<u8>>,
    admitted: Vec<IpPacket>,
    /// Headers of the merged datagram being written.
    merged_headers: Vec<u8>,
    /// Release lateness of every delivered packet.
    pub lateness: Histogram,
    /// How late the loop woke for a timer deadline (the timer's own contribution).
    pub wake_lateness: Histogram,
    pub route_counters: Vec<RouteCounters>,
    pub host_counters: Vec<HostCounters>,
    /// The `packet_flows` records (finished ones spilled to a file as they finish).
    pub flows: FlowRecords,
    /// The queue series, spilled to a file off the loop's thread (read with
    /// [`Engine::take_queue_samples`]): a long run's series would otherwise grow the process.
    samples: SpillThread<QueueSample>,
    next_sample: Instant,
    /// Whether the thread running the loop got its timer slack and scheduling policy (set on
    /// the first `run_until`, in the thread that runs the loop: both are per thread).
    thread_prepared: bool,
    /// Switches the loop's thread between `SCHED_FIFO` and the default policy; `None` when
    /// not asked for or not permitted.
    pub governor: Option<Governor>,
    /// Deadline the timer was last armed for, to measure wake lateness.
    armed_for: Option<Instant>,
}

/// The emulator's side of the [`Driver`]: the wake-ups it asked for (the loop's timer), and
/// where packets leaving the network go (the hosts' outboxes, through Monarch's proxy).
struct Io {
    /// Every element's wake-up, earliest first: the loop's timer and its order of polls. An
    /// element has one live entry, the one at the time the driver has it armed for
    /// ([`Driver::armed_at`]); other entries are stale and skipped when they surface. The
    /// driver asks only for wake-ups earlier than the one armed, so neither a read nor a
    /// wake-up scans all elements, and a read batch into one element queues it once.
    timers: BinaryHeap<Reverse<(Instant, usize)>>,
    /// Per route, its destination host.
    route_dst: Vec<usize>,
    /// Per host, what was released to it during this pass of the model, written at the end
    /// of the pass so that consecutive segments of a flow can go out as one super-packet;
    /// `outbox_hosts` lists the hosts with something waiting.
    outbox: Vec<Vec<Outgoing>>,
    outbox_hosts: Vec<usize>,
    /// Buffers of delivered and dropped packets, reused for the next reads instead of
    /// allocating.
    spare: Vec<Vec<u8>>,
    monarch: Option<MonarchProxy>,
}

impl Io {
    /// Keeps a packet's buffer for the next read.
    fn recycle_ip(&mut self, ip: IpPacket) {
        if self.spare.len() < SPARE_BUFFERS {
            self.spare.push(ip.into_bytes());
        }
    }
}

impl driver::Engine<EmuPacket> for Io {
    /// Datagrams enter at the real time of their read, possibly behind an element's time.
    const IN_ORDER: bool = false;

    fn wake_at(&mut self, element: usize, at: Instant) {
        self.timers.push(Reverse((at, element)));
    }

    /// Puts a packet that left its route's last element into its host's outbox.
    fn deliver(&mut self, _: &mut Driver<EmuPacket>, departure: Instant, mut pkt: EmuPacket) {
        let mut dst = self.route_dst[pkt.route as usize];
        // The counters are of what crossed the route.
        let counted = (pkt.ip.wire_len() as u64, pkt.ip.payload_len() as u64, pkt.ip.five_tuple());
        // An answer to a Monarch probe: the receiver gets the packet it stood for instead.
        if let Some(m) = self.monarch.as_mut().filter(|m| m.sender == dst) {
            if let Some(held) = m.translator.on_response(&pkt.ip) {
                m.record(departure, &pkt.ip);
                m.released += 1;
                m.released_bytes += held.wire_len() as u64;
                dst = m.receiver;
                let answer = std::mem::replace(&mut pkt.ip, held);
                self.recycle_ip(answer);
            }
        }
        if self.outbox[dst].is_empty() {
            self.outbox_hosts.push(dst);
        }
        self.outbox[dst].push(Outgoing { departure, route: pkt.route, ip: pkt.ip, counted });
    }

    /// A dropped packet is counted by the element; its buffer is reused.
    fn recycle(&mut self, pkt: EmuPacket) {
        self.recycle_ip(pkt.ip);
    }
}

const TIMER_TOKEN: u64 = u64::MAX;
/// A real Monarch target's answers are ready (see [`ProbeWay::Real`]).
const ANSWERS_TOKEN: u64 = u64::MAX - 1;

/// A packet released to host `dst` at model time `departure`, waiting for the end of the
/// model's pass to be written (see `Engine::outbox`). `counted` is what crossed `route`
/// (length, payload, flow): the packet itself, or for a Monarch answer the probe's answer
/// that released it.
struct Outgoing {
    departure: Instant,
    route: u32,
    ip: IpPacket,
    counted: (u64, u64, FiveTuple),
}

impl<D: PacketIo> Engine<D> {
    /// Builds the engine over `net`'s elements; model time zero is now. Routes are indexed by
    /// every (source address, destination address) pair of their two hosts.
    pub fn new(
        hosts: Vec<HostPort<D>>,
        net: Network<EmuPacket>,
        routes: Vec<Route>,
        timing: TimingOptions,
    ) -> Result<Engine<D>, EngineError> {
        let mut by_addrs = FxHashMap::default();
        for (i, r) in routes.iter().enumerate() {
            let (Some(s), Some(d)) = (hosts.get(r.src), hosts.get(r.dst)) else {
                return Err(EngineError::Routes(format!("route {i} names host {} or {} that does not exist", r.src, r.dst)));
            };
            if let Some(h) = r.hops.iter().find(|h| h.element >= net.elements.len()) {
                return Err(EngineError::Routes(format!("route {i} crosses element {} that does not exist", h.element)));
            }
            if r.hops.len() >= u16::MAX as usize {
                return Err(EngineError::Routes(format!("route {i} is too long")));
            }
            let pairs: Vec<(IpAddr, IpAddr)> = match r.only {
                Some(pair) => vec![pair],
                None => s.addrs.iter().flat_map(|a| d.addrs.iter().filter(|b| b.is_ipv4() == a.is_ipv4()).map(|b| (*a, *b))).collect(),
            };
            for (a, b) in pairs {
                if by_addrs.insert((a, b), i as u32).is_some() {
                    return Err(EngineError::Routes(format!("two routes from {a} to {b}")));
                }
            }
        }
        // SAFETY: epoll_create1 returns a new descriptor or -1.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(EngineError::Os { what: "epoll_create1", source: io::Error::last_os_error() });
        }
        // SAFETY: ep is fresh and ours.
        let epoll = unsafe { OwnedFd::from_raw_fd(ep) };
        let timer = DeadlineTimer::new().map_err(os("timerfd_create"))?;
        let register = |fd: i32, token: u64| -> io::Result<()> {
            let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: token };
            // SAFETY: registers a valid fd with a valid epoll instance.
            if unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        };
        for (i, h) in hosts.iter().enumerate() {
            register(h.device.raw_fd(), i as u64).map_err(os("epoll_ctl(device)"))?;
        }
        register(timer.raw_fd(), TIMER_TOKEN).map_err(os("epoll_ctl(timer)"))?;
        let n_routes = routes.len();
        let n_hosts = hosts.len();
        let mut driver = Driver::new(net);
        for r in &routes {
            driver.add_route(&r.hops);
        }
        let io = Io {
            timers: BinaryHeap::new(),
            route_dst: routes.iter().map(|r| r.dst).collect(),
            outbox: (0..n_hosts).map(|_| Vec::new()).collect(),
            outbox_hosts: Vec::new(),
            spare: Vec::new(),
            monarch: None,
        };
        let mut engine = Engine {
            clock: RealClock::start(),
            hosts,
            driver,
            io,
            routes,
            by_addrs,
            epoll,
            timer,
            timing,
            buf: vec![0; READ_BUF],
            segments: Vec::new(),
            admitted: Vec::new(),
            merged_headers: Vec::new(),
            lateness: Histogram::default(),
            wake_lateness: Histogram::default(),
            route_counters: vec![RouteCounters::default(); n_routes],
            host_counters: vec![HostCounters::default(); n_hosts],
            flows: FlowRecords::default(),
            samples: SpillThread::new("pathtwin-queue-series"),
            next_sample: Instant::ZERO,
            thread_prepared: false,
            governor: None,
            armed_for: None,
        };
        // Placeholder cross traffic runs from time zero.
        engine.driver.arm_all(Instant::ZERO, &mut engine.io);
        Ok(engine)
    }

    /// Puts Monarch's proxy in the loop (see [`MonarchProxy`]); a real target's answers
    /// join the loop's epoll set.
    pub fn set_monarch(&mut self, proxy: MonarchProxy) -> Result<(), EngineError> {
        if let ProbeWay::Real { target, .. } = &proxy.way {
            let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: ANSWERS_TOKEN };
            // SAFETY: registers a valid fd with a valid epoll instance.
            if unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, target.answers_fd(), &mut ev) } != 0 {
                return Err(EngineError::Os { what: "epoll_ctl(monarch answers)", source: io::Error::last_os_error() });
            }
        }
        self.io.monarch = Some(proxy);
        Ok(())
    }

    pub fn monarch(&self) -> Option<&MonarchProxy> {
        self.io.monarch.as_ref()
    }

    /// Pushes that came earlier than their element's time and were moved up to it (a packet
    /// read while an upstream output was already due for the same element; at most the
    /// duration of one read batch). Counted so that the model's ordering can be checked.
    pub fn reordered_pushes(&self) -> u64 {
        self.driver.reordered_pushes()
    }

    /// The real clock the loop's model time is read from (for other threads' timestamps).
    pub fn clock(&self) -> RealClock {
        self.clock
    }
    pub fn now(&self) -> Instant {
        self.clock.now()
    }
    pub fn hosts(&self) -> &[HostPort<D>] {
        &self.hosts
    }
    pub fn routes(&self) -> &[Route] {
        &self.routes
    }
    pub fn elements(&self) -> &[Element<EmuPacket>] {
        &self.driver.net.elements
    }
    /// The compiled network the loop drives (its elements' counters, names and pipes).
    pub fn network(&self) -> &Network<EmuPacket> {
        &self.driver.net
    }

    /// Runs the loop until model time `until` (or `should_stop` returns true, checked at
    /// least every 20 ms).
    pub fn run_until(&mut self, until: Instant, mut should_stop: impl FnMut() -> bool) -> Result<(), EngineError> {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 64];
        let mut ready: Vec<usize> = Vec::with_capacity(self.hosts.len());
        let mut answers_ready = false;
        if !self.thread_prepared {
            self.thread_prepared = true;
            // Best effort, all: without them (a seccomp filter, no CAP_SYS_NICE) the loop
            // still works, only with later wake-ups; `governor` tells the results which.
            let _ = set_min_timer_slack();
            if self.timing.high_priority && set_thread_nice(LOOP_NICE).is_ok() {
                let fifo = self.timing.fifo_while_idle && set_thread_fifo(true).is_ok();
                self.governor = Some(Governor::new(mono_ns(), thread_cpu_ns(), fifo, self.timing.fifo_while_idle));
            }
        }
        loop {
            // Everything due before the reads is released first, so a packet read now cannot
            // reach a shared element ahead of one that left its upstream hop earlier.
            let now = self.clock.now();
            self.run_model(now);
            for &h in &ready {
                self.read_host(h);
            }
            ready.clear();
            if std::mem::take(&mut answers_ready) {
                self.read_real_answers();
            }
            let now = self.clock.now().max(now);
            self.run_model(now);
            self.maybe_sample(now);
            self.flows.sweep(now);
            if now >= until || should_stop() {
                return Ok(());
            }
            let next = self.next_wakeup();
            let timeout_ms = match next {
                Some(t) if t.saturating_since(now) <= self.timing.spin => {
                    self.timer.set(None).map_err(os("timerfd_settime"))?;
                    self.armed_for = None;
                    0
                }
                Some(t) if t < until => {
                    // Sleep until `spin` before the deadline, then poll through the rest: the
                    // timer's own wake-up latency is hidden when `spin` exceeds it.
                    let wake = Instant::from_nanos(t.as_nanos().saturating_sub(self.timing.spin.as_nanos()));
                    self.timer.set(Some(self.clock.to_mono_ns(wake))).map_err(os("timerfd_settime"))?;
                    self.armed_for = Some(wake);
                    (MAX_SLEEP_NS / 1_000_000) as i32
                }
                _ => {
                    self.timer.set(None).map_err(os("timerfd_settime"))?;
                    self.armed_for = None;
                    let left = until.saturating_since(now).as_nanos().min(MAX_SLEEP_NS);
                    left.div_ceil(1_000_000) as i32
                }
            };
            // SAFETY: epoll_wait fills at most `events.len()` entries of a buffer we own.
            let n = unsafe { libc::epoll_wait(self.epoll.as_raw_fd(), events.as_mut_ptr(), events.len() as i32, timeout_ms) };
            if let Some(g) = &mut self.governor {
                if let Some(to) = g.tick(mono_ns(), thread_cpu_ns) {
                    if set_thread_fifo(to == Switch::ToFifo).is_ok() {
                        g.switched(to);
                    }
                }
            }
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(EngineError::Os { what: "epoll_wait", source: e });
            }
            for ev in &events[..n as usize] {
                if ev.u64 == TIMER_TOKEN {
                    self.timer.acknowledge();
                    if let Some(t) = self.armed_for.take() {
                        self.wake_lateness.record(mono_ns().saturating_sub(self.clock.to_mono_ns(t)));
                    }
                } else if ev.u64 == ANSWERS_TOKEN {
                    answers_ready = true;
                } else {
                    ready.push(ev.u64 as usize);
                }
            }
        }
    }

    /// Earliest time any element has something to do.
    pub fn next_wakeup(&mut self) -> Option<Instant> {
        while let Some(&Reverse((w, i))) = self.io.timers.peek() {
            if self.driver.armed_at(i) == Some(w) {
                return Some(w);
            }
            self.io.timers.pop();
        }
        None
    }

    fn read_host(&mut self, h: usize) {
        for _ in 0..READ_BATCH {
            let (n, hdr) = match self.hosts[h].device.recv(&mut self.buf) {
                Ok(Some(r)) => r,
                // A read error on a device we own means it is gone (the namespace was
                // deleted under us); stop reading it, the run's owner reports the end.
                Ok(None) | Err(_) => return,
            };
            let at = self.clock.now();
            let mut admitted = std::mem::take(&mut self.admitted);
            if let Some(mss) = hdr.tcp_gso_size() {
                // A super-packet enters the model as the segments a wire would carry, their
                // summaries made from its own (they differ only in lengths and sequence).
                let mut segments = std::mem::take(&mut self.segments);
                let template = IpPacket::parse_headers(&self.buf[..n]);
                match (template, gso::split_tcp(&self.buf[..n], mss, &mut self.io.spare, &mut segments)) {
                    (Ok(template), Ok(split)) => {
                        self.host_counters[h].super_packets_read += 1;
                        let last = segments.len() - 1;
                        admitted.extend(segments.drain(..).enumerate().map(|(i, seg)| {
                            let mut ip = template.segment(seg, split.headers, (i * mss) as u32, i == last);
                            ip.set_partial_checksum(Some(split.csum));
                            ip
                        }));
                    }
                    _ => {
                        self.count_malformed(h);
                        self.io.spare.append(&mut segments);
                    }
                }
                self.segments = segments;
            } else if hdr.is_unknown_gso() {
                self.count_malformed(h);
            } else {
                let mut bytes = self.io.spare.pop().unwrap_or_default();
                bytes.clear();
                bytes.extend_from_slice(&self.buf[..n]);
                match IpPacket::parse(bytes) {
                    Ok(mut ip) => {
                        ip.set_partial_checksum(hdr.partial_csum());
                        admitted.push(ip);
                    }
                    Err(_) => {
                        self.count_malformed(h);
                    }
                }
            }
            self.admit(h, at, &mut admitted);
            self.admitted = admitted;
            // Each datagram is carried as far as the model lets it before the next read: on
            // a fast path it is written within a microsecond or two. Running the model once
            // per batch instead measured ~10 % more throughput on an unlimited path, but
            // made the batch's first packets wait for the rest (lateness p50 ~70 µs).
            self.run_model(self.clock.now().max(at));
        }
    }

    /// One datagram read from host `h` that could not be used.
    fn count_malformed(&mut self, h: usize) {
        self.host_counters[h].packets_read += 1;
        self.host_counters[h].malformed += 1;
    }

    /// Routes what one read from host `h` at `at` gave into the model, emptying `packets`:
    /// one datagram, or the segments of one super-packet (one flow: routed and counted once).
    fn admit(&mut self, h: usize, at: Instant, packets: &mut Vec<IpPacket>) {
        let Some(first) = packets.first() else { return };
        self.host_counters[h].packets_read += packets.len() as u64;
        if self.io.monarch.is_some() {
            for ip in packets.drain(..) {
                self.admit_via_proxy(h, at, ip);
            }
            return;
        }
        let Some(&route) = self.by_addrs.get(&(first.src(), first.dst())) else {
            self.host_counters[h].unrouted += packets.len() as u64;
            for ip in packets.drain(..) {
                self.io.recycle_ip(ip);
            }
            return;
        };
        let bytes: u64 = packets.iter().map(|p| u64::from(p.wire_len())).sum();
        let payload: u64 = packets.iter().map(|p| u64::from(p.payload_len())).sum();
        self.count_in(route, first.five_tuple(), at, packets.len() as u64, bytes, payload);
        for ip in packets.drain(..) {
            self.driver.send(at, EmuPacket { ip, route, hop: 0 }, &mut self.io);
        }
    }

    /// [`Engine::admit`] with Monarch's proxy in the loop: packets are looked at one by one,
    /// as the proxy holds some and sends probes for them.
    fn admit_via_proxy(&mut self, h: usize, at: Instant, mut ip: IpPacket) {
        let Some(m) = self.io.monarch.as_mut() else { return };
        // The proxy records and translates packets: they leave it with whole checksums.
        ip.complete_checksum();
        if let ProbeWay::Emulated { host, sequential_ids: Some(next), .. } = &mut m.way {
            if h == *host {
                ip.set_ipv4_id(*next);
                *next = next.wrapping_add(1);
            }
        }
        let to = |host: usize| self.hosts[host].addrs.contains(&ip.dst());
        if h == m.sender && to(m.receiver) {
            // A real target's proxy counts what it took in on its own route (an emulated
            // one's probes are counted on theirs).
            let taken = matches!(m.way, ProbeWay::Real { .. }).then(|| (ip.wire_len() as u64, ip.payload_len() as u64, ip.five_tuple()));
            let probe = m.translator.probe_for(ip);
            let route = match &mut m.way {
                ProbeWay::Emulated { route, .. } => {
                    let route = *route;
                    m.record(at, &probe);
                    self.route_counters[route as usize].packets_in += 1;
                    self.route_counters[route as usize].bytes_in += probe.wire_len() as u64;
                    self.driver.send(at, EmuPacket { ip: probe, route, hop: 0 }, &mut self.io);
                    return;
                }
                ProbeWay::Real { target, route } => {
                    let route = *route;
                    match target.admit(at, probe.bytes().len()).and_then(|()| target.send(&probe)) {
                        Ok(()) => m.record(at, &probe),
                        Err(why) => {
                            // The packet goes no further: its probe never left.
                            m.translator.withdraw_last();
                            match why {
                                NotSent::Capped => m.capped += 1,
                                NotSent::Failed => m.send_failures += 1,
                            }
                        }
                    }
                    self.io.recycle_ip(probe);
                    route
                }
            };
            // What the proxy took in from the sender, as a route's and a flow's counts.
            if let Some((len, payload, tuple)) = taken {
                self.count_in(route, tuple, at, 1, len, payload);
            }
            return;
        }
        let Some(&route) = self.by_addrs.get(&(ip.src(), ip.dst())) else {
            self.host_counters[h].unrouted += 1;
            return;
        };
        self.count_in(route, ip.five_tuple(), at, 1, ip.wire_len() as u64, ip.payload_len() as u64);
        self.driver.send(at, EmuPacket { ip, route, hop: 0 }, &mut self.io);
    }

    /// Reads a real target's answers (see [`ProbeWay::Real`]): each that answers a held
    /// packet releases it to the receiver now, and is recorded; anything else is dropped.
    fn read_real_answers(&mut self) {
        let Some(MonarchProxy { translator, way: ProbeWay::Real { target, route }, capture, receiver, released, released_bytes, .. }) =
            self.io.monarch.as_mut()
        else {
            return;
        };
        let (route, receiver) = (*route, *receiver);
        loop {
            let mut buf = self.io.spare.pop().unwrap_or_default();
            if target.recv(&mut buf).is_none() {
                self.io.spare.push(buf);
                break;
            }
            let Ok(answer) = IpPacket::parse(buf) else { continue };
            let at = self.clock.now();
            if let Some(held) = translator.on_response(&answer) {
                record_probe(capture, at, &answer);
                *released += 1;
                *released_bytes += held.wire_len() as u64;
                let counted = (held.wire_len() as u64, held.payload_len() as u64, held.five_tuple());
                if self.io.outbox[receiver].is_empty() {
                    self.io.outbox_hosts.push(receiver);
                }
                self.io.outbox[receiver].push(Outgoing { departure: at, route, ip: held, counted });
            }
            if self.io.spare.len() < SPARE_BUFFERS {
                self.io.spare.push(answer.into_bytes());
            }
        }
        self.flush_outboxes();
    }

    /// Counts `count` packets of flow `tuple` (`bytes` in all, `payload` of it data) entering
    /// `route` at `at`.
    fn count_in(&mut self, route: u32, tuple: FiveTuple, at: Instant, count: u64, bytes: u64, payload: u64) {
        let rc = &mut self.route_counters[route as usize];
        rc.packets_in += count;
        rc.bytes_in += bytes;
        self.flows.count_in(route, tuple, at, count, bytes, payload);
    }

    /// Writes everything released during this pass of the model.
    fn flush_outboxes(&mut self) {
        while let Some(h) = self.io.outbox_hosts.pop() {
            self.flush(h);
        }
    }

    /// Writes host `dst`'s outbox in order; with offload, runs of segments that GRO would
    /// merge go out as one super-packet (see [`crate::gso`]).
    fn flush(&mut self, dst: usize) {
        let mut out = std::mem::take(&mut self.io.outbox[dst]);
        let offloads = self.hosts[dst].device.offloads();
        let mut i = 0;
        while i < out.len() {
            let mut end = i + 1;
            let mut merge = if offloads { gso::Merge::start(out[i].ip.bytes()) } else { None };
            if let Some(m) = merge.as_mut() {
                while end < out.len() && m.accepts(out[i].ip.bytes(), out[end].ip.bytes()) {
                    end += 1;
                }
            }
            // Released when handed to the kernel: the write itself also runs the receiving
            // host's stack (and wakes its process) in this thread, which is not the packet's
            // delay but delays the packets written after it, where it is counted.
            let now = self.clock.now();
            let device = &self.hosts[dst].device;
            let ok = match merge.filter(|_| end - i > 1) {
                Some(m) => {
                    let hdr = m.header(out[i].ip.bytes(), &mut self.merged_headers);
                    let mut parts: [&[u8]; MAX_MERGED + 1] = [&[]; MAX_MERGED + 1];
                    parts[0] = &self.merged_headers;
                    for (part, o) in parts[1..].iter_mut().zip(&out[i..end]) {
                        *part = &o.ip.bytes()[m.headers_len()..];
                    }
                    self.host_counters[dst].super_packets_written += 1;
                    device.send(&parts[..=end - i], &hdr)
                }
                None => {
                    let ip = &mut out[i].ip;
                    if !offloads {
                        ip.complete_checksum();
                    }
                    device.send(&[ip.bytes()], &VnetHdr::single(ip.partial_checksum()))
                }
            }
            .unwrap_or(false);
            for o in &out[i..end] {
                self.lateness.record(now.saturating_since(o.departure).as_nanos());
                let rc = &mut self.route_counters[o.route as usize];
                if ok {
                    let (len, payload, tuple) = o.counted;
                    rc.packets_out += 1;
                    rc.bytes_out += len;
                    self.flows.count_out(&tuple, len, payload);
                } else {
                    rc.write_drops += 1;
                }
            }
            i = end;
        }
        for o in out.drain(..) {
            self.io.recycle_ip(o.ip);
        }
        self.io.outbox[dst] = out;
    }

    /// Releases everything due by `now`, earliest model departure first; every element is
    /// woken only at its own wake-up time, so pushes into it never go back in time.
    fn run_model(&mut self, now: Instant) {
        while let Some(&Reverse((w, e))) = self.io.timers.peek() {
            if w > now {
                break;
            }
            self.io.timers.pop();
            // Stale entries (the element was re-armed since) are skipped by the driver.
            self.driver.wake(w, e, &mut self.io);
        }
        self.flush_outboxes();
    }

    /// Sends `pkt` into the model at `at`, as a read does (for tests that skip the devices).
    #[cfg(test)]
    fn send(&mut self, at: Instant, pkt: EmuPacket) {
        self.driver.send(at, pkt, &mut self.io);
    }

    /// The queue samples taken so far, to be read back in order: at the end of a run, for its
    /// results (the engine keeps sampling into a new, empty series).
    pub fn take_queue_samples(&mut self) -> SpillThread<QueueSample> {
        std::mem::replace(&mut self.samples, SpillThread::new("pathtwin-queue-series"))
    }

    fn maybe_sample(&mut self, now: Instant) {
        if self.timing.sample_every == Duration::ZERO || now < self.next_sample {
            return;
        }
        self.next_sample = now + self.timing.sample_every;
        // Safe after `run_model(now)`: every packet still to arrive anywhere arrives after
        // `now`, so the queues may be advanced to it.
        let samples = &mut self.samples;
        self.driver.sample_queues(now, &mut self.io, |s, _| samples.push(*s));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pathtwin_core::element::BandwidthQueue;
    use pathtwin_core::qdisc::DropTail;
    use pathtwin_core::rng_for;
    use pathtwin_core::units::{QueueLimit, Rate};
    use std::cell::RefCell;

    /// A device that records what is written to it and hands out what a test queued in
    /// `incoming`; its descriptor (an eventfd) never becomes readable, so tests call
    /// `read_host` themselves.
    struct Recorder {
        fd: OwnedFd,
        offload: bool,
        incoming: RefCell<std::collections::VecDeque<(Vec<u8>, VnetHdr)>>,
        sent: RefCell<Vec<Vec<u8>>>,
        headers: RefCell<Vec<VnetHdr>>,
    }

    impl Recorder {
        fn new(offload: bool) -> Recorder {
            // SAFETY: eventfd returns a new descriptor or -1.
            let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
            assert!(raw >= 0);
            Recorder {
                // SAFETY: raw is fresh and ours.
                fd: unsafe { OwnedFd::from_raw_fd(raw) },
                offload,
                incoming: RefCell::default(),
                sent: RefCell::default(),
                headers: RefCell::default(),
            }
        }
    }

    impl PacketIo for Recorder {
        fn recv(&self, buf: &mut [u8]) -> io::Result<Option<(usize, VnetHdr)>> {
            Ok(self.incoming.borrow_mut().pop_front().map(|(p, hdr)| {
                buf[..p.len()].copy_from_slice(&p);
                (p.len(), hdr)
            }))
        }
        fn send(&self, parts: &[&[u8]], hdr: &VnetHdr) -> io::Result<bool> {
            self.sent.borrow_mut().push(parts.concat());
            self.headers.borrow_mut().push(*hdr);
            Ok(true)
        }
        fn offloads(&self) -> bool {
            self.offload
        }
        fn raw_fd(&self) -> i32 {
            self.fd.as_raw_fd()
        }
    }

    fn udp(src: u8, dst: u8, len: usize, tag: u8) -> IpPacket {
        let mut out = Vec::new();
        etherparse::PacketBuilder::ipv4([10, 0, 0, src], [10, 0, 0, dst], 64)
            .udp(1000, 2000)
            .write(&mut out, &vec![tag; len - 28])
            .unwrap();
        IpPacket::parse(out).unwrap()
    }

    fn queue(capacity_bps: u64, abw_bps: u64) -> Element<EmuPacket> {
        let q = DropTail::new(QueueLimit::Packets(100));
        Element::Queue(BandwidthQueue::new(Rate::from_bps(capacity_bps), Rate::from_bps(abw_bps), q, rng_for(1, 0)))
    }

    /// An engine over `n` recording hosts 10.0.0.1..=n, without sampling or priority changes.
    fn engine(n: u8, elements: Vec<Element<EmuPacket>>, routes: Vec<Route>) -> Engine<Recorder> {
        engine_with(n, &[], elements, routes)
    }

    /// The same, host `i` offloading if `offload[i - 1]` (false beyond the list).
    fn engine_with(n: u8, offload: &[bool], elements: Vec<Element<EmuPacket>>, routes: Vec<Route>) -> Engine<Recorder> {
        let hosts = (1..=n)
            .map(|i| {
                let device = Recorder::new(offload.get(usize::from(i) - 1).copied().unwrap_or(false));
                HostPort { name: format!("h{i}"), device, addrs: vec![IpAddr::from([10, 0, 0, i])] }
            })
            .collect();
        let timing = TimingOptions { sample_every: Duration::ZERO, high_priority: false, ..TimingOptions::default() };
        Engine::new(hosts, Network::of_elements(elements), routes, timing).unwrap()
    }

    /// A read batch pushes many packets into one element before the model runs; the element
    /// must stay queued once (the heap grew with every push and the loop spent a fifth of its
    /// time sifting it before), and the packets must still leave in order.
    #[test]
    fn a_batch_into_one_element_keeps_one_heap_entry_and_fifo_order() {
        let routes = vec![Route { src: 0, dst: 1, hops: vec![Hop { element: 0, slot: 0 }], only: None }];
        let mut e = engine(2, vec![queue(1_000_000_000, 1_000_000_000)], routes);
        let late = Instant::from_nanos(10_000_000);
        for tag in 0..64u8 {
            e.send(Instant::ZERO, EmuPacket { ip: udp(1, 2, 200, tag), route: 0, hop: 0 });
            assert!(e.io.timers.len() <= 1, "element queued {} times", e.io.timers.len());
        }
        e.run_model(late);
        let tags: Vec<u8> = e.hosts[1].device.sent.borrow().iter().map(|p| p[28]).collect();
        assert_eq!(tags, (0..64).collect::<Vec<u8>>());
        assert_eq!(e.next_wakeup(), None);
    }

    /// A pipe route carries only its address pair; the hosts' other addresses keep their
    /// own route, and two routes for one pair are refused.
    #[test]
    fn a_pipe_route_carries_only_its_address_pair() {
        let pipe_addr = IpAddr::from([10, 129, 0, 1]);
        let server = IpAddr::from([10, 0, 0, 1]);
        let routes = vec![
            Route { src: 0, dst: 1, hops: vec![Hop { element: 0, slot: 0 }], only: None },
            Route { src: 0, dst: 1, hops: vec![Hop { element: 1, slot: 0 }], only: Some((server, pipe_addr)) },
            Route { src: 1, dst: 0, hops: vec![Hop { element: 1, slot: 0 }], only: Some((pipe_addr, server)) },
        ];
        let e = engine(2, vec![queue(1_000_000, 1_000_000), queue(1_000_000, 1_000_000)], routes.clone());
        assert_eq!(e.by_addrs.get(&(server, IpAddr::from([10, 0, 0, 2]))), Some(&0));
        assert_eq!(e.by_addrs.get(&(server, pipe_addr)), Some(&1));
        assert_eq!(e.by_addrs.get(&(pipe_addr, server)), Some(&2));
        // Host 1's own address has no route back (no generic 1 -> 0 route here).
        assert_eq!(e.by_addrs.get(&(IpAddr::from([10, 0, 0, 2]), server)), None);
        let mut twice = routes;
        twice.push(Route { src: 0, dst: 1, hops: vec![Hop { element: 0, slot: 0 }], only: Some((server, pipe_addr)) });
        let hosts = (1..=2u8).map(|i| HostPort { name: format!("h{i}"), device: Recorder::new(false), addrs: vec![IpAddr::from([10, 0, 0, i])] }).collect();
        let err = Engine::new(hosts, Network::of_elements(vec![queue(1, 1), queue(1, 1)]), twice, TimingOptions::default()).err().expect("refused");
        assert!(err.to_string().contains("two routes from 10.0.0.1 to 10.129.0.1"), "{err}");
    }

    /// Two 1500-byte packets cross q1 (8 Mbit/s: 1.5 ms each) and then q2 (12 Mbit/s: 1 ms
    /// per 1500 bytes, placeholders at 6 Mbit/s: one every 2 ms from t = 0), which a
    /// 100-byte packet from another host entered at t = 0. The loop runs the model once,
    /// late, at 5 ms. By hand, on q2: placeholder 0 [0, 1], the 100-byte packet [1, 1.067],
    /// A (in at 1.5) [1.5, 2.5], placeholder 1 (in at 2) [2.5, 3.5], A2 (in at 3) [3.5, 4.5],
    /// placeholder 2 (in at 4) from 4.5 — still on the link at 5 ms.
    #[test]
    fn a_late_loop_replays_a_shared_queue_in_model_time_order() {
        let routes = vec![
            Route { src: 0, dst: 1, hops: vec![Hop { element: 0, slot: 0 }, Hop { element: 1, slot: 0 }], only: None },
            Route { src: 2, dst: 1, hops: vec![Hop { element: 1, slot: 0 }], only: None },
        ];
        let mut e = engine(3, vec![queue(8_000_000, 8_000_000), queue(12_000_000, 6_000_000)], routes);
        let t0 = Instant::ZERO;
        e.send(t0, EmuPacket { ip: udp(1, 2, 1500, b'A'), route: 0, hop: 0 });
        e.send(t0, EmuPacket { ip: udp(1, 2, 1500, b'Z'), route: 0, hop: 0 });
        e.send(t0, EmuPacket { ip: udp(3, 2, 100, b'B'), route: 1, hop: 0 });
        e.run_model(Instant::from_nanos(5_000_000));

        let sent: Vec<(usize, u8)> = e.hosts[1].device.sent.borrow().iter().map(|p| (p.len(), p[28])).collect();
        assert_eq!(sent, [(100, b'B'), (1500, b'A'), (1500, b'Z')]);
        let q2 = e.driver.net.elements[1].as_queue().unwrap();
        assert_eq!(q2.stats().departures, 3);
        assert_eq!(q2.stats().placeholder_departures, 2, "placeholder 2 must still be on the link at 5 ms");
        assert_eq!(q2.occupancy().placeholder_packets, 1);
        assert_eq!(e.reordered_pushes(), 0);
    }

    /// A marker on a route writes its decision into the datagrams the destination receives
    /// (DSCP AF11 for IN, AF12 for OUT, RFC 2597), with a valid IPv4 header checksum, and
    /// adds no delay.
    #[test]
    fn a_marker_on_the_route_rewrites_the_dscp_of_delivered_datagrams() {
        use pathtwin_core::marker::{Marker, Policy, TokenBucket};
        use pathtwin_core::units::Size;
        // Tokens for two 500-byte datagrams in the first 400 ms.
        let tb = TokenBucket::per_interval(Size::from_bytes(1000), Duration::from_millis(400));
        let marker = Element::Marker(Marker::new(Policy::TokenBucket(tb)));
        let routes = vec![Route { src: 0, dst: 1, hops: vec![Hop { element: 0, slot: 0 }, Hop { element: 1, slot: 0 }], only: None }];
        let mut e = engine(2, vec![marker, queue(1_000_000_000, 1_000_000_000)], routes);
        for tag in 0..3u8 {
            e.send(Instant::ZERO, EmuPacket { ip: udp(1, 2, 500, tag), route: 0, hop: 0 });
        }
        e.run_model(Instant::from_nanos(1_000_000));
        let sent = e.hosts[1].device.sent.borrow();
        let dscps: Vec<u8> = sent
            .iter()
            .map(|p| {
                let h = etherparse::Ipv4HeaderSlice::from_slice(p).unwrap();
                assert_eq!(h.header_checksum(), h.to_header().calc_header_checksum());
                h.dcp().value()
            })
            .collect();
        assert_eq!(dscps, [10, 10, 12]);
        let s = e.driver.net.elements[0].as_marker().unwrap().stats();
        assert_eq!((s.in_packets(), s.out_packets(), s.out_bytes()), (2, 1, 500));
    }
    /// A TCP super-packet from 10.0.0.1 to 10.0.0.2 as a host's kernel hands it to an
    /// offloading device: `payload` bytes of a counting pattern, the checksum field holding
    /// the pseudo-header sum, and the device header asking for segments of `mss`.
    fn super_packet(payload: usize, mss: u16) -> (Vec<u8>, VnetHdr) {
        let data: Vec<u8> = (0..payload).map(|i| (i % 251) as u8).collect();
        let mut p = Vec::new();
        etherparse::PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(40000, 5201, 1, 65535)
            .ack(1)
            .psh()
            .write(&mut p, &data)
            .unwrap();
        let seed = gso::pseudo_header_sum(IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]), 6, (20 + payload) as u32);
        p[36..38].copy_from_slice(&seed.to_be_bytes());
        let hdr = VnetHdr { flags: 1, gso_type: 1, hdr_len: 40, gso_size: mss, csum_start: 20, csum_offset: 16 };
        (p, hdr)
    }

    /// A queue of `limit` packets at `bps`, then a 1-s delay: nothing can leave while a test
    /// reads, however slow the machine, so what is written is decided by the model alone.
    fn queue_then_delay(bps: u64, limit: u64) -> (Vec<Element<EmuPacket>>, Vec<Route>) {
        let q = DropTail::new(QueueLimit::Packets(limit));
        let queue = Element::Queue(BandwidthQueue::new(Rate::from_bps(bps), Rate::from_bps(bps), q, rng_for(1, 0)));
        let delay = Element::Delay(pathtwin_core::element::DelayLine::new(Duration::from_secs(1)));
        let hops = vec![Hop { element: 0, slot: 0 }, Hop { element: 1, slot: 0 }];
        (vec![queue, delay], vec![Route { src: 0, dst: 1, hops, only: None }])
    }

    /// A 20 000-byte super-packet on a fast path: the model accounts its 14 segments (an MSS
    /// of 1448), and the receiving host gets one super-packet with the sender's very bytes
    /// and a header asking its kernel for the same MSS.
    #[test]
    fn a_super_packet_is_accounted_per_segment_and_delivered_whole() {
        let (elements, routes) = queue_then_delay(100_000_000_000, 1000);
        let mut e = engine_with(2, &[true, true], elements, routes);
        let (p, hdr) = super_packet(20_000, 1448);
        e.hosts[0].device.incoming.borrow_mut().push_back((p.clone(), hdr));
        e.read_host(0);
        e.run_model(Instant::from_nanos(3_000_000_000));
        let c = e.host_counters[0];
        assert_eq!((c.packets_read, c.super_packets_read, c.malformed), (14, 1, 0));
        let q = e.driver.net.elements[0].as_queue().unwrap().stats();
        assert_eq!((q.departures, q.drops), (14, 0));
        assert_eq!(e.route_counters[0].packets_out, 14);
        assert_eq!(e.route_counters[0].bytes_in, 20_000 + 14 * 40);
        let flow = e.flows.all().unwrap()[0].1;
        assert_eq!((flow.packets_in, flow.payload_bytes_in, flow.payload_bytes_out), (14, 20_000, 20_000));
        let sent = e.hosts[1].device.sent.borrow();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0], p);
        let out = e.hosts[1].device.headers.borrow()[0];
        assert_eq!((out.tcp_gso_size(), out.partial_csum()), (Some(1448), hdr.partial_csum()));
        assert_eq!(e.host_counters[1].super_packets_written, 1);
    }

    /// On a 1 Gbit/s path with a 4-packet queue, the segments the queue drops are lost one by
    /// one, as on a wire: the survivors (the first ones: DropTail) reach the host, merged,
    /// and the rest are counted as drops of MTU-sized packets.
    #[test]
    fn a_short_queue_drops_single_segments_of_a_super_packet() {
        let (elements, routes) = queue_then_delay(1_000_000_000, 4);
        let mut e = engine_with(2, &[true, true], elements, routes);
        let (p, hdr) = super_packet(20_000, 1448);
        e.hosts[0].device.incoming.borrow_mut().push_back((p.clone(), hdr));
        e.read_host(0);
        e.run_model(Instant::from_nanos(3_000_000_000));
        let q = e.driver.net.elements[0].as_queue().unwrap().stats();
        assert!(q.drops > 0 && q.departures + q.drops == 14, "{q:?}");
        let sent = e.hosts[1].device.sent.borrow();
        assert_eq!(sent.len(), 1);
        let kept = q.departures as usize * 1448;
        assert_eq!(&sent[0][40..], &p[40..40 + kept], "the first segments' data, in order");
        assert_eq!(u16::from_be_bytes([sent[0][2], sent[0][3]]) as usize, 40 + kept);
    }

    /// A host without offload gets wire-sized segments with complete checksums, each equal
    /// to what etherparse computes for it.
    #[test]
    fn a_host_without_offload_gets_segments_with_complete_checksums() {
        let (elements, routes) = queue_then_delay(100_000_000_000, 1000);
        let mut e = engine_with(2, &[true, false], elements, routes);
        let (p, hdr) = super_packet(5_000, 1448);
        e.hosts[0].device.incoming.borrow_mut().push_back((p, hdr));
        e.read_host(0);
        e.run_model(Instant::from_nanos(3_000_000_000));
        let sent = e.hosts[1].device.sent.borrow();
        assert_eq!(sent.iter().map(Vec::len).collect::<Vec<_>>(), [1488, 1488, 1488, 40 + 5_000 - 3 * 1448]);
        for seg in sent.iter() {
            let s = etherparse::SlicedPacket::from_ip(seg).unwrap();
            let (Some(etherparse::NetSlice::Ipv4(ip)), Some(etherparse::TransportSlice::Tcp(t))) = (&s.net, &s.transport) else {
                panic!("not TCP/IPv4")
            };
            let want = t.to_header().calc_checksum_ipv4(&ip.header().to_header(), t.payload()).unwrap();
            assert_eq!(t.checksum(), want);
        }
        assert!(e.hosts[1].device.headers.borrow().iter().all(|h| *h == VnetHdr::default()));
    }
}
