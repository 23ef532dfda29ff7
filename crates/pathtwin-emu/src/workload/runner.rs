//! The workload's programs, all of them on one thread: every connection's client and server
//! as non-blocking kernel sockets in their hosts' namespaces, one epoll set, and one timer
//! (the emulator's absolute-deadline `timerfd`) for starts, stops, on/off periods, think
//! times and server delays. The applications' decisions are [`pathtwin_core::app`]'s (the
//! simulator's too); this module carries them out and measures: bytes read, times, and the
//! client socket's `tcp_info`.
//!
//! # Why one thread of the emulator's process, not programs in the hosts
//! A program started in each namespace (as `bulk_transfer` or the replay agent do) costs a
//! process per host and a Python interpreter's timing: its wake-ups are late by its own
//! scheduling, and its start time by tens of milliseconds. A thread that enters a host's
//! namespace only to create that host's sockets (a socket stays in the namespace it was
//! created in) drives every connection from one epoll loop with the emulator's own clock:
//! a flow starts, toggles and stops at model times on the same axis as the queue and
//! `tcp_info` series, its `tcp_info` is read with one `getsockopt` on its own socket, and
//! no Python runs while it does (the packet loop runs beside it, on its own thread). It
//! runs at the default scheduling policy: the packet loop preempts it, never the reverse.
//!
//! # Writing like the simulator's applications
//! A streaming client writes whenever the kernel takes more, [`CHUNK`] at a time; each
//! socket's `TCP_NOTSENT_LOWAT` is [`WRITE_AHEAD`], so the kernel takes more only while less
//! than that is written but unsent. The unsent part therefore stays within about twice
//! that, and what is in flight is the congestion window: the simulator's writer keeps
//! `2·max(cwnd, 64 KB)` ahead of the acknowledged data. Without the limit the kernel's send
//! buffer (autotuned to megabytes) would keep an on/off source sending long into its off
//! period, and a stopped flow long after its stop.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::mpsc::SyncSender;

use pathtwin_core::app::{Action, App, Step, MIN_WRITE_AHEAD};
use pathtwin_core::replay::{CLIENT, SERVER};
use pathtwin_core::results;
use pathtwin_core::time::Instant;

use crate::clock::{DeadlineTimer, RealClock};
use crate::tcpinfo::TcpInfo;

use super::plan::{pipe_bind, Plan};
use super::sock::{self, Epoll};
use super::FlowRecord;

/// Unsent bytes at which a socket stops taking more (`TCP_NOTSENT_LOWAT`): the smallest
/// write-ahead of both engines' streams.
pub const WRITE_AHEAD: u32 = MIN_WRITE_AHEAD as u32;
/// Bytes per `write` or `read`.
const CHUNK: usize = 256 * 1024;
/// Pending connections a listener holds: every copy of an entry may connect at once.
const BACKLOG: u32 = 4096;

const TOKEN_TIMER: u64 = 0;
const TOKEN_STOP: u64 = 1;
const KIND_LISTENER: u64 = 2;
const KIND_CLIENT: u64 = 3;
const KIND_SERVER: u64 = 4;

fn token(kind: u64, index: usize) -> u64 {
    kind << 32 | index as u64
}

/// What a timer wakes the runner for.
#[derive(Clone, Copy, Debug)]
enum Timer {
    /// Connection c's client connects.
    Start(usize),
    App(usize, Step),
    /// Every connection's `tcp_info` is read (for the mean RTT).
    Sample,
    /// `[run] duration` is reached.
    End,
}

/// A timer entry, ordered by (time, insertion) with the earliest first out of a max-heap.
struct Due {
    t: Instant,
    seq: u64,
    timer: Timer,
}

impl PartialEq for Due {
    fn eq(&self, o: &Due) -> bool {
        (self.t, self.seq) == (o.t, o.seq)
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, o: &Due) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Due {
    fn cmp(&self, o: &Due) -> Ordering {
        (o.t, o.seq).cmp(&(self.t, self.seq))
    }
}

/// One connection's two programs.
struct Conn {
    entry: usize,
    app: App,
    sockets: [Option<TcpStream>; 2],
    connected: bool,
    /// Bytes each side still has to write (request/response, replay).
    pending: [u64; 2],
    /// Each side's application asked to close; `shut`: its writing half is closed.
    closing: [bool; 2],
    shut: [bool; 2],
    /// Each side read end of file.
    eof: [bool; 2],
    /// Bytes each side's application read.
    delivered: [u64; 2],
    started_at: Option<Instant>,
    delivered_at_stop: Option<u64>,
    /// When both ends had closed (or the connection failed).
    done_at: Option<Instant>,
    /// The client socket's latest `tcp_info`, and the sum and count of its smoothed RTTs.
    info: Option<TcpInfo>,
    rtt_sum_us: f64,
    rtt_count: u64,
    cc: Option<String>,
    error: Option<String>,
    /// The client's address and the server's, once connecting.
    addrs: Option<(SocketAddrV4, SocketAddrV4)>,
}

impl Conn {
    fn delivered(&self) -> u64 {
        self.delivered[SERVER] + if self.app.counts_server_only() { 0 } else { self.delivered[CLIENT] }
    }

