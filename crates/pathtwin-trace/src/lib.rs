//! pathtwin-trace: packet captures to per-connection path and endpoint parameters.
//!
//! Two analyses over one streaming reader:
//! - [`analyze`]: Monkey See (Cheng et al., USENIX ATC 2004) — TCP connections as seen next
//!   to a server, each reduced to the parameters a replay needs (min RTT, bottleneck
//!   bandwidth, loss, delayed-ACK policy, receiver window, server and query delays), one
//!   [`ConnRecord`] per connection; with [`AnalyzeOptions::exchanges`], from the same pass,
//!   the workload too: one [`ExchangeRecord`] per request/response exchange (sizes, header
//!   bytes, server and query delays, think time);
//! - [`diagnose`]: Monarch's self-diagnosis (Haeberlen et al., IMC 2006) — probe flows
//!   checked for upstream loss and reordering through the remote host's IP IDs.
//!
//! Layers, each a module: `capture` (pcap/pcapng framing) → `decode` (link, IP, TCP) →
//! `tracker` (which connection) → `conn` (per-connection inference, with `direction`'s
//! per-direction capacity, ABW, queue and loss estimates, and `losses`, which transmissions
//! were lost, by offset, for a replay to lose again) → `record` (output row); `monarch`
//! sits beside `tracker`. Reading is streaming: memory follows the number of
//! concurrent connections (for the diagnosis, of probe flows, each holding a bounded window
//! of probes), not the size of the file. Bad packets are counted in
//! [`CaptureStats`]; only an unreadable file is a [`TraceError`].
//!
//! A capture named by path is memory-mapped when it is a regular file (no copy of every
//! byte through a read buffer), else read. Pages every reader has passed are handed back
//! as the analysis goes ([`MappedCapture`]), so a mapped capture of any size costs a bounded
//! amount of resident memory instead of its size. A mapped file must not be truncated by another
//! program while it is analysed: the kernel would stop the process (SIGBUS) on touching the
//! vanished pages. Appending, as a running tcpdump does, is harmless: the analysis sees the
//! file as it was when opened. A capture in memory is analysed by several threads, each
//! owning a share of the flows ([`AnalyzeOptions::threads`]); the output is the same as one
//! thread's, row for row.

pub mod capture;
pub mod conn;
pub mod decode;
pub mod direction;
pub mod error;
pub mod losses;
pub mod monarch;
pub mod record;
pub mod seq;
pub mod stats;
pub mod tracker;

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

pub use error::TraceError;
pub use monarch::{FlowDiagnosis, ProbeKind, Verdict};
pub use record::{cross_traffic_columns, exchange_columns, to_columns, Column, ConnRecord, CrossTrafficRecord, ExchangeRecord, COLUMNS, CROSS_TRAFFIC_COLUMNS, EXCHANGE_COLUMNS};
pub use tracker::{AnalyzeOptions, CaptureStats};

/// The result of [`analyze`].
#[derive(Debug, Clone)]
pub struct Analysis {
    /// One row per connection, in order of first appearance.
    pub conns: Vec<ConnRecord>,
    /// One row per exchange, in (connection, exchange) order; empty unless
    /// [`AnalyzeOptions::exchanges`].
    pub exchanges: Vec<ExchangeRecord>,
    /// Each connection direction's cross traffic over time, in (connection, direction,
    /// time) order; empty unless [`AnalyzeOptions::cross_traffic`].
    pub cross_traffic: Vec<CrossTrafficRecord>,
    pub stats: CaptureStats,
}

/// Runs Monkey See's analysis over a capture read from `input`. `progress` receives the
/// number of bytes consumed so far, about every megabyte, and stops the analysis by
/// returning `false`.
pub fn analyze<R: Read>(input: R, opts: &AnalyzeOptions, progress: impl FnMut(u64) -> bool) -> Result<Analysis, TraceError> {
    let mut tracker = tracker::Tracker::new(opts.clone());
    let summary = capture::read_frames(input, |f| track(&mut tracker, f), progress)?;
    Ok(finish(vec![tracker.finish()], summary))
}

