//! The `[[flow]]` workload run as real kernel TCP between the emulated hosts: the same
//! connections, applications and `flows` table as the simulator's, with small built-in
//! programs in place of simulated endpoints. Owns the runner thread and its result; the
//! emulator ([`crate::emulator`]) starts it when asked ([`crate::EmulatorOptions::workload`]).
//! The applications' rules (bulk, on/off, request/response, replay) are not here: they are
//! [`pathtwin_core::app`], sans-IO, the very code the simulator runs.
//!
//! - [`plan`]: the connections and their sockets' settings, from the config, checked before
//!   any host exists (what the kernel cannot do per connection is refused there);
//! - [`runner`]: the one thread that runs every connection's client and server over
//!   non-blocking sockets in the hosts' namespaces, on the emulator's clock, and why;
//! - [`sock`]: its system calls.
//!
//! The workload's time zero is the emulation's: a flow's `start` and `stop` and the run's
//! `duration` are model times, on the axis of every other table. It ends at `[run]
//! duration`, or with `[run] until_done` once every connection has closed at both ends, or
//! when stopped ([`Workload::stop`]); the packet loop keeps running until the emulation
//! stops.

pub mod plan;
pub mod runner;
pub mod sock;

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use pathtwin_core::results::FLOWS;
use pathtwin_core::table::{Cell, Table};

use crate::clock::RealClock;
use crate::lab::Lab;
use crate::sampler::{KnownFlows, SocketKey};
use std::net::IpAddr;

pub use plan::{plan, Plan};
use runner::{HostView, Outcome, Runner};

/// One row of the `flows` table (`pathtwin_core::results::FLOWS`, where each column's
/// source in the emulator is said).
#[derive(Clone, Debug, PartialEq)]
pub struct FlowRecord {
    pub flow: usize,
    pub label: String,
    pub entry: usize,
    pub copy: u32,
    pub src: String,
    pub dst: String,
    pub app: &'static str,
    pub cc: String,
    pub start_s: f64,
    pub end_s: f64,
    pub bytes_delivered: u64,
    pub goodput_bps: f64,
    pub bytes_sent: u64,
    pub segments_sent: u64,
    pub retransmits: u64,
    pub timeouts: u64,
    pub rtt_min_ms: f64,
    pub rtt_mean_ms: f64,
    pub completion_s: f64,
    pub responses: u64,
    pub response_time_mean_s: f64,
}

/// `records` as the `flows` table. The columns the kernel keeps no per-socket count of are 0
/// (see [`FLOWS`]).
pub fn flows_table(records: &[FlowRecord]) -> Table {
    let mut t = Table::new(FLOWS);
    // Counts stay far below 2^63.
    let n = |v: u64| Cell::I(v as i64);
    for r in records {
        t.push(vec![
            n(r.flow as u64),
            Cell::T(&r.label),
            n(r.entry as u64),
            n(r.copy.into()),
            Cell::T(&r.src),
            Cell::T(&r.dst),
            Cell::T(r.app),
            Cell::T(&r.cc),
            Cell::F(r.start_s),
            Cell::F(r.end_s),
            n(r.bytes_delivered),
            Cell::F(r.goodput_bps),
            n(r.bytes_sent),
            n(r.segments_sent),
            n(r.retransmits),
            Cell::I(0), // fast_retransmits
            n(r.timeouts),
            Cell::I(0), // lost_retransmissions
            Cell::I(0), // tail_loss_probes
            Cell::I(0), // ecn_reductions
            Cell::I(0), // ce_received
            Cell::F(r.rtt_min_ms),
            Cell::F(r.rtt_mean_ms),
            Cell::F(r.completion_s),
            n(r.responses),
            Cell::F(r.response_time_mean_s),
        ]);
    }
    t
}

/// Why a workload could not start.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// A system call the runner needs failed (opening a namespace, an eventfd, a thread).
    #[error("{what}: {source}")]
    Os { what: String, source: std::io::Error },
    /// Setting up the hosts' listeners failed; the message names the flow and the socket
    /// option or address the kernel refused.
    #[error("{0}")]
    SetUp(String),
}

/// A running workload. Dropping it stops it.
pub struct Workload {
    /// Client and server host of each entry.
    hosts: Vec<(usize, usize)>,
    stop: Arc<OwnedFd>,
    finished: Arc<AtomicBool>,
    thread: Option<JoinHandle<Outcome>>,
    outcome: Option<Outcome>,
}