    /// Reads the client socket's `tcp_info` (as the latest, and into the RTT mean).
    fn sample(&mut self) {
        let Some(s) = &self.sockets[CLIENT] else { return };
        if let Ok(info) = sock::tcp_info(s.as_raw_fd()) {
            if let Some(rtt) = info.rtt_us.filter(|&r| r > 0) {
                self.rtt_sum_us += rtt as f64;
                self.rtt_count += 1;
            }
            self.info = Some(info);
        }
    }
}

/// What the thread hands back at its end.
pub struct Outcome {
    pub records: Vec<FlowRecord>,
    /// Per connection that connected: its client's and its server's socket address.
    pub addrs: Vec<Option<(SocketAddrV4, SocketAddrV4)>>,
    pub warnings: Vec<String>,
    /// Stopped from outside before the run's end and before every flow had finished.
    pub interrupted: bool,
}

/// The hosts as the runner needs them: namespace, address, first pipe address.
pub struct HostView {
    pub netns: File,
    pub ipv4: Ipv4Addr,
    pub first_pipe: Option<Ipv4Addr>,
}

pub struct Runner {
    plan: Plan,
    clock: RealClock,
    epoll: Epoll,
    timer: DeadlineTimer,
    hosts: Vec<HostView>,
    /// The host namespace the thread is in now.
    here: Option<usize>,
    default_cc: Vec<Option<String>>,
    listeners: Vec<TcpListener>,
    conns: Vec<Conn>,
    /// Connections waiting to be accepted, by entry and client address.
    connecting: HashMap<(usize, SocketAddrV4), usize>,
    timers: BinaryHeap<Due>,
    seq: u64,
    queue: VecDeque<(usize, Action)>,
    scratch: Vec<Action>,
    done: usize,
    ended: Option<Instant>,
    interrupted: bool,
    buf: Vec<u8>,
    zeros: Vec<u8>,
    warnings: Vec<String>,
}

impl Runner {
    /// Sets up the listeners (so that errors in a flow's settings come back before anything
    /// runs, on `ready`) and runs the workload to its end, or until `stop` is readable.
    pub fn run(plan: Plan, clock: RealClock, hosts: Vec<HostView>, stop: &OwnedFd, ready: SyncSender<Result<(), String>>) -> Outcome {
        // Whatever thread started the emulation, this one runs at the default policy.
        let _ = crate::priority::set_thread_fifo(false);
        let mut r = match Runner::new(plan, clock, hosts, stop) {
            Ok(r) => {
                let _ = ready.send(Ok(()));
                r
            }
            Err(e) => {
                let _ = ready.send(Err(e));
                return Outcome { records: Vec::new(), addrs: Vec::new(), warnings: Vec::new(), interrupted: false };
            }
        };
        if let Err(e) = r.main_loop() {
            r.warnings.push(format!("the workload stopped early: {e}"));
            r.ended.get_or_insert(r.clock.now());
        }
        r.finish()
    }

