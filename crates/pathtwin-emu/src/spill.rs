//! Records a run keeps for its results but does not need until the end, spilled to a file
//! as they come: an append-only log of [`postcard`]-encoded records in an unlinked temporary
//! file, read back in order when the results are built. Owns that file and its format.
//!
//! # Why
//! A long emulation accumulates its time series for the whole run. The `tcp_info` samples
//! alone grew a 1-Gbit/s soak with short and long flows by 2.7 MB a minute (about 160
//! samples a second of about 280 bytes each in memory), which over an hour is most of a
//! small machine's headroom and looks like a leak to anyone watching the process. On disk
//! the same samples take about a quarter of that (postcard's variable-length integers, and
//! `None` in one byte), and the process's memory stays flat however long the run.
//!
//! # Where
//! The file is created in `$TMPDIR` if it is set, else in `/var/tmp` (on disk on common
//! systems, where `/tmp` may be a RAM file system), and unlinked at once: nothing is left
//! behind, whatever ends the process. If no file can be created the records stay in
//! memory, encoded, which still costs a quarter of the decoded form.
//!
//! # Off the real-time loop
//! The loop must not wait on a file (on this VM a write to a disk-backed file system once
//! held it for 0.9 s). [`SpillThread`] gives it a batch to fill instead: each full batch goes
//! over a channel to a writer thread of its own, which owns the [`Spill`].
//!
//! # Format
//! Each record is its encoded length (u32, little-endian) and the postcard bytes; the
//! length prefix lets a reader skip ahead in whole records and tells a truncated tail (a
//! full disk) from a record.
//!
//! # Reading back
//! Records come back a batch at a time ([`Spill::for_each`], [`SpillThread::for_each`], and
//! [`SpillReader`], a reader of its own that several can use at once), never all at once: the
//! results of a long run are written from these files a row group at a time
//! ([`crate::long_tables`]), and the hour-long soak's 585 000 `tcp_info` samples read back
//! into memory at once were most of a 629-MB peak after the run.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Seek, SeekFrom, Write};
use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Where records go.
enum Storage {
    File(BufWriter<File>),
    /// No temporary file could be made: the encoded records in memory.
    Memory(Vec<u8>),
}

/// An append-only log of `T`s; see the module doc.
pub struct Spill<T> {
    storage: Storage,
    len: usize,
    scratch: Vec<u8>,
    _records: PhantomData<fn(T) -> T>,
}

/// The directory spill files go to.
fn spill_dir() -> PathBuf {
    std::env::var_os("TMPDIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/var/tmp"))
}

impl<T: Serialize + DeserializeOwned> Spill<T> {
    /// A new, empty log in an unlinked temporary file (in memory if none can be made).
    pub fn new() -> Spill<T> {
        let storage = match tempfile::tempfile_in(spill_dir()).or_else(|_| tempfile::tempfile()) {
            Ok(f) => Storage::File(BufWriter::with_capacity(64 * 1024, f)),
            Err(_) => Storage::Memory(Vec::new()),
        };
        Spill { storage, len: 0, scratch: Vec::new(), _records: PhantomData }
    }

    /// Whether the records go to a file (false: they are kept in memory).
    pub fn on_disk(&self) -> bool {
        matches!(self.storage, Storage::File(_))
    }

    /// Records appended so far.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends one record.
    pub fn push(&mut self, record: &T) -> io::Result<()> {
        self.scratch.clear();
        self.scratch.extend_from_slice(&[0; 4]);
        let mut encoded = postcard::to_extend(record, std::mem::take(&mut self.scratch))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("encoding a spilled record: {e}")))?;
        let n = u32::try_from(encoded.len() - 4).map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "a spilled record over 4 GiB"))?;
        encoded[..4].copy_from_slice(&n.to_le_bytes());
        let written = match &mut self.storage {
            Storage::File(w) => w.write_all(&encoded),
            Storage::Memory(v) => {
                v.extend_from_slice(&encoded);
                Ok(())
            }
        };
        self.scratch = encoded;
        written?;
        self.len += 1;
        Ok(())
    }

    /// Calls `each` with every record in the order they were pushed (index, record); later
    /// pushes append after them as before.
    pub fn for_each(&mut self, mut each: impl FnMut(usize, T)) -> io::Result<()> {
        match &mut self.storage {
            Storage::Memory(v) => read_records(&v[..], self.len, &mut each),
            Storage::File(w) => {
                w.flush()?;
                let file = w.get_mut();
                file.seek(SeekFrom::Start(0))?;
                let read = read_records(BufReader::with_capacity(64 * 1024, &*file), self.len, &mut each);
                // The reader moved the file's offset; appends continue at the end either way.
                file.seek(SeekFrom::End(0))?;
                read
            }
        }
    }
}