impl Workload {
    /// Starts `plan` over `lab`'s hosts on `clock` (the engine's). Returns once every
    /// listener is up, or with the first error setting one up (e.g. a congestion control the
    /// kernel refuses).
    pub fn start(plan: Plan, lab: &Lab, clock: RealClock) -> Result<Workload, WorkloadError> {
        let os = |what: String| move |source| WorkloadError::Os { what, source };
        let mut hosts = Vec::with_capacity(lab.hosts().len());
        for h in lab.hosts() {
            let path = std::path::Path::new("/run/netns").join(&h.netns);
            let netns = std::fs::File::open(&path).map_err(os(format!("opening {}", path.display())))?;
            hosts.push(HostView { netns, ipv4: h.ipv4, first_pipe: h.first_pipe });
        }
        let entry_hosts = plan.entries.iter().map(|e| (e.client, e.server)).collect();
        let stop = Arc::new(sock::eventfd().map_err(os("eventfd for the workload".into()))?);
        let finished = Arc::new(AtomicBool::new(false));
        let (ready, started) = std::sync::mpsc::sync_channel(1);
        let thread = {
            let (stop, finished) = (stop.clone(), finished.clone());
            std::thread::Builder::new()
                .name(format!("pathtwin-workload-{}", lab.run_id()))
                .spawn(move || {
                    let outcome = Runner::run(plan, clock, hosts, &stop, ready);
                    finished.store(true, Ordering::Release);
                    outcome
                })
                .map_err(os("starting the workload thread".into()))?
        };
        match started.recv() {
            Ok(Ok(())) => Ok(Workload { hosts: entry_hosts, stop, finished, thread: Some(thread), outcome: None }),
            Ok(Err(msg)) => {
                let _ = thread.join();
                Err(WorkloadError::SetUp(msg))
            }
            Err(_) => {
                let _ = thread.join();
                Err(WorkloadError::SetUp("the workload thread ended during set-up".into()))
            }
        }
    }

    /// Becomes true once the workload has ended by itself (the run's duration, or every
    /// connection done with `until_done`), or was stopped.
    pub fn finished_flag(&self) -> Arc<AtomicBool> {
        self.finished.clone()
    }

    pub fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Ends the workload now if it is still running (what was measured is kept), and waits
    /// for its thread. Idempotent.
    pub fn stop(&mut self) {
        if let Some(t) = self.thread.take() {
            sock::signal(&self.stop);
            self.outcome = t.join().ok();
        }
    }

    /// The `flows` table (after [`Workload::stop`]; empty before).
    pub fn table(&self) -> Table {
        flows_table(self.outcome.as_ref().map_or(&[][..], |o| &o.records))
    }

    pub fn records(&self) -> &[FlowRecord] {
        self.outcome.as_ref().map_or(&[][..], |o| &o.records)
    }

    /// The sockets of its connections as the `tcp_info` sampler sees them, named as the
    /// simulator names the flows (see [`crate::sampler`]): client socket of connection `i`
    /// as flow `i`, its server socket as flow `n + i`, `label (server)`.
    pub fn known_flows(&self) -> KnownFlows {
        let Some(o) = &self.outcome else { return KnownFlows::new() };
        let n = o.records.len() as u32;
        let mut known = KnownFlows::new();
        for (r, addrs) in o.records.iter().zip(&o.addrs) {
            let Some((client, server)) = addrs else { continue };
            let (ch, sh) = (self.hosts[r.entry].0, self.hosts[r.entry].1);
            let (c, s) = (IpAddr::V4(*client.ip()), IpAddr::V4(*server.ip()));
            let flow = r.flow as u32;
            known.insert(SocketKey { host: ch, peer: sh, local: c, local_port: client.port(), remote: s, remote_port: server.port() }, (flow, r.label.clone()));
            known.insert(SocketKey { host: sh, peer: ch, local: s, local_port: server.port(), remote: c, remote_port: client.port() }, (n + flow, format!("{} (server)", r.label)));
        }
        known
    }

    /// Connections that failed (one line each), after [`Workload::stop`].
    pub fn warnings(&self) -> Vec<String> {
        self.outcome.as_ref().map_or_else(Vec::new, |o| o.warnings.clone())
    }

    /// Whether it was stopped before its end (after [`Workload::stop`]).
    pub fn interrupted(&self) -> bool {
        self.outcome.as_ref().is_some_and(|o| o.interrupted)
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every column of the shared schema is filled, in its order and type.
    #[test]
    fn a_record_is_a_row_of_the_shared_flows_schema() {
        let r = FlowRecord {
            flow: 2,
            label: "a->b#1".into(),
            entry: 0,
            copy: 1,
            src: "a".into(),
            dst: "b".into(),
            app: "bulk",
            cc: "cubic".into(),
            start_s: 0.5,
            end_s: 10.0,
            bytes_delivered: 1_000_000,
            goodput_bps: 842_105.0,
            bytes_sent: 1_002_896,
            segments_sent: 700,
            retransmits: 2,
            timeouts: 0,
            rtt_min_ms: 40.1,
            rtt_mean_ms: 52.0,
            completion_s: 1.9,
            responses: 0,
            response_time_mean_s: f64::NAN,
        };
        // `push` checks each cell's type against its column's.
        let t = flows_table(&[r]);
        assert_eq!(t.rows(), 1);
        assert!(FLOWS.iter().all(|(name, _)| t.column(name).is_some()));
    }
}
