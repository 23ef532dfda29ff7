//! The replay application (`app = "replay"`): Monkey Do's client and server emulators
//! (Cheng et al., "Monkey See, Monkey Do", USENIX ATC 2004, §4.2–4.3, Fig. 4) re-enacting
//! one traced connection on a simulated TCP connection.
//!
//! It reproduces `pathtwin.replay.agent` step for step, and both engines run it (the
//! simulator on its endpoints, the emulator's workload runner on kernel sockets), so that a
//! workload replayed in the simulator and in the emulator differ only in whose TCP carries
//! it:
//! - client: connects at the flow's `start`; for each exchange waits its `think` (counted
//!   from the end of the handshake for the first, from reading the whole previous response
//!   otherwise), writes the request and reads the whole response; after the last one it
//!   closes when the server's FIN arrives (the agent's linger ends the same way);
//! - server: for each exchange reads the whole request, waits `server_delay`, writes the
//!   response's first part (`header_bytes`), waits `query_delay`, writes the rest; after
//!   the last exchange it closes, as an HTTP/1.0 or keep-alive-timeout server does.
//!
//! This module owns only that sequencing (sans-IO): it is told what the endpoints delivered
//! and answers with [`Step`]s (write, close, wake me at). The engine owns the endpoints and
//! the clock; the per-connection TCP settings (MSS, window, ACK policy) are the flow's
//! `tcp` table, which the Python side fills from the replay database.

use crate::config::ExchangeSpec;
use crate::time::{Duration, Instant};

/// Client and server side indices, as both engines number a connection's ends.
pub const CLIENT: usize = 0;
pub const SERVER: usize = 1;

/// The steps a replay schedules for itself ([`Step::At`]) and is handed back when due
/// ([`Replay::on_step`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayStep {
    /// The client's think time is over: it writes the next request.
    NextRequest,
    /// The server delay is over: the server writes the response (or its first part).
    Respond,
    /// The query delay is over: the server writes the rest of the response.
    RespondRest,
}