    fn new(plan: Plan, clock: RealClock, hosts: Vec<HostView>, stop: &OwnedFd) -> Result<Runner, String> {
        let epoll = Epoll::new().map_err(|e| format!("epoll for the workload: {e}"))?;
        let timer = DeadlineTimer::new().map_err(|e| format!("timer for the workload: {e}"))?;
        epoll.add(timer.raw_fd(), libc::EPOLLIN as u32, TOKEN_TIMER).map_err(|e| e.to_string())?;
        epoll.add(stop.as_raw_fd(), libc::EPOLLIN as u32, TOKEN_STOP).map_err(|e| e.to_string())?;
        let conns = plan
            .conns
            .iter()
            .map(|c| Conn {
                entry: c.entry,
                app: App::new(&plan.entries[c.entry].flow),
                sockets: [None, None],
                connected: false,
                pending: [0; 2],
                closing: [false; 2],
                shut: [false; 2],
                eof: [false; 2],
                delivered: [0; 2],
                started_at: None,
                delivered_at_stop: None,
                done_at: None,
                info: None,
                rtt_sum_us: 0.0,
                rtt_count: 0,
                cc: None,
                error: None,
                addrs: None,
            })
            .collect();
        let mut r = Runner {
            default_cc: vec![None; hosts.len()],
            plan,
            clock,
            epoll,
            timer,
            hosts,
            here: None,
            listeners: Vec::new(),
            conns,
            connecting: HashMap::new(),
            timers: BinaryHeap::new(),
            seq: 0,
            queue: VecDeque::new(),
            scratch: Vec::new(),
            done: 0,
            ended: None,
            interrupted: false,
            buf: vec![0; CHUNK],
            // What is written does not matter; HTTP-looking bytes make captures readable.
            zeros: b"pathtwin ".iter().copied().cycle().take(CHUNK).collect(),
            warnings: Vec::new(),
        };
        for h in 0..r.hosts.len() {
            r.enter(h).map_err(|e| format!("entering the namespace of host {}: {e}", r.plan.hosts[h]))?;
            // Read inside the namespace: /proc/sys/net shows the reading thread's namespace.
            r.default_cc[h] = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").ok().map(|c| c.trim().to_string());
        }
        for e in 0..r.plan.entries.len() {
            let entry = &r.plan.entries[e];
            let (server, port) = (entry.server, entry.port);
            r.enter(server).map_err(|err| format!("entering the namespace of host {}: {err}", r.plan.hosts[server]))?;
            let entry = &r.plan.entries[e];
            let l = sock::listen(port, &entry.options, WRITE_AHEAD, BACKLOG)
                .map_err(|err| format!("flow[{e}]: listening on port {port} of host {}: {err}", r.plan.hosts[server]))?;
            r.epoll.add(l.as_raw_fd(), (libc::EPOLLIN | libc::EPOLLET) as u32, token(KIND_LISTENER, e)).map_err(|err| err.to_string())?;
            r.listeners.push(l);
        }
        Ok(r)
    }

    /// Moves the thread into host `h`'s namespace, if it is not there.
    fn enter(&mut self, h: usize) -> io::Result<()> {
        if self.here != Some(h) {
            sock::enter(&self.hosts[h].netns)?;
            self.here = Some(h);
        }
        Ok(())
    }

    fn schedule(&mut self, t: Instant, timer: Timer) {
        self.seq += 1;
        self.timers.push(Due { t, seq: self.seq, timer });
    }

    fn main_loop(&mut self) -> io::Result<()> {
        for c in 0..self.conns.len() {
            let p = &self.plan.conns[c];
            let (start, stop) = (p.start, p.stop);
            self.schedule(start, Timer::Start(c));
            if let Some(s) = stop {
                self.schedule(s, Timer::App(c, Step::Stop));
            }
        }
        let interval = self.plan.sample_interval;
        self.schedule(Instant::ZERO + interval, Timer::Sample);
        self.schedule(self.plan.end, Timer::End);
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
        while self.ended.is_none() {
            let now = self.clock.now();
            while self.ended.is_none() && self.timers.peek().is_some_and(|d| d.t <= now) {
                let due = self.timers.pop().expect("peeked");
                self.on_timer(due.t, due.timer);
                self.run_actions();
            }
            if self.ended.is_some() {
                break;
            }
            self.timer.set(self.timers.peek().map(|d| self.clock.to_mono_ns(d.t)))?;
            let n = self.epoll.wait(&mut events, -1)?;
            for ev in &events[..n] {
                let (tok, flags) = (ev.u64, ev.events);
                match (tok >> 32, (tok & 0xffff_ffff) as usize) {
                    (0, _) if tok == TOKEN_TIMER => self.timer.acknowledge(),
                    (0, _) if tok == TOKEN_STOP => {
                        self.interrupted = true;
                        self.ended = Some(self.clock.now());
                    }
                    (KIND_LISTENER, e) => self.accept(e),
                    (KIND_CLIENT, c) => self.on_socket(c, CLIENT, flags),
                    (KIND_SERVER, c) => self.on_socket(c, SERVER, flags),
                    _ => {}
                }
                self.run_actions();
                if self.ended.is_some() {
                    break;
                }
            }
        }
        Ok(())
    }

