//! Applications on simulated connections: bulk, on/off, request/response and replay.
//!
//! Applications only decide *when to write and close*; the TCP endpoints decide when bytes
//! move. A bulk writer keeps at least two congestion windows (never less than 64 KB) written
//! ahead of the acknowledged data, so it is never application-limited yet stops promptly: at
//! `stop` it closes, and only what it had written (≤ 2 cwnd) still drains, as with iperf's
//! time limit. On/off does the same during `on` periods and writes nothing during `off`.
//! Request/response: the client writes `request` bytes; once the server has read a whole
//! request it waits `server_delay` and writes `response` bytes; once the client has read the
//! whole response it waits `think` and sends the next request, `requests` times in all
//! (unlimited without it). Replay (`app = "replay"`) re-enacts a traced connection's
//! exchanges, Monkey Do's way; its sequencing is [`pathtwin_core::replay`]'s.

use pathtwin_core::config::{AppKind, FlowConfig};
use pathtwin_core::time::{Duration, Instant};
use pathtwin_core::replay::Replay;

/// Bytes a bulk writer keeps ahead of the acknowledged data, at least.
pub const MIN_WRITE_AHEAD: u64 = 64 * 1024;

#[derive(Clone, Debug)]
pub enum App {
    Bulk { limit: Option<u64>, written: u64, writing: bool },
    OnOff { on: Duration, off: Duration, written: u64, writing: bool },
    ReqResp(ReqResp),
    /// Boxed: it holds the connection's exchange list.
    Replay(Box<Replay>),
}

#[derive(Clone, Debug)]
pub struct ReqResp {
    pub request: u64,
    pub response: u64,
    pub server_delay: Duration,
    pub think: Duration,
    /// Requests still to send after the current one (`None`: unlimited).
    pub remaining: Option<u32>,
    /// Requests whose whole request the server has read.
    pub requests_read: u64,
    /// Responses whose whole response the client has read.
    pub responses_read: u64,
    pub request_sent_at: Instant,
    /// Completed response times in seconds (request write to last response byte read).
    pub response_times: Vec<f64>,
}

impl App {
    pub fn from_config(f: &FlowConfig) -> App {
        match f.app {
            AppKind::Bulk => App::Bulk { limit: f.bytes.map(|b| b.bytes()), written: 0, writing: false },
            AppKind::Onoff => App::OnOff {
                on: f.on.expect("validated"),
                off: f.off.expect("validated"),
                written: 0,
                writing: false,
            },
            AppKind::Reqresp => App::ReqResp(ReqResp {
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
            AppKind::Replay => App::Replay(Box::new(Replay::new(f.exchanges.as_deref().expect("validated")))),
        }
    }

    /// For a writer that streams: how many more bytes to write so that `written − acked`
    /// stays at least 2·max(cwnd, 64 KB). Zero when not writing or done.
    pub fn top_up(&mut self, acked: u64, cwnd: u64) -> u64 {
        let (written, writing, limit) = match self {
            App::Bulk { written, writing, limit } => (written, *writing, *limit),
            App::OnOff { written, writing, .. } => (written, *writing, None),
            App::ReqResp(_) | App::Replay(_) => return 0,
        };
        if !writing {
            return 0;
        }
        let target = acked + 2 * cwnd.max(MIN_WRITE_AHEAD);
        let mut more = target.saturating_sub(*written);
        if let Some(l) = limit {
            more = more.min(l.saturating_sub(*written));
        }
        *written += more;
        more
    }
}