/// What the replay asks the simulation to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The endpoint of `side` writes `bytes` more bytes.
    Write { side: usize, bytes: u64 },
    /// The endpoint of `side` closes (FIN after what it wrote).
    Close { side: usize },
    /// Deliver `step` to the replay at this time ([`Replay::on_step`]).
    At(Instant, ReplayStep),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClientPhase {
    Connecting,
    /// Between exchanges: about to think or write.
    Idle,
    Thinking,
    /// Request written, response not yet read in full.
    Waiting,
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ServerPhase {
    /// Waiting for the whole request of the current exchange.
    Reading,
    /// Request read; the server delay runs.
    Delaying,
    /// First part written; the query delay runs.
    Querying,
    Done,
}

#[derive(Clone, Debug)]
struct Exchange {
    request: u64,
    response: u64,
    first_write: u64,
    server_delay: Duration,
    query_delay: Duration,
    think: Duration,
}

#[derive(Clone, Debug)]
pub struct Replay {
    exchanges: Vec<Exchange>,
    /// Request (response) bytes up to and including exchange k: the byte count at which its
    /// request (response) has been read whole.
    request_end: Vec<u64>,
    response_end: Vec<u64>,
    /// The exchange each side is at.
    client: usize,
    client_phase: ClientPhase,
    server: usize,
    server_phase: ServerPhase,
    request_written_at: Instant,
    /// Completed response times in seconds: request written to whole response read.
    pub response_times: Vec<f64>,
}

impl Replay {
    pub fn new(spec: &[ExchangeSpec]) -> Replay {
        let exchanges: Vec<Exchange> = spec
            .iter()
            .map(|x| Exchange {
                request: x.request_bytes(),
                response: x.response_bytes(),
                first_write: x.first_write(),
                server_delay: Duration::from_secs_f64(x.server_delay_s()),
                query_delay: Duration::from_secs_f64(x.query_delay_s()),
                think: Duration::from_secs_f64(x.think_s()),
            })
            .collect();
        let running = |f: fn(&Exchange) -> u64| {
            let mut sum = 0u64;
            exchanges.iter().map(|x| {
                sum = sum.saturating_add(f(x));
                sum
            }).collect::<Vec<_>>()
        };
        let (request_end, response_end) = (running(|x| x.request), running(|x| x.response));
        Replay {
            exchanges,
            request_end,
            response_end,
            client: 0,
            client_phase: ClientPhase::Connecting,
            server: 0,
            server_phase: ServerPhase::Reading,
            request_written_at: Instant::ZERO,
            response_times: Vec::new(),
        }
    }

    /// The handshake completed at `side`; `delivered` is what that side has read so far.
    pub fn on_connected(&mut self, now: Instant, side: usize, delivered: u64, out: &mut Vec<Step>) {
        if side == CLIENT {
            if self.client_phase == ClientPhase::Connecting {
                self.client_phase = ClientPhase::Idle;
            }
            self.client_progress(now, delivered, out);
        } else {
            // An exchange without a request (a server push) starts at once.
            self.server_progress(now, delivered, out);
        }
    }

    /// `side` has now read `delivered` bytes in all.
    pub fn on_received(&mut self, now: Instant, side: usize, delivered: u64, out: &mut Vec<Step>) {
        if side == CLIENT {
            self.client_progress(now, delivered, out);
        } else {
            self.server_progress(now, delivered, out);
        }
    }

    /// The peer of `side` closed. The client closes in turn (after its last response, or
    /// on a server that gave up, as the agent's read of an empty chunk ends it); the server
    /// has closed already or closes after its writes.
    pub fn on_peer_closed(&mut self, side: usize, out: &mut Vec<Step>) {
        if side == CLIENT {
            self.client_phase = ClientPhase::Done;
            out.push(Step::Close { side: CLIENT });
        }
    }

    /// A step scheduled through [`Step::At`] is due; `delivered` is what the step's side has
    /// read so far.
    pub fn on_step(&mut self, now: Instant, step: ReplayStep, delivered: u64, out: &mut Vec<Step>) {
        match step {
            ReplayStep::NextRequest if self.client_phase == ClientPhase::Thinking => {
                self.write_request(now, out);
                self.client_progress(now, delivered, out);
            }
            ReplayStep::Respond if self.server_phase == ServerPhase::Delaying => {
                let x = &self.exchanges[self.server];
                if x.first_write > 0 {
                    out.push(Step::Write { side: SERVER, bytes: x.first_write });
                }
                if x.first_write < x.response {
                    self.server_phase = ServerPhase::Querying;
                    out.push(Step::At(now + x.query_delay, ReplayStep::RespondRest));
                } else {
                    self.finish_exchange(now, delivered, out);
                }
            }
            ReplayStep::RespondRest if self.server_phase == ServerPhase::Querying => {
                let x = &self.exchanges[self.server];
                out.push(Step::Write { side: SERVER, bytes: x.response - x.first_write });
                self.finish_exchange(now, delivered, out);
            }
            _ => {}
        }
    }

    /// Which side a scheduled step belongs to.
    pub fn side_of(step: ReplayStep) -> usize {
        match step {
            ReplayStep::Respond | ReplayStep::RespondRest => SERVER,
            _ => CLIENT,
        }
    }

    fn client_progress(&mut self, now: Instant, delivered: u64, out: &mut Vec<Step>) {
        loop {
            match self.client_phase {
                ClientPhase::Idle if self.client == self.exchanges.len() => {
                    // Everything read: the server's FIN ends the connection.
                    self.client_phase = ClientPhase::Done;
                    return;
                }
                ClientPhase::Idle => {
                    let think = self.exchanges[self.client].think;
                    if think > Duration::ZERO {
                        self.client_phase = ClientPhase::Thinking;
                        out.push(Step::At(now + think, ReplayStep::NextRequest));
                        return;
                    }
                    self.write_request(now, out);
                }
                ClientPhase::Waiting if delivered >= self.response_end[self.client] => {
                    self.response_times.push((now - self.request_written_at).as_secs_f64());
                    self.client += 1;
                    self.client_phase = ClientPhase::Idle;
                }
                _ => return,
            }
        }
    }

    fn write_request(&mut self, now: Instant, out: &mut Vec<Step>) {
        let request = self.exchanges[self.client].request;
        self.client_phase = ClientPhase::Waiting;
        self.request_written_at = now;
        if request > 0 {
            out.push(Step::Write { side: CLIENT, bytes: request });
        }
    }

    fn server_progress(&mut self, now: Instant, delivered: u64, out: &mut Vec<Step>) {
        if self.server_phase != ServerPhase::Reading {
            return;
        }
        if self.server == self.exchanges.len() {
            self.server_phase = ServerPhase::Done;
            out.push(Step::Close { side: SERVER });
        } else if delivered >= self.request_end[self.server] {
            self.server_phase = ServerPhase::Delaying;
            out.push(Step::At(now + self.exchanges[self.server].server_delay, ReplayStep::Respond));
        }
    }

    fn finish_exchange(&mut self, now: Instant, delivered: u64, out: &mut Vec<Step>) {
        self.server += 1;
        self.server_phase = ServerPhase::Reading;
        self.server_progress(now, delivered, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    fn replay(x: &[ExchangeSpec]) -> (Replay, Vec<Step>) {
        (Replay::new(x), Vec::new())
    }

    #[test]
    fn server_splits_the_response_around_the_query_delay() {
        let (mut r, mut out) = replay(&[ExchangeSpec(300, 5000, 1200, 0.010, 0.100, 0.0)]);
        r.on_connected(at(0), SERVER, 0, &mut out);
        assert!(out.is_empty(), "no request read yet");
        r.on_received(at(50), SERVER, 300, &mut out);
        assert_eq!(std::mem::take(&mut out), [Step::At(at(60), ReplayStep::Respond)]);
        r.on_step(at(60), ReplayStep::Respond, 300, &mut out);
        assert_eq!(std::mem::take(&mut out), [Step::Write { side: SERVER, bytes: 1200 }, Step::At(at(160), ReplayStep::RespondRest)]);
        r.on_step(at(160), ReplayStep::RespondRest, 300, &mut out);
        assert_eq!(out, [Step::Write { side: SERVER, bytes: 3800 }, Step::Close { side: SERVER }]);
    }

    #[test]
    fn client_thinks_after_each_response_and_times_it() {
        let (mut r, mut out) = replay(&[ExchangeSpec(100, 1000, -1, 0.0, 0.0, 0.0), ExchangeSpec(200, 2000, -1, 0.0, 0.0, 0.5)]);
        r.on_connected(at(10), CLIENT, 0, &mut out);
        assert_eq!(std::mem::take(&mut out), [Step::Write { side: CLIENT, bytes: 100 }]);
        r.on_received(at(40), CLIENT, 999, &mut out);
        assert!(out.is_empty(), "one byte short");
        r.on_received(at(45), CLIENT, 1000, &mut out);
        assert_eq!(std::mem::take(&mut out), [Step::At(at(545), ReplayStep::NextRequest)]);
        r.on_step(at(545), ReplayStep::NextRequest, 1000, &mut out);
        assert_eq!(std::mem::take(&mut out), [Step::Write { side: CLIENT, bytes: 200 }]);
        r.on_received(at(600), CLIENT, 3000, &mut out);
        assert!(out.is_empty(), "the client waits for the server's FIN");
        r.on_peer_closed(CLIENT, &mut out);
        assert_eq!(out, [Step::Close { side: CLIENT }]);
        assert_eq!(r.response_times, [0.035, 0.055]);
    }

    #[test]
    fn server_answers_a_request_that_arrived_during_the_previous_response() {
        let (mut r, mut out) = replay(&[ExchangeSpec(100, 1000, -1, 0.0, 0.0, 0.0), ExchangeSpec(100, 1000, -1, 0.002, 0.0, 0.0)]);
        r.on_received(at(0), SERVER, 100, &mut out);
        // Both requests are in before the first response is written (a pipelining client).
        r.on_received(at(1), SERVER, 200, &mut out);
        assert_eq!(std::mem::take(&mut out), [Step::At(at(0), ReplayStep::Respond)]);
        r.on_step(at(1), ReplayStep::Respond, 200, &mut out);
        assert_eq!(std::mem::take(&mut out), [Step::Write { side: SERVER, bytes: 1000 }, Step::At(at(3), ReplayStep::Respond)]);
    }

    #[test]
    fn header_split_of_none_or_the_whole_response_writes_once() {
        for header in [-1, 0, 1000, 5000] {
            let (mut r, mut out) = replay(&[ExchangeSpec(1, 1000, header, 0.0, 0.3, 0.0)]);
            r.on_received(at(0), SERVER, 1, &mut out);
            r.on_step(at(0), ReplayStep::Respond, 1, &mut out);
            assert_eq!(out[1..], [Step::Write { side: SERVER, bytes: 1000 }, Step::Close { side: SERVER }], "header {header}");
        }
    }
}
