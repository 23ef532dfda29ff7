//! Fuzzes the whole reader: arbitrary bytes as a capture file, through framing, decoding,
//! connection tracking and Monarch's diagnosis. Any panic is a bug; errors are expected.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pathtwin_trace::{analyze, diagnose, AnalyzeOptions};

fuzz_target!(|data: &[u8]| {
    let _ = analyze(data, &AnalyzeOptions::default(), |_| true);
    let _ = diagnose(data, |_| true);
});
