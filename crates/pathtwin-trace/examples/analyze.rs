//! Analyzes a capture and prints a one-line summary per connection; a small command-line
//! front end for profiling the crate without Python
//! (`cargo run --release --example analyze FILE [THREADS]`).

use std::path::Path;

use pathtwin_trace::{analyze_path, AnalyzeOptions};

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: analyze CAPTURE");
        std::process::exit(2);
    };
    let threads = match std::env::args().nth(2).map(|t| t.parse::<usize>()) {
        None => 0,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("analyze: THREADS: {e}");
            std::process::exit(2);
        }
    };
    match analyze_path(Path::new(&path), &AnalyzeOptions { threads, ..AnalyzeOptions::default() }, |_| true) {
        Ok(a) => {
            println!("{} frames, {} connections", a.stats.frames, a.conns.len());
        }
        Err(e) => {
            eprintln!("analyze: error: {e}");
            std::process::exit(2);
        }
    }
}
