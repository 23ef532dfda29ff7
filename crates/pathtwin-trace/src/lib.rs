//! pathtwin-trace: packet captures to per-connection path and endpoint parameters.
//!
//! Two analyses over one streaming reader:
//! - [`analyze`]: Monkey See (Cheng et al., USENIX ATC 2004) — TCP connections as seen next
//!   to a server, each reduced to the parameters a replay needs (min RTT, bottleneck
//!   bandwidth, loss, delayed-ACK policy, receiver window, server and query delays), one
//!   [`ConnRecord`] per connection;
//! - [`diagnose`]: Monarch's self-diagnosis (Haeberlen et al., IMC 2006) — probe flows
//!   checked for upstream loss and reordering through the remote host's IP IDs.
//!
//! Layers, each a module: `capture` (pcap/pcapng framing) → `decode` (link, IP, TCP) →
//! `tracker` (which connection) → `conn` (per-connection inference) → `record` (output
//! row); `monarch` sits beside `tracker`. Reading is streaming: memory follows the number of
//! concurrent connections, not the size of the file. Bad packets are counted in
//! [`CaptureStats`]; only an unreadable file is a [`TraceError`].

pub mod capture;
pub mod conn;
pub mod decode;
pub mod error;
pub mod monarch;
pub mod record;
pub mod seq;
pub mod stats;
pub mod tracker;

use std::fs::File;
use std::io::Read;
use std::path::Path;

pub use error::TraceError;
pub use monarch::{FlowDiagnosis, ProbeKind, Verdict};
pub use record::{to_columns, Column, ConnRecord, COLUMNS};
pub use tracker::{AnalyzeOptions, CaptureStats};

/// The result of [`analyze`].
#[derive(Debug, Clone)]
pub struct Analysis {
    /// One row per connection, in order of first appearance.
    pub conns: Vec<ConnRecord>,
    pub stats: CaptureStats,
}

/// Runs Monkey See's analysis over a capture read from `input`. `progress` receives the
/// number of bytes consumed so far, about every megabyte, and stops the analysis by
/// returning `false`.
pub fn analyze<R: Read>(input: R, opts: &AnalyzeOptions, progress: impl FnMut(u64) -> bool) -> Result<Analysis, TraceError> {
    let mut tracker = tracker::Tracker::new(opts.clone());
    let summary = capture::read_frames(
        input,
        |frame| match decode::decode(frame.link, frame.data) {
            Ok(pkt) => tracker.on_packet(frame.ts_ns, &pkt),
            Err(skip) => tracker.on_skip(frame.ts_ns, skip),
        },
        progress,
    )?;
    let (conns, mut stats) = tracker.finish();
    stats.truncated_tail = summary.truncated_tail;
    Ok(Analysis { conns, stats })
}

/// [`analyze`] on a file.
pub fn analyze_path(path: &Path, opts: &AnalyzeOptions, progress: impl FnMut(u64) -> bool) -> Result<Analysis, TraceError> {
    analyze(File::open(path)?, opts, progress)
}

/// The result of [`diagnose`].
#[derive(Debug, Clone)]
pub struct Diagnosis {
    pub flows: Vec<FlowDiagnosis>,
    pub frames: u64,
    /// Frames that could not be decoded (warnings).
    pub bad_headers: u64,
    pub truncated_tail: bool,
}

/// Runs Monarch's self-diagnosis over the probe flows of a capture.
pub fn diagnose<R: Read>(input: R, progress: impl FnMut(u64) -> bool) -> Result<Diagnosis, TraceError> {
    let mut diag = monarch::Diagnoser::new();
    let mut bad = 0;
    let summary = capture::read_frames(
        input,
        |frame| match decode::decode(frame.link, frame.data) {
            Ok(pkt) => diag.on_packet(&pkt),
            Err(decode::Skip::BadHeader) => bad += 1,
            Err(_) => {}
        },
        progress,
    )?;
    Ok(Diagnosis { flows: diag.finish(), frames: summary.frames, bad_headers: bad, truncated_tail: summary.truncated_tail })
}

/// [`diagnose`] on a file.
pub fn diagnose_path(path: &Path, progress: impl FnMut(u64) -> bool) -> Result<Diagnosis, TraceError> {
    diagnose(File::open(path)?, progress)
}