/// [`analyze`] on a capture in memory, split over [`AnalyzeOptions::threads`] threads: each
/// reads every frame (framing is a fifth of the work) and tracks the flows of its shard.
/// The result is the same for any number of threads.
pub fn analyze_slice(data: &[u8], opts: &AnalyzeOptions, progress: impl FnMut(u64) -> bool) -> Result<Analysis, TraceError> {
    analyze_shards(data, opts, progress, &|_| {})
}

/// [`analyze_slice`], calling `release(offset)` as the shards report progress, with the
/// offset every shard has read past, so that a mapped capture can drop what it no longer
/// needs.
fn analyze_shards(
    data: &[u8],
    opts: &AnalyzeOptions,
    mut progress: impl FnMut(u64) -> bool,
    release: &(dyn Fn(usize) + Sync),
) -> Result<Analysis, TraceError> {
    let shards = match opts.threads {
        0 => auto_threads(data.len()),
        // Each thread frames the whole capture: beyond a few, more only cost.
        n => n.min(MAX_THREADS),
    };
    let stop = AtomicBool::new(false);
    let positions: Vec<AtomicU64> = (0..shards).map(|_| AtomicU64::new(0)).collect();
    let shard = |i: usize, progress: &mut dyn FnMut(u64) -> bool| {
        let mut tracker = tracker::Tracker::shard(opts.clone(), i, shards);
        let summary = capture::read_frames_from_slice(data, |f| track(&mut tracker, f), |n| {
            positions[i].store(n, Ordering::Relaxed);
            release(positions.iter().map(|p| p.load(Ordering::Relaxed)).min().unwrap_or(0) as usize);
            // The first shard reports progress; any failure or cancellation stops them all.
            let go = !stop.load(Ordering::Relaxed) && progress(n);
            if !go {
                stop.store(true, Ordering::Relaxed);
            }
            go
        });
        if summary.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        summary.map(|s| (tracker.finish(), s))
    };
    let results: Vec<_> = std::thread::scope(|scope| {
        let others: Vec<_> = (1..shards).map(|i| scope.spawn(move || shard(i, &mut |_| true))).collect();
        let mut all = vec![shard(0, &mut progress)];
        all.extend(others.into_iter().map(|h| h.join().expect("a trace shard panicked")));
        all
    });
    let mut parts = Vec::with_capacity(shards);
    let mut summary = None;
    let mut cancelled = false;
    for r in results {
        match r {
            Ok((part, s)) => {
                summary.get_or_insert(s);
                parts.push(part);
            }
            // A shard stopped because another failed: report the failure itself.
            Err(TraceError::Cancelled) => cancelled = true,
            Err(e) => return Err(e),
        }
    }
    if cancelled {
        return Err(TraceError::Cancelled);
    }
    Ok(finish(parts, summary.expect("at least one shard")))
}

/// How far every reader must have moved on before a mapped capture's pages behind them are
/// released: large enough that the system calls cost nothing, small against the 1 GB a
/// capture analysis should stay under.
pub const RELEASE_STEP: usize = 64 << 20;

/// The most threads [`analyze_slice`] starts.
const MAX_THREADS: usize = 16;

/// Threads for a capture of `len` bytes: one per processor up to four, fewer for captures
/// too small to repay starting them (each thread also frames the whole capture, so more
/// than four gains little).
fn auto_threads(len: usize) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    cpus.min(4).min(1 + len / (32 << 20)).max(1)
}

/// [`analyze`] on a file, memory-mapped if it is a regular file.
pub fn analyze_path(path: &Path, opts: &AnalyzeOptions, progress: impl FnMut(u64) -> bool) -> Result<Analysis, TraceError> {
    let file = File::open(path)?;
    match MappedCapture::map(&file) {
        Some(m) => analyze_shards(m.data(), opts, progress, &|upto| m.release_before(upto)),
        None => analyze(file, opts, progress),
    }
}

