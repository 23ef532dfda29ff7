//! The applications of the `[[flow]]` workload, sans-IO, for both engines: what a
//! connection's two programs write, when they close and when they wake, decided from what
//! their ends delivered. An engine owns the connection (the simulator's TCP endpoints, the
//! emulator's kernel sockets) and the clock, tells the application what happened
//! (`on_start`, `on_connected`, `on_received`, `on_peer_closed`, a due [`Step`]) and carries
//! out the [`Action`]s it answers with, in their order. The rules, so that a `[[flow]]`
//! means one thing in both engines:
//! - **bulk** writes from the moment the handshake completes, `bytes` in all and then
//!   closes (FIN after the last byte), or without `bytes` until `stop` (then closes) or the
//!   end of the run; a sized transfer is complete when the server has read it whole;
//! - **on/off** writes as bulk during `on`, nothing during `off`, the first `on` period
//!   starting at the flow's start (the handshake inside it), and closes at `stop`;
//! - **request/response**: the client writes `request` bytes once connected; for every whole
//!   request it has read the server waits `server_delay` and writes `response` bytes; for
//!   every whole response read, the client records the time since it wrote the request,
//!   then waits `think` and writes the next, `requests` times in all (unlimited without),
//!   closing after the last or once `stop` has passed;
//! - **replay** is [`crate::replay`]'s sequencing;
//! - in every application but replay the server closes once the client has (end of file).
//!
//! The engine hands the application [`Step::Stop`] at the flow's `stop`. What stays the
//! engine's is how a streaming client's "writing" becomes bytes: the application says how
//! much it may still write ([`App::stream_budget`]) and is told what was written
//! ([`App::streamed`]). The simulator keeps `2·max(cwnd, MIN_WRITE_AHEAD)` written ahead of
//! the acknowledged data; the emulator writes whenever the kernel takes more, and the
//! socket's `TCP_NOTSENT_LOWAT` (at [`MIN_WRITE_AHEAD`]) keeps the unsent part small. Either
//! way a stream's unsent data is bounded, so that stopping (or an `off` period) leaves
//! little more than a window to drain.

use crate::config::{AppKind, FlowConfig};
use crate::replay::{Replay, ReplayStep, Step as ReplayAction, CLIENT, SERVER};
use crate::time::{Duration, Instant};

/// Bytes a streaming client keeps written ahead, at least: in the simulator of the
/// acknowledged data (with twice the congestion window when larger), in the emulator of
/// the data sent (`TCP_NOTSENT_LOWAT`).
pub const MIN_WRITE_AHEAD: u64 = 64 * 1024;

/// What the application asks its engine to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The program at `side` writes `bytes` more bytes.
    Write { side: usize, bytes: u64 },
    /// The program at `side` closes its writing half once it has written everything.
    Close { side: usize },
    /// Hand `step` back to the application at this time ([`App::on_step`]).
    At(Instant, Step),
}

/// Wake-ups an application schedules for itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The flow's `stop`.
    Stop,
    /// An on/off source's period ends.
    Toggle,
    /// Request/response: the think time is over.
    NextRequest,
    /// Request/response: the server delay is over.
    Respond,
    Replay(ReplayStep),
}

impl Step {
    /// Which side's delivered bytes the step reads.
    pub fn side(self) -> usize {
        match self {
            Step::Respond => SERVER,
            Step::Replay(r) => Replay::side_of(r),
            Step::Stop | Step::Toggle | Step::NextRequest => CLIENT,
        }
    }
}

#[derive(Clone, Debug)]
enum Kind {
    Bulk { limit: Option<u64>, written: u64, writing: bool },
    OnOff { on: Duration, off: Duration, written: u64, writing: bool },
    ReqResp(ReqResp),
    Replay(Box<Replay>),
}

#[derive(Clone, Debug)]
struct ReqResp {
    request: u64,
    response: u64,
    server_delay: Duration,
    think: Duration,
    /// Requests still to send after the current one (`None`: unlimited).
    remaining: Option<u32>,
    requests_read: u64,
    responses_read: u64,
    request_sent_at: Instant,
    response_times: Vec<f64>,
}