impl<T: Serialize + DeserializeOwned> Spill<T> {
    /// A reader of the records pushed so far, in order, with a file offset of its own: several
    /// can read one spill at once, and pushes after it continue at the end.
    pub fn reader(&mut self) -> io::Result<SpillReader<'_, T>> {
        let source = match &mut self.storage {
            Storage::Memory(v) => ReaderSource::Memory(&v[..]),
            Storage::File(w) => {
                w.flush()?;
                // A file description of its own (the spill file is unlinked, but its
                // descriptor still names it), so that this reader's offset is its own.
                let own = File::open(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(w.get_ref())))?;
                ReaderSource::File(BufReader::with_capacity(64 * 1024, own))
            }
        };
        Ok(SpillReader { source, left: self.len, index: 0, buf: Vec::new(), _records: PhantomData })
    }
}

enum ReaderSource<'a> {
    Memory(&'a [u8]),
    File(BufReader<File>),
}

/// Reads a [`Spill`]'s records in order, one at a time (see [`Spill::reader`]).
pub struct SpillReader<'a, T> {
    source: ReaderSource<'a>,
    left: usize,
    index: usize,
    buf: Vec<u8>,
    _records: PhantomData<fn() -> T>,
}

impl<T: DeserializeOwned> Iterator for SpillReader<'_, T> {
    type Item = io::Result<T>;

    fn next(&mut self) -> Option<io::Result<T>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let read = match &mut self.source {
            ReaderSource::Memory(v) => read_record(v, self.index, &mut self.buf),
            ReaderSource::File(f) => read_record(f, self.index, &mut self.buf),
        };
        self.index += 1;
        if read.is_err() {
            // A record that does not read ends the reading: what follows has no start.
            self.left = 0;
        }
        Some(read)
    }
}

impl<T: Serialize + DeserializeOwned> Default for Spill<T> {
    fn default() -> Self {
        Spill::new()
    }
}

/// Records a batch holds before it goes to the writer thread: at the emulator's 100-ms
/// queue samples of a few queues, a hand-over every few seconds.
const BATCH: usize = 256;

/// What the producer sends the writer thread.
enum ToWriter<T> {
    Batch(Vec<T>),
    /// Once every batch sent before has been written, send everything written so far back,
    /// [`BATCH`] records at a time, then close the channel.
    Stream(mpsc::SyncSender<Streamed<T>>),
}

/// What the writer thread streams back.
enum Streamed<T> {
    Records(Vec<T>),
    /// The file could not be read back from here on.
    Failed(String),
}

/// A [`Spill`] fed from a thread that must not do file I/O; see the module doc. The writer
/// thread starts with the first full batch, so a run that records little never has one.
pub struct SpillThread<T> {
    name: String,
    /// Records pushed so far.
    pushed: usize,
    batch: Vec<T>,
    writer: Option<(mpsc::Sender<ToWriter<T>>, JoinHandle<()>)>,
}