    fn on_timer(&mut self, t: Instant, timer: Timer) {
        let now = self.clock.now();
        match timer {
            Timer::Start(c) => self.connect(c, now),
            Timer::App(c, step) => {
                let conn = &mut self.conns[c];
                if matches!(step, Step::Stop) {
                    conn.delivered_at_stop = Some(conn.delivered());
                }
                // A connection that has finished (or failed) has no programs left to wake.
                if conn.done_at.is_none() && conn.started_at.is_some() {
                    let delivered = conn.delivered[step.side()];
                    self.with_app(c, |app, out| {
                        app.on_step(now, step, delivered, out);
                    });
                    // A stop or a toggle may end the stream: close if asked, else write.
                    self.flush(c, CLIENT);
                }
            }
            Timer::Sample => {
                for conn in self.conns.iter_mut().filter(|c| c.connected && c.done_at.is_none()) {
                    conn.sample();
                }
                // The next multiple of the interval, skipping those a late wake-up missed.
                let mut next = t + self.plan.sample_interval;
                while next <= now {
                    next += self.plan.sample_interval;
                }
                if next <= self.plan.end {
                    self.schedule(next, Timer::Sample);
                }
            }
            Timer::End => self.ended = Some(now),
        }
    }

    /// Starts connection `c`: its client socket, in its host, connecting to its server.
    fn connect(&mut self, c: usize, now: Instant) {
        let entry = &self.plan.entries[self.conns[c].entry];
        let (client, server, port, e) = (entry.client, entry.server, entry.port, self.conns[c].entry);
        let to = SocketAddrV4::new(self.hosts[server].ipv4, port);
        let bind = entry.pipe_slot.and_then(|s| pipe_bind(self.hosts[client].first_pipe, s));
        let made = self.enter(client).and_then(|()| sock::connect(to, bind, &self.plan.entries[e].options, WRITE_AHEAD));
        let s = match made.and_then(|s| {
            let local = match s.local_addr()? {
                SocketAddr::V4(a) => a,
                SocketAddr::V6(a) => return Err(io::Error::other(format!("an IPv6 source address {a}"))),
            };
            self.epoll.add(s.as_raw_fd(), (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32, token(KIND_CLIENT, c))?;
            Ok((s, local))
        }) {
            Ok((s, local)) => {
                self.connecting.insert((e, local), c);
                self.conns[c].addrs = Some((local, to));
                s
            }
            Err(err) => return self.fail(c, now, CLIENT, &format!("connect to {to}: {err}")),
        };
        let conn = &mut self.conns[c];
        conn.sockets[CLIENT] = Some(s);
        conn.started_at = Some(now);
        self.with_app(c, |app, out| app.on_start(now, out));
    }

    /// Accepts every pending connection of entry `e`'s listener.
    fn accept(&mut self, e: usize) {
        loop {
            let (s, peer) = match self.listeners[e].accept() {
                Ok((s, SocketAddr::V4(peer))) => (s, peer),
                Ok((_, peer)) => {
                    self.warnings.push(format!("flow[{e}]: a connection from {peer}, which no flow opens; closed"));
                    continue;
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => {
                    // ECONNABORTED and the like: that connection is gone, the listener is not.
                    self.warnings.push(format!("flow[{e}]: accept: {err}"));
                    continue;
                }
            };
            let Some(c) = self.connecting.remove(&(e, peer)) else {
                self.warnings.push(format!("flow[{e}]: a connection from {peer}, which no flow opens; closed"));
                continue;
            };
            let now = self.clock.now();
            let added = s.set_nonblocking(true).and_then(|()| {
                self.epoll.add(s.as_raw_fd(), (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32, token(KIND_SERVER, c))
            });
            if let Err(err) = added {
                self.fail(c, now, SERVER, &format!("accept: {err}"));
                continue;
            }
            if self.plan.entries[e].options.quickack {
                let _ = sock::quickack(s.as_raw_fd());
            }
            self.conns[c].sockets[SERVER] = Some(s);
            let delivered = self.conns[c].delivered[SERVER];
            self.with_app(c, |app, out| app.on_connected(now, SERVER, delivered, out));
            // Data that came with or right after the handshake.
            self.read(c, SERVER);
            self.run_actions();
        }
    }

    fn on_socket(&mut self, c: usize, side: usize, flags: u32) {
        if self.conns[c].done_at.is_some() {
            return;
        }
        let now = self.clock.now();
        if side == CLIENT && !self.conns[c].connected {
            let Some(s) = &self.conns[c].sockets[CLIENT] else { return };
            // How the non-blocking connect ended (`SO_ERROR`).
            match s.take_error() {
                Ok(None) if flags & libc::EPOLLOUT as u32 != 0 => {}
                Ok(None) => return,
                Ok(Some(err)) | Err(err) => return self.fail(c, now, CLIENT, &format!("connect: {err}")),
            }
            let fd = s.as_raw_fd();
            let conn = &mut self.conns[c];
            conn.connected = true;
            conn.cc = sock::congestion_control(fd).ok();
            if self.plan.entries[conn.entry].options.quickack {
                let _ = sock::quickack(fd);
            }
            let delivered = conn.delivered[CLIENT];
            self.with_app(c, |app, out| app.on_connected(now, CLIENT, delivered, out));
            // A streaming client starts writing now: it asks for no action of its own.
            self.flush(c, CLIENT);
        }
        if flags & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0 {
            self.read(c, side);
        }
        if flags & (libc::EPOLLOUT | libc::EPOLLERR) as u32 != 0 {
            self.flush(c, side);
        }
    }

    /// Reads what `side` has received, telling the application after each read.
    fn read(&mut self, c: usize, side: usize) {
        loop {
            let conn = &mut self.conns[c];
            if conn.done_at.is_some() || conn.eof[side] {
                return;
            }
            let Some(s) = conn.sockets[side].as_mut() else { return };
            let got = s.read(&mut self.buf);
            let now = self.clock.now();
            match got {
                Ok(0) => {
                    conn.eof[side] = true;
                    self.with_app(c, |app, out| app.on_peer_closed(side, out));
                    self.check_closed(c, now);
                    return;
                }
                Ok(n) => {
                    conn.delivered[side] += n as u64;
                    if self.plan.entries[conn.entry].options.quickack {
                        let _ = sock::quickack(s.as_raw_fd());
                    }
                    let delivered = conn.delivered[side];
                    self.with_app(c, |app, out| app.on_received(now, side, delivered, out));
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return self.fail(c, now, side, &format!("read: {err}")),
            }
        }
    }

    /// Writes what `side` has to write (its pending bytes, or the client's stream) until the
    /// kernel takes no more; then closes its writing half if asked and all is written.
    fn flush(&mut self, c: usize, side: usize) {
        loop {
            let conn = &mut self.conns[c];
            if conn.done_at.is_some() {
                return;
            }
            let Some(s) = conn.sockets[side].as_mut() else { return };
            let stream = side == CLIENT && conn.pending[side] == 0;
            let want = if stream { conn.app.stream_budget() } else { conn.pending[side] };
            if want == 0 || conn.shut[side] {
                break;
            }
            let n = want.min(CHUNK as u64) as usize;
            match s.write(&self.zeros[..n]) {
                Ok(k) if stream => {
                    let mut out = std::mem::take(&mut self.scratch);
                    conn.app.streamed(k as u64, &mut out);
                    self.queue.extend(out.drain(..).map(|a| (c, a)));
                    self.scratch = out;
                }
                Ok(k) => conn.pending[side] -= k as u64,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => {
                    let now = self.clock.now();
                    return self.fail(c, now, side, &format!("write: {err}"));
                }
            }
        }
        let conn = &mut self.conns[c];
        let idle = conn.pending[side] == 0 && (side != CLIENT || conn.app.stream_budget() == 0);
        if conn.closing[side] && idle && !conn.shut[side] {
            if let Some(s) = &conn.sockets[side] {
                // A peer that reset the connection has shut it already.
                let _ = s.shutdown(Shutdown::Write);
            }
            conn.shut[side] = true;
            let now = self.clock.now();
            self.check_closed(c, now);
        }
    }

    /// Runs `f` on connection `c`'s application and queues the actions it asks for.
    fn with_app(&mut self, c: usize, f: impl FnOnce(&mut App, &mut Vec<Action>)) {
        let mut out = std::mem::take(&mut self.scratch);
        f(&mut self.conns[c].app, &mut out);
        self.queue.extend(out.drain(..).map(|a| (c, a)));
        self.scratch = out;
    }

    /// Carries out the queued actions (which may queue more).
    fn run_actions(&mut self) {
        while let Some((c, a)) = self.queue.pop_front() {
            if self.conns[c].done_at.is_some() {
                continue;
            }
            match a {
                Action::Write { side, bytes } => {
                    self.conns[c].pending[side] += bytes;
                    self.flush(c, side);
                }
                Action::Close { side } => {
                    self.conns[c].closing[side] = true;
                    self.flush(c, side);
                }
                Action::At(t, step) => self.schedule(t, Timer::App(c, step)),
            }
        }
    }

    /// Connection `c` is done once both ends have closed their writing halves and read the
    /// other's end of file (the simulator's "closed at both ends").
    fn check_closed(&mut self, c: usize, now: Instant) {
        let conn = &self.conns[c];
        let closed = |s: usize| conn.shut[s] && conn.eof[s];
        if conn.done_at.is_none() && closed(CLIENT) && closed(SERVER) {
            self.finish_conn(c, now);
        }
    }

    /// Records connection `c`'s end: its client's last `tcp_info`, then closes both ends.
    fn finish_conn(&mut self, c: usize, now: Instant) {
        let conn = &mut self.conns[c];
        conn.sample();
        conn.done_at = Some(now);
        conn.sockets = [None, None];
        self.done += 1;
        if self.plan.until_done && self.done == self.conns.len() {
            self.ended = Some(now);
        }
    }

    /// Connection `c` failed at `side`: it ends there, with the error kept for the warnings.
    fn fail(&mut self, c: usize, now: Instant, side: usize, what: &str) {
        let label = &self.plan.conns[c].label;
        let end = if side == CLIENT { "client" } else { "server" };
        self.conns[c].error = Some(format!("flow {label}: {end} {what}"));
        if self.conns[c].done_at.is_none() {
            self.finish_conn(c, now);
        }
    }

    /// The flows' records at the end of the run; every socket is closed.
    fn finish(mut self) -> Outcome {
        let run_end = self.ended.unwrap_or_else(|| self.clock.now());
        let mut records = Vec::with_capacity(self.conns.len());
        for (i, conn) in self.conns.iter_mut().enumerate() {
            if conn.done_at.is_none() {
                conn.sample();
            }
            conn.sockets = [None, None];
            let p = &self.plan.conns[i];
            let entry = &self.plan.entries[p.entry];
            let start = conn.started_at.unwrap_or(p.start);
            let end = p.stop.map_or(run_end, |s| s.min(run_end));
            let delivered = conn.delivered_at_stop.unwrap_or_else(|| conn.delivered());
            let info = conn.info.clone().unwrap_or_default();
            let times = conn.app.response_times();
            let completed = if conn.app.is_replay() { conn.done_at.filter(|_| conn.error.is_none()) } else { conn.app.completed_at() };
            let cc = conn.cc.clone().or_else(|| entry.options.cc.clone()).or_else(|| self.default_cc[entry.client].clone()).unwrap_or_default();
            records.push(FlowRecord {
                flow: i,
                label: p.label.clone(),
                entry: p.entry,
                copy: p.copy,
                src: entry.flow.from.clone(),
                dst: entry.flow.to.clone(),
                app: entry.flow.app.name(),
                cc,
                start_s: start.as_secs_f64(),
                end_s: end.as_secs_f64(),
                bytes_delivered: delivered,
                goodput_bps: results::goodput_bps(delivered, start, end, completed),
                bytes_sent: info.bytes_sent.unwrap_or(0),
                segments_sent: info.segs_out.unwrap_or(0).into(),
                retransmits: info.total_retrans.unwrap_or(0).into(),
                timeouts: info.total_rto.unwrap_or(0).into(),
                // ~0U: no RTT sample yet.
                rtt_min_ms: info.min_rtt_us.filter(|&r| r != u32::MAX).map_or(f64::NAN, |r| r as f64 / 1e3),
                rtt_mean_ms: if conn.rtt_count > 0 { conn.rtt_sum_us / conn.rtt_count as f64 / 1e3 } else { f64::NAN },
                completion_s: completed.map_or(f64::NAN, |t| t.saturating_since(start).as_secs_f64()),
                responses: times.len() as u64,
                response_time_mean_s: if times.is_empty() { f64::NAN } else { times.iter().sum::<f64>() / times.len() as f64 },
            });
            if let Some(e) = conn.error.take() {
                self.warnings.push(e);
            }
        }
        let addrs = self.conns.iter().map(|c| c.addrs).collect();
        Outcome { records, addrs, warnings: self.warnings, interrupted: self.interrupted }
    }
}