/// One connection's application.
#[derive(Clone, Debug)]
pub struct App {
    kind: Kind,
    stop: Option<Instant>,
    /// When a sized bulk transfer was read whole by the server.
    completed_at: Option<Instant>,
}

impl App {
    pub fn new(f: &FlowConfig) -> App {
        let kind = match f.app {
            AppKind::Bulk => Kind::Bulk { limit: f.bytes.map(|b| b.bytes()), written: 0, writing: false },
            AppKind::Onoff => Kind::OnOff { on: f.on.expect("validated"), off: f.off.expect("validated"), written: 0, writing: false },
            AppKind::Reqresp => Kind::ReqResp(ReqResp {
                request: f.request.expect("validated").bytes().max(1),
                response: f.response.expect("validated").bytes().max(1),
                server_delay: f.server_delay.unwrap_or(Duration::ZERO),
                think: f.think.unwrap_or(Duration::ZERO),
                remaining: f.requests.map(|r| r.saturating_sub(1)),
                requests_read: 0,
                responses_read: 0,
                request_sent_at: Instant::ZERO,
                response_times: Vec::new(),
            }),
            AppKind::Replay => Kind::Replay(Box::new(Replay::new(f.exchanges.as_deref().expect("validated")))),
        };
        App { kind, stop: f.stop.map(|s| Instant::ZERO + s), completed_at: None }
    }

    /// Whether the client streams (bulk, on/off) rather than writes set amounts.
    pub fn is_stream(&self) -> bool {
        matches!(self.kind, Kind::Bulk { .. } | Kind::OnOff { .. })
    }

    /// The flow's start: the client connects.
    pub fn on_start(&mut self, now: Instant, out: &mut Vec<Action>) {
        if let Kind::OnOff { on, .. } = self.kind {
            out.push(Action::At(now + on, Step::Toggle));
        }
    }

    /// The handshake completed at `side` (the client's `connect`, the server's `accept`);
    /// `delivered` is what that side has read so far.
    pub fn on_connected(&mut self, now: Instant, side: usize, delivered: u64, out: &mut Vec<Action>) {
        match &mut self.kind {
            Kind::Replay(r) => {
                let mut steps = Vec::new();
                r.on_connected(now, side, delivered, &mut steps);
                push_replay(steps, out);
            }
            _ if side == SERVER => {}
            Kind::Bulk { writing, .. } | Kind::OnOff { writing, .. } => *writing = true,
            Kind::ReqResp(r) => {
                r.request_sent_at = now;
                out.push(Action::Write { side: CLIENT, bytes: r.request });
            }
        }
    }

    /// `side` has now read `delivered` bytes in all.
    pub fn on_received(&mut self, now: Instant, side: usize, delivered: u64, out: &mut Vec<Action>) {
        let stopped = self.stop.is_some_and(|s| now >= s);
        match &mut self.kind {
            Kind::Bulk { limit: Some(l), .. } if side == SERVER && delivered >= *l && self.completed_at.is_none() => {
                self.completed_at = Some(now);
            }
            Kind::ReqResp(r) if side == SERVER => {
                while delivered >= (r.requests_read + 1) * r.request {
                    r.requests_read += 1;
                    out.push(Action::At(now + r.server_delay, Step::Respond));
                }
            }
            Kind::ReqResp(r) if side == CLIENT => {
                while delivered >= (r.responses_read + 1) * r.response {
                    r.responses_read += 1;
                    r.response_times.push((now - r.request_sent_at).as_secs_f64());
                    let more = match &mut r.remaining {
                        None => true,
                        Some(0) => false,
                        Some(n) => {
                            *n -= 1;
                            true
                        }
                    };
                    if more && !stopped {
                        out.push(Action::At(now + r.think, Step::NextRequest));
                    } else {
                        out.push(Action::Close { side: CLIENT });
                    }
                }
            }
            Kind::Replay(r) => {
                let mut steps = Vec::new();
                r.on_received(now, side, delivered, &mut steps);
                push_replay(steps, out);
            }
            _ => {}
        }
    }

    /// The peer of `side` closed its writing half (`side` read end of file).
    pub fn on_peer_closed(&mut self, side: usize, out: &mut Vec<Action>) {
        match &mut self.kind {
            Kind::Replay(r) => {
                let mut steps = Vec::new();
                r.on_peer_closed(side, &mut steps);
                push_replay(steps, out);
            }
            _ if side == SERVER => out.push(Action::Close { side: SERVER }),
            _ => {}
        }
    }

