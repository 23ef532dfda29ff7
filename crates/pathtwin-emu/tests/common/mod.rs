//! What the emulator's integration tests share: whether they can run here.

/// Whether the emulator can run here (root). Without it a test says so and returns on a
/// developer's machine; under CI (`CI` set, as `.ci/run` does) it fails instead, where a
/// skip would be a silent pass.
pub fn can_emulate() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "the emulator needs root, and CI must run this test");
    eprintln!("skipped: the emulator needs root");
    false
}