impl<T: Serialize + DeserializeOwned + Clone + Send + 'static> SpillThread<T> {
    /// `name` names the writer thread.
    pub fn new(name: impl Into<String>) -> SpillThread<T> {
        SpillThread { name: name.into(), pushed: 0, batch: Vec::new(), writer: None }
    }

    /// Records pushed so far.
    pub fn len(&self) -> usize {
        self.pushed
    }

    pub fn is_empty(&self) -> bool {
        self.pushed == 0
    }

    /// Appends one record (never waits on the file).
    pub fn push(&mut self, record: T) {
        self.pushed += 1;
        self.batch.push(record);
        if self.batch.len() >= BATCH {
            self.hand_over();
        }
    }

    /// Sends the batch to the writer thread, starting it if need be. If the thread cannot be
    /// started the batch stays here and grows: records are kept either way.
    fn hand_over(&mut self) {
        if self.writer.is_none() {
            let (tx, rx) = mpsc::channel();
            match std::thread::Builder::new().name(self.name.clone()).spawn(move || write_batches(rx)) {
                Ok(thread) => self.writer = Some((tx, thread)),
                Err(_) => return,
            }
        }
        if let Some((tx, _)) = &self.writer {
            let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
            if let Err(mpsc::SendError(ToWriter::Batch(back))) = tx.send(ToWriter::Batch(batch)) {
                self.batch = back;
            }
        }
    }

    /// Calls `each` with every record pushed so far, in order, holding a couple of batches at
    /// a time: the writer thread writes what it was sent, then streams the file back. An error
    /// reading the file back (after the records before it) is returned as one line.
    pub fn for_each(&mut self, mut each: impl FnMut(T)) -> Result<(), String> {
        let mut failed = None;
        if let Some((tx, _)) = &self.writer {
            // Room for one batch in the channel: the writer reads the next while this one is used.
            let (reply, answer) = mpsc::sync_channel(1);
            if tx.send(ToWriter::Stream(reply)).is_ok() {
                for part in answer {
                    match part {
                        Streamed::Records(records) => records.into_iter().for_each(&mut each),
                        Streamed::Failed(why) => failed = Some(why),
                    }
                }
            }
        }
        self.batch.iter().cloned().for_each(each);
        failed.map_or(Ok(()), Err)
    }

    /// Every record pushed so far, in order, in memory (see [`SpillThread::for_each`]).
    pub fn read_all(&mut self) -> Result<Vec<T>, String> {
        let mut all = Vec::new();
        self.for_each(|r| all.push(r))?;
        Ok(all)
    }
}

impl<T> Drop for SpillThread<T> {
    fn drop(&mut self) {
        if let Some((tx, thread)) = self.writer.take() {
            drop(tx);
            let _ = thread.join();
        }
    }
}

/// The writer thread: appends every batch to a [`Spill`], and keeps in memory what the file
/// refused (a full disk), so that nothing recorded is lost.
fn write_batches<T: Serialize + DeserializeOwned + Clone>(rx: mpsc::Receiver<ToWriter<T>>) {
    // A thread inherits its creator's policy; this one must never compete with the loop.
    let _ = crate::priority::set_thread_fifo(false);
    let mut spill = Spill::new();
    let mut refused: Vec<T> = Vec::new();
    for message in rx {
        match message {
            ToWriter::Batch(batch) => {
                for record in batch {
                    if !refused.is_empty() || spill.push(&record).is_err() {
                        refused.push(record);
                    }
                }
            }
            ToWriter::Stream(reply) => {
                let mut part = Vec::with_capacity(BATCH);
                let mut gone = false;
                let read = spill.for_each(|_, r| {
                    part.push(r);
                    if part.len() == BATCH && !gone {
                        gone = reply.send(Streamed::Records(std::mem::replace(&mut part, Vec::with_capacity(BATCH)))).is_err();
                    }
                });
                part.extend(refused.iter().cloned());
                let _ = reply.send(Streamed::Records(part));
                if let Err(e) = read {
                    // What the file held from there on is lost; what it refused is not.
                    let _ = reply.send(Streamed::Failed(format!("reading a spill file back: {e}")));
                }
            }
        }
    }
}

/// Decodes `count` length-prefixed records from `r`.
fn read_records<T: DeserializeOwned>(mut r: impl BufRead, count: usize, each: &mut impl FnMut(usize, T)) -> io::Result<()> {
    let mut buf = Vec::new();
    for i in 0..count {
        each(i, read_record(&mut r, i, &mut buf)?);
    }
    Ok(())
}

