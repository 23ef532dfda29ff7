//! Run directories under concurrent starts (root: `/run/pathtwin` is the machine's): an
//! emulation that starts while another cleans up stale runs keeps its directory and owner.

mod common;

use pathtwin_emu::netns::{cleanup_stale, RunDir, RunId};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// One thread cleans up stale runs without pause, as every emulation does when it starts;
/// meanwhile this one claims 300 run directories. Every claim succeeds, and each directory
/// still names its owner after the cleaner has passed over it many times (before the fix,
/// a directory was created empty and then given its owner, and a cleanup in between removed
/// it: "writing /run/pathtwin/ID/owner: No such file or directory").
#[test]
fn a_run_claimed_while_another_cleans_up_keeps_its_directory() {
    if !common::can_emulate() {
        return;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let cleaner = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut passes = 0u64;
            while !stop.load(Ordering::Relaxed) {
                cleanup_stale();
                passes += 1;
            }
            passes
        })
    };
    let mut dirs = Vec::new();
    for _ in 0..300 {
        let id = RunId::generate();
        let dir = RunDir::claim(&id).unwrap_or_else(|e| panic!("claiming {id}: {e}"));
        dirs.push(dir);
    }
    // Give the cleaner a few more passes over every directory.
    std::thread::sleep(std::time::Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    let passes = cleaner.join().unwrap();
    assert!(passes > 10, "the cleaner ran only {passes} times");
    for d in &dirs {
        assert!(d.path().join("owner").is_file(), "{} lost its owner", d.path().display());
    }
    let left: Vec<_> = std::fs::read_dir(pathtwin_emu::netns::STATE_ROOT)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".claim-"))
        .collect();
    assert!(left.is_empty(), "claims left half-made: {left:?}");
}
