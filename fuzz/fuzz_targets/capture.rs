//! Fuzzes the whole reader: arbitrary bytes as a capture file, through framing, decoding,
//! connection tracking and Monarch's diagnosis, both through the buffered reader and over
//! the bytes in memory split across threads. Any panic is a bug; errors are expected.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pathtwin_trace::{analyze, analyze_slice, diagnose, AnalyzeOptions};

fuzz_target!(|data: &[u8]| {
    let _ = analyze(data, &AnalyzeOptions::default(), |_| true);
    let _ = analyze_slice(data, &AnalyzeOptions { threads: 3, ..AnalyzeOptions::default() }, |_| true);
    let _ = diagnose(data, |_| true);
});