/// Decodes the next length-prefixed record (record `i`) from `r`, through `buf`.
fn read_record<T: DeserializeOwned>(mut r: impl io::Read, i: usize, buf: &mut Vec<u8>) -> io::Result<T> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    buf.resize(u32::from_le_bytes(len) as usize, 0);
    r.read_exact(buf)?;
    postcard::from_bytes(buf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("spilled record {i} does not decode: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Row {
        t: u64,
        name: Option<String>,
        v: Vec<u32>,
    }

    fn rows(n: u64) -> Vec<Row> {
        (0..n).map(|i| Row { t: i * 1_000_003, name: (i % 3 == 0).then(|| format!("row{i}")), v: (0..(i % 5) as u32).collect() }).collect()
    }

    fn read_back(s: &mut Spill<Row>) -> Vec<Row> {
        let mut out = Vec::new();
        s.for_each(|i, r| {
            assert_eq!(i, out.len());
            out.push(r)
        })
        .unwrap();
        out
    }

    /// What goes in comes out, in order, through the file (past the writer's buffer), and
    /// appends after a read land after what was there: a run reads its results more than once.
    #[test]
    fn records_come_back_in_order_and_appends_continue_after_a_read() {
        let mut s = Spill::new();
        assert!(s.on_disk(), "a temporary file can be made on this machine");
        let first = rows(20_000);
        for r in &first {
            s.push(r).unwrap();
        }
        assert_eq!(read_back(&mut s), first);
        let more = rows(7);
        for r in &more {
            s.push(r).unwrap();
        }
        let all: Vec<Row> = first.iter().chain(&more).cloned().collect();
        assert_eq!(s.len(), all.len());
        assert_eq!(read_back(&mut s), all);
    }

    /// The in-memory fallback keeps the same records.
    #[test]
    fn the_memory_fallback_keeps_the_same_records() {
        let mut s: Spill<Row> = Spill { storage: Storage::Memory(Vec::new()), len: 0, scratch: Vec::new(), _records: PhantomData };
        let want = rows(1000);
        for r in &want {
            s.push(r).unwrap();
        }
        assert_eq!(read_back(&mut s), want);
    }

    /// Through the writer thread: full batches and the partial one come back in order, and
    /// reading does not stop later pushes.
    #[test]
    fn a_spill_thread_returns_every_record_in_order() {
        let mut s = SpillThread::new("spill-test");
        let want = rows(3 * BATCH as u64 + 17);
        for r in &want[..2 * BATCH + 5] {
            s.push(r.clone());
        }
        assert_eq!(s.read_all().unwrap(), want[..2 * BATCH + 5]);
        for r in &want[2 * BATCH + 5..] {
            s.push(r.clone());
        }
        assert_eq!(s.read_all().unwrap(), want);
        assert!(s.writer.is_some(), "full batches went to the writer thread");
    }

    /// Streaming back through the writer thread goes a batch at a time, more than one batch
    /// of records included, and ends with the records not yet handed over.
    #[test]
    fn a_spill_thread_streams_more_than_a_batch_in_order() {
        let mut s = SpillThread::new("spill-test");
        let want = rows(5 * BATCH as u64 + 3);
        for r in &want {
            s.push(r.clone());
        }
        let mut got = Vec::new();
        s.for_each(|r| got.push(r)).unwrap();
        assert_eq!(got, want);
    }

    /// A reader has an offset of its own: reading half through it moves nothing of the
    /// spill's, pushes after it land at the end, and a new reader reads everything again.
    #[test]
    fn a_reader_reads_in_order_and_pushes_continue_after_it() {
        let want = rows(30_000);
        for mut s in [Spill::new(), Spill { storage: Storage::Memory(Vec::new()), len: 0, scratch: Vec::new(), _records: PhantomData }] {
            for r in &want[..20_000] {
                s.push(r).unwrap();
            }
            let half: Vec<Row> = s.reader().unwrap().take(10_000).map(Result::unwrap).collect();
            assert_eq!(half, want[..10_000]);
            for r in &want[20_000..] {
                s.push(r).unwrap();
            }
            let all: Vec<Row> = s.reader().unwrap().map(Result::unwrap).collect();
            assert_eq!(all, want);
            assert_eq!(read_back(&mut s), want);
        }
    }

    /// The file is unlinked: nothing appears in the spill directory, whatever ends the run.
    #[test]
    fn the_file_is_not_visible_in_the_directory() {
        let before: Vec<_> = std::fs::read_dir(spill_dir()).unwrap().filter_map(|e| e.ok()).map(|e| e.path()).collect();
        let mut s: Spill<Row> = Spill::new();
        s.push(&rows(1)[0]).unwrap();
        let after: Vec<_> = std::fs::read_dir(spill_dir()).unwrap().filter_map(|e| e.ok()).map(|e| e.path()).collect();
        // Only names tempfile would give (".tmp…"): other programs may use the directory.
        let new: Vec<_> = after.iter().filter(|p| !before.contains(p) && p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(".tmp"))).collect();
        assert!(new.is_empty(), "spill left {new:?}");
    }
}