    /// A scheduled step is due; `delivered` is what [`Step::side`] has read so far. Returns
    /// false for a step the application ignores because it is over: an on/off period that
    /// ends once `stop` has passed (nothing changed, the engine need not look at the
    /// connection).
    pub fn on_step(&mut self, now: Instant, step: Step, delivered: u64, out: &mut Vec<Action>) -> bool {
        let stopped = self.stop.is_some_and(|s| now >= s);
        match (&mut self.kind, step) {
            (Kind::Bulk { writing, .. } | Kind::OnOff { writing, .. }, Step::Stop) => {
                *writing = false;
                out.push(Action::Close { side: CLIENT });
            }
            (Kind::ReqResp(r), Step::Stop) => r.remaining = Some(0),
            (Kind::OnOff { on, off, writing, .. }, Step::Toggle) if !stopped => {
                *writing = !*writing;
                let next = if *writing { *on } else { *off };
                out.push(Action::At(now + next, Step::Toggle));
            }
            (Kind::OnOff { .. }, Step::Toggle) => return false,
            (Kind::ReqResp(r), Step::NextRequest) => {
                r.request_sent_at = now;
                out.push(Action::Write { side: CLIENT, bytes: r.request });
            }
            (Kind::ReqResp(r), Step::Respond) => out.push(Action::Write { side: SERVER, bytes: r.response }),
            (Kind::Replay(r), Step::Replay(s)) => {
                let mut steps = Vec::new();
                r.on_step(now, s, delivered, &mut steps);
                push_replay(steps, out);
            }
            _ => {}
        }
        true
    }

    /// How many more bytes a streaming client may write now (0 when not writing or done).
    pub fn stream_budget(&self) -> u64 {
        match self.kind {
            Kind::Bulk { writing: true, limit, written } => limit.map_or(u64::MAX, |l| l.saturating_sub(written)),
            Kind::OnOff { writing: true, .. } => u64::MAX,
            _ => 0,
        }
    }

    /// The client wrote `n` bytes of its stream; a sized transfer closes after its last.
    pub fn streamed(&mut self, n: u64, out: &mut Vec<Action>) {
        match &mut self.kind {
            Kind::Bulk { limit, written, .. } => {
                *written += n;
                if limit.is_some_and(|l| *written >= l) {
                    out.push(Action::Close { side: CLIENT });
                }
            }
            Kind::OnOff { written, .. } => *written += n,
            Kind::ReqResp(_) | Kind::Replay(_) => {}
        }
    }

    /// Bytes the client has written of its stream so far (bulk, on/off).
    pub fn stream_written(&self) -> u64 {
        match self.kind {
            Kind::Bulk { written, .. } | Kind::OnOff { written, .. } => written,
            Kind::ReqResp(_) | Kind::Replay(_) => 0,
        }
    }

    /// Whether the server's bytes count alone (`false`: both ends', as for request/response
    /// and replay, whose traffic goes both ways).
    pub fn counts_server_only(&self) -> bool {
        self.is_stream()
    }

    pub fn completed_at(&self) -> Option<Instant> {
        self.completed_at
    }

    /// Completed response times in seconds (request/response, replay).
    pub fn response_times(&self) -> &[f64] {
        match &self.kind {
            Kind::ReqResp(r) => &r.response_times,
            Kind::Replay(r) => &r.response_times,
            _ => &[],
        }
    }

    pub fn is_replay(&self) -> bool {
        matches!(self.kind, Kind::Replay(_))
    }
}

