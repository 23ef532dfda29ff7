//! Fuzzes the connection tracker with well-framed captures of arbitrary IPv4/TCP packets:
//! the input is cut into records behind a valid pcap header (raw IP link type), so the
//! fuzzer spends its time in decoding and TCP state (sequence wrap, odd flags, options,
//! retransmissions, SACK blocks) rather than on the file header.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pathtwin_trace::{analyze, AnalyzeOptions};

fuzz_target!(|data: &[u8]| {
    let mut file = Vec::with_capacity(data.len() + 64);
    for w in [0xa1b2_c3d4u32.to_le_bytes(), [2, 0, 4, 0], [0; 4], [0; 4], 65535u32.to_le_bytes(), 101u32.to_le_bytes()] {
        file.extend_from_slice(&w);
    }
    // Records: a length byte, then that many bytes; timestamps advance 1 ms per record.
    let mut rest = data;
    let mut t = 0u32;
    while let Some((&n, tail)) = rest.split_first() {
        let n = (n as usize).min(tail.len());
        for w in [(t / 1000).to_le_bytes(), ((t % 1000) * 1000).to_le_bytes(), (n as u32).to_le_bytes(), (n as u32).to_le_bytes()] {
            file.extend_from_slice(&w);
        }
        file.extend_from_slice(&tail[..n]);
        rest = &tail[n..];
        t += 1;
    }
    let _ = analyze(&file[..], &AnalyzeOptions::default(), |_| true);
});
