//! `[[probe]]` series in the simulator: a datagram from one host to another every interval,
//! echoed at once by the other, with every probe's send, arrival and echo time kept for the
//! `probes` table ([`pathtwin_core::results::PROBES`]).
//!
//! What `pathtwin measure` sends between real and emulated hosts (its UDP probes and echo
//! server, `measure/endpoints.py`), so that a measurement of a simulated network meets the
//! same packets: 92-byte probes and 64-byte echoes by default, each crossing the path's
//! elements as any packet does (queues, placeholder cross traffic, loss). The echo leaves the
//! instant the probe arrives: a real echo server adds its scheduling delay, which the
//! measurement's minimum RTT is meant to not see.
//!
//! A series travels as "connection" `first + p` of the driver's routes (route `2(first + p)`
//! out, `2(first + p) + 1` back), numbered after the TCP connections; its datagrams carry no
//! TCP segment ([`SimPacket::datagram`]) and are not written to captures.

use crate::packet::SimPacket;
use pathtwin_core::config::ProbeConfig;
use pathtwin_core::results::PROBES;
use pathtwin_core::table::{Cell, Table};
use pathtwin_core::time::{Duration, Instant};

/// One `[[probe]]` entry as it runs.
struct Series {
    hosts: [u32; 2],
    names: [String; 2],
    size: u32,
    echo_size: u32,
    interval: Duration,
    /// No probe leaves at or after this time (the entry's `stop`, or the run's end).
    stop: Instant,
    sent: Vec<Instant>,
    arrived: Vec<Option<Instant>>,
    echoed: Vec<Option<Instant>>,
}

/// Every `[[probe]]` series of a simulation.
pub struct Probes {
    series: Vec<Series>,
    /// The connection number of series 0.
    first: u32,
}

impl Probes {
    /// The series of `entries`, the first numbered `first`; `host_id` maps a (validated) host
    /// name to its index; `end` is the run's end. Returns them with each series' first probe
    /// time (none for a series that starts after the end).
    pub fn new(entries: &[ProbeConfig], host_id: impl Fn(&str) -> u32, first: u32, end: Instant) -> (Probes, Vec<Option<Instant>>) {
        let mut firsts = Vec::with_capacity(entries.len());
        let series = entries
            .iter()
            .map(|p| {
                let start = Instant::ZERO + p.start;
                // As `ProbeConfig::count`: probes at `start + k·interval` before the stop and
                // before the end (one sent at the end would have no time to arrive).
                let stop = p.stop.map_or(end, |s| (Instant::ZERO + s).min(end));
                firsts.push((start < stop).then_some(start));
                let n = p.count(end - Instant::ZERO) as usize;
                Series {
                    hosts: [host_id(&p.from), host_id(&p.to)],
                    names: [p.from.clone(), p.to.clone()],
                    size: p.size.bytes() as u32,
                    echo_size: p.echo_size.bytes() as u32,
                    interval: p.interval,
                    stop,
                    sent: Vec::with_capacity(n),
                    arrived: Vec::with_capacity(n),
                    echoed: Vec::with_capacity(n),
                }
            })
            .collect();
        (Probes { series, first }, firsts)
    }

    /// Series `p`'s next probe, sent at `now`, and when the one after it is due (none once
    /// the series has stopped).
    pub fn send(&mut self, p: usize, now: Instant) -> (SimPacket, Option<Instant>) {
        let s = &mut self.series[p];
        let round = s.sent.len() as u32;
        s.sent.push(now);
        s.arrived.push(None);
        s.echoed.push(None);
        let pkt = SimPacket::datagram(s.hosts[0], s.hosts[1], self.first + p as u32, true, s.size, round);
        let next = now + s.interval;
        (pkt, (next < s.stop).then_some(next))
    }

    /// A series' datagram has arrived at `now`: a probe is recorded and answered (the echo to
    /// send is returned), an echo is recorded.
    pub fn arrived(&mut self, pkt: &SimPacket, now: Instant) -> Option<SimPacket> {
        let p = (pkt.conn - self.first) as usize;
        let s = &mut self.series[p];
        let round = pkt.seq as usize;
        if pkt.from_client {
            s.arrived[round] = Some(now);
            Some(SimPacket::datagram(s.hosts[1], s.hosts[0], pkt.conn, false, s.echo_size, pkt.seq))
        } else {
            s.echoed[round] = Some(now);
            None
        }
    }

    /// The `probes` table: a row per probe sent so far.
    pub fn table(&self) -> Table {
        let mut t = Table::new(PROBES);
        let ns = |at: Option<Instant>| at.map_or(Cell::Null, |t| Cell::I(t.as_nanos() as i64));
        for (p, s) in self.series.iter().enumerate() {
            for (round, sent) in s.sent.iter().enumerate() {
                t.push(vec![
                    Cell::I(p as i64),
                    Cell::T(&s.names[0]),
                    Cell::T(&s.names[1]),
                    Cell::I(round as i64),
                    Cell::I(sent.as_nanos() as i64),
                    ns(s.arrived[round]),
                    ns(s.echoed[round]),
                ]);
            }
        }
        t
    }
}