// The per-frame work is a plain generic call, not a `dyn` one, so that decoding and
// tracking inline into the framing loop.
#[inline]
fn track(tracker: &mut tracker::Tracker, frame: &capture::Frame<'_>) {
    if tracker.pass_over(frame.ts_ns, frame.link, frame.data) {
        return;
    }
    match decode::decode(frame.link, frame.data) {
        Ok(pkt) => tracker.on_packet(frame.ts_ns, &pkt),
        Err(skip) => tracker.on_skip(frame.ts_ns, skip),
    }
}

fn finish(parts: Vec<tracker::Rows>, summary: capture::ReadSummary) -> Analysis {
    let tracker::Rows { conns, exchanges, cross_traffic, mut stats } = tracker::merge(parts);
    stats.truncated_tail = summary.truncated_tail;
    Analysis { conns, exchanges, cross_traffic, stats }
}

/// A capture file mapped read-only and read once, front to back, whose pages behind the
/// readers are given back with [`release_before`](Self::release_before). A mapped file's
/// pages count in the process's resident memory while mapped, so without this a 10 GB
/// capture read through a map ends with 10 GB resident.
pub struct MappedCapture {
    map: memmap2::Mmap,
    /// Everything before this offset has been released.
    released: AtomicUsize,
}

impl MappedCapture {
    /// Maps a regular, non-empty file; `None` (read it instead) for anything else (a pipe,
    /// a device) or when mapping fails.
    pub fn map(file: &File) -> Option<MappedCapture> {
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() == 0 {
            return None;
        }
        // SAFETY: the map is only read, and lives no longer than the analysis that borrows it.
        // Another program truncating the file meanwhile is the documented exception above.
        let map = unsafe { memmap2::Mmap::map(file) }.ok()?;
        // Read once front to back: let the kernel read ahead.
        let _ = map.advise(memmap2::Advice::Sequential);
        Some(MappedCapture { map, released: AtomicUsize::new(0) })
    }

    pub fn data(&self) -> &[u8] {
        &self.map
    }

    /// Drops the pages wholly before `offset` from this process (every reader has passed
    /// them), once that is [`RELEASE_STEP`] beyond what was dropped before. Failure only
    /// costs memory, so it is ignored.
    pub fn release_before(&self, offset: usize) {
        const PAGE: usize = 4096;
        let end = offset.min(self.map.len()) & !(PAGE - 1);
        if end < self.released.load(Ordering::Relaxed) + RELEASE_STEP {
            return;
        }
        let start = self.released.fetch_max(end, Ordering::Relaxed);
        if end > start {
            // SAFETY: MADV_DONTNEED on a private read-only file mapping only unmaps the
            // pages; touching them again would fault them back in from the unchanged file,
            // so even a late reader would see the same bytes. No reader goes back: frames are
            // handled (and their slices dropped) before the offset that covers them is
            // reported.
            let _ = unsafe { self.map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start) };
        }
    }
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
    diagnose_with(|on_frame| capture::read_frames(input, on_frame, progress))
}

fn diagnose_with(
    read: impl FnOnce(&mut dyn FnMut(&capture::Frame<'_>)) -> Result<capture::ReadSummary, TraceError>,
) -> Result<Diagnosis, TraceError> {
    let mut diag = monarch::Diagnoser::new();
    let mut bad = 0;
    let summary = read(&mut |frame| match decode::decode(frame.link, frame.data) {
        Ok(pkt) => diag.on_packet(&pkt),
        Err(decode::Skip::BadHeader) => bad += 1,
        Err(_) => {}
    })?;
    Ok(Diagnosis { flows: diag.finish(), frames: summary.frames, bad_headers: bad, truncated_tail: summary.truncated_tail })
}

/// [`diagnose`] on a file, memory-mapped if it is a regular file.
pub fn diagnose_path(path: &Path, progress: impl FnMut(u64) -> bool) -> Result<Diagnosis, TraceError> {
    let file = File::open(path)?;
    let mut progress = progress;
    match MappedCapture::map(&file) {
        Some(m) => diagnose_with(|on_frame| {
            capture::read_frames_from_slice(m.data(), on_frame, |n| {
                m.release_before(n as usize);
                progress(n)
            })
        }),
        None => diagnose(file, progress),
    }
}