fn push_replay(steps: Vec<ReplayAction>, out: &mut Vec<Action>) {
    out.extend(steps.into_iter().map(|s| match s {
        ReplayAction::Write { side, bytes } => Action::Write { side, bytes },
        ReplayAction::Close { side } => Action::Close { side },
        ReplayAction::At(t, step) => Action::At(t, Step::Replay(step)),
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn app(flow: &str) -> App {
        let cfg = Config::from_toml(&format!("hosts = [\"a\", \"b\"]\n[[flow]]\nfrom = \"a\"\nto = \"b\"\n{flow}"), "t.toml").unwrap();
        App::new(&cfg.flows[0])
    }

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn a_sized_bulk_transfer_streams_its_bytes_closes_and_completes_when_read_whole() {
        let mut a = app("bytes = \"3000B\"");
        let mut out = Vec::new();
        assert_eq!(a.stream_budget(), 0, "nothing before the handshake");
        a.on_connected(at(10), CLIENT, 0, &mut out);
        assert_eq!(a.stream_budget(), 3000);
        a.streamed(2000, &mut out);
        assert!(out.is_empty());
        a.streamed(1000, &mut out);
        assert_eq!((std::mem::take(&mut out), a.stream_budget()), (vec![Action::Close { side: CLIENT }], 0));
        a.on_received(at(40), SERVER, 2999, &mut out);
        assert_eq!(a.completed_at(), None);
        a.on_received(at(45), SERVER, 3000, &mut out);
        assert_eq!(a.completed_at(), Some(at(45)));
        a.on_peer_closed(SERVER, &mut out);
        assert_eq!(out, [Action::Close { side: SERVER }], "the server closes after the client");
    }

    #[test]
    fn an_onoff_source_writes_only_in_its_on_periods_and_stops_at_stop() {
        let mut a = app("app = \"onoff\"\non = \"2s\"\noff = \"1s\"\nstop = \"10s\"");
        let mut out = Vec::new();
        a.on_start(at(0), &mut out);
        assert_eq!(std::mem::take(&mut out), [Action::At(at(2000), Step::Toggle)]);
        a.on_connected(at(40), CLIENT, 0, &mut out);
        assert_eq!(a.stream_budget(), u64::MAX);
        a.streamed(5000, &mut out);
        a.streamed(1000, &mut out);
        assert_eq!((a.stream_written(), a.stream_budget()), (6000, u64::MAX), "an on/off stream counts what it wrote, unbounded");
        assert!(out.is_empty());
        a.on_step(at(2000), Step::Toggle, 0, &mut out);
        assert_eq!((std::mem::take(&mut out), a.stream_budget()), (vec![Action::At(at(3000), Step::Toggle)], 0));
        a.on_step(at(3000), Step::Toggle, 0, &mut out);
        assert_eq!((std::mem::take(&mut out), a.stream_budget()), (vec![Action::At(at(5000), Step::Toggle)], u64::MAX));
        a.on_step(at(10_000), Step::Stop, 0, &mut out);
        assert_eq!((std::mem::take(&mut out), a.stream_budget()), (vec![Action::Close { side: CLIENT }], 0));
        assert!(!a.on_step(at(11_000), Step::Toggle, 0, &mut out), "a period ending after stop is over");
        assert!(out.is_empty(), "no toggling after stop");
    }

    #[test]
    fn request_response_times_each_exchange_and_closes_after_the_last() {
        let mut a = app("app = \"reqresp\"\nrequest = \"100B\"\nresponse = \"1000B\"\nserver_delay = \"20ms\"\nthink = \"50ms\"\nrequests = 2");
        let mut out = Vec::new();
        a.on_connected(at(10), CLIENT, 0, &mut out);
        assert_eq!(std::mem::take(&mut out), [Action::Write { side: CLIENT, bytes: 100 }]);
        a.on_received(at(15), SERVER, 100, &mut out);
        assert_eq!(std::mem::take(&mut out), [Action::At(at(35), Step::Respond)]);
        a.on_step(at(35), Step::Respond, 100, &mut out);
        assert_eq!(std::mem::take(&mut out), [Action::Write { side: SERVER, bytes: 1000 }]);
        a.on_received(at(45), CLIENT, 1000, &mut out);
        assert_eq!(std::mem::take(&mut out), [Action::At(at(95), Step::NextRequest)]);
        a.on_step(at(95), Step::NextRequest, 1000, &mut out);
        assert_eq!(std::mem::take(&mut out), [Action::Write { side: CLIENT, bytes: 100 }]);
        a.on_received(at(150), CLIENT, 2000, &mut out);
        assert_eq!(out, [Action::Close { side: CLIENT }]);
        assert_eq!(a.response_times(), [0.035, 0.055]);
    }
}
