//! The loop thread's scheduling: nice −20 always, and `SCHED_FIFO` for as long as the loop
//! has idle time to spare.
//!
//! Three measurements on the 2-core development VM set this up (`bench/emu/run.py`):
//! - **Preemption.** Writing a packet wakes the receiving host's process; under the default
//!   policy and nice 0 that process preempted the loop on its way back from `write(2)` (a
//!   quarter of the loop's samples were in `finish_task_switch`). As `SCHED_FIFO` the loop
//!   is never preempted by a host: idle UDP echo RTT over a zero-delay path, idle CPUs
//!   polling, was 40–60 µs against 110–125 µs at nice −20 under the default policy (veth
//!   alone: ~20 µs).
//! - **Real-time throttling.** A `SCHED_FIFO` loop that is busy all the time (an unlimited
//!   path under iperf3, or 1 Gbit/s) exceeds the kernel's real-time budget
//!   (`sched_rt_runtime_us`, 95 % of each second) and is then stopped for ~50 ms: release
//!   lateness max 48 ms, against 2.7 ms at nice −20 under the default policy, which also
//!   carried slightly more (0.96 vs 0.93 Gbit/s on the 1 Gbit/s path).
//! - **Idle CPUs.** The first number holds with idle CPUs polling (the emulator's PM QoS
//!   request, [`crate::clock::CpuLatencyRequest`]). With CPUs that halt when idle,
//!   `SCHED_FIFO` made the idle RTT worse (264–293 µs p50 against 196–219 µs at nice 0; veth
//!   88–110 µs): a real-time thread is woken on the CPU it last ran on, halted, where the
//!   default policy may wake it on the waker's running CPU. So `SCHED_FIFO` is only used
//!   together with that request.
//!
//! So the loop runs as `SCHED_FIFO` while it is mostly idle and drops to the default policy
//! (keeping nice −20) when, over a window, it was busy more than [`Governor::DEMOTE_ABOVE`]
//! of the time; it goes back below [`Governor::PROMOTE_BELOW`]. The hysteresis keeps it from
//! flapping. Busy time is the thread's own CPU time ([`thread_cpu_ns`]), the quantity the
//! kernel's real-time budget counts. It used to be wall time outside `epoll_wait`, which
//! took a wait that returned at once, or a spin's zero-timeout poll, for rest: a loop
//! spinning through a saturated 1-Gbit/s path then stayed `SCHED_FIFO` into the budget and
//! was stopped for up to 52 ms (`bench/emu/run.py`'s spin case), and the hour-long soak's
//! latest release was 47 ms.

use std::io;

/// The loop's nice value under either policy.
pub const LOOP_NICE: i32 = -20;
/// Real-time priority while promoted: the lowest, above every normal thread.
const FIFO_PRIORITY: i32 = 1;

/// The calling thread's CPU time so far (`CLOCK_THREAD_CPUTIME_ID`, ns): what it ran, in
/// user space and in the kernel on its behalf, not what it waited or was preempted.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we own; this clock always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Gives the calling thread nice value `nice` (Linux applies `PRIO_PROCESS` with a thread id
/// to that thread alone).
pub fn set_thread_nice(nice: i32) -> io::Result<()> {
    // SAFETY: gettid has no preconditions; setpriority on our own thread id.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, nice) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Switches the calling thread between `SCHED_FIFO` (at priority 1, the lowest) and the default
/// policy (where its nice value applies again).
pub fn set_thread_fifo(fifo: bool) -> io::Result<()> {
    let (policy, priority) = if fifo { (libc::SCHED_FIFO, FIFO_PRIORITY) } else { (libc::SCHED_OTHER, 0) };
    let param = libc::sched_param { sched_priority: priority };
    // SAFETY: sched_setscheduler on the calling thread (0) with a param we own.
    if unsafe { libc::sched_setscheduler(0, policy, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// What the governor wants done to the thread after a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Switch {
    ToFifo,
    ToDefault,
}

/// Tracks the loop's busy share over fixed windows and decides the policy.
#[derive(Clone, Debug)]
pub struct Governor {
    window_start_ns: u64,
    /// The thread's CPU time when the window started.
    window_start_cpu_ns: u64,
    fifo: bool,
    fifo_allowed: bool,
    /// Policy changes made so far (reported with the results).
    pub switches: u64,
}

impl Governor {
    /// Length of one measurement window.
    pub const WINDOW_NS: u64 = 50_000_000;
    /// Busy share above which a `SCHED_FIFO` loop drops to the default policy.
    pub const DEMOTE_ABOVE: f64 = 0.80;
    /// Busy share below which a loop under the default policy becomes `SCHED_FIFO` again.
    pub const PROMOTE_BELOW: f64 = 0.50;

    /// A governor for a thread currently as `fifo` says, starting its first window at `now_ns`
    /// with `cpu_ns` of CPU time used; it only ever promotes to `SCHED_FIFO` if `fifo_allowed`
    /// (false: nice −20 only).
    pub fn new(now_ns: u64, cpu_ns: u64, fifo: bool, fifo_allowed: bool) -> Governor {
        Governor { window_start_ns: now_ns, window_start_cpu_ns: cpu_ns, fifo, fifo_allowed, switches: 0 }
    }

    pub fn is_fifo(&self) -> bool {
        self.fifo
    }

    /// Closes the window if it is over at `now_ns`; `cpu_ns` gives the thread's CPU time so
    /// far, and is called only then (one read per window, not per wake-up). Returns the
    /// switch to make, if any (the caller makes it and reports back with
    /// [`Governor::switched`]).
    pub fn tick(&mut self, now_ns: u64, cpu_ns: impl FnOnce() -> u64) -> Option<Switch> {
        let elapsed = now_ns.saturating_sub(self.window_start_ns);
        if elapsed < Self::WINDOW_NS {
            return None;
        }
        let cpu_ns = cpu_ns();
        let ran = cpu_ns.saturating_sub(self.window_start_cpu_ns).min(elapsed);
        let busy = ran as f64 / elapsed as f64;
        self.window_start_ns = now_ns;
        self.window_start_cpu_ns = cpu_ns;
        match self.fifo {
            true if busy > Self::DEMOTE_ABOVE => Some(Switch::ToDefault),
            false if self.fifo_allowed && busy < Self::PROMOTE_BELOW => Some(Switch::ToFifo),
            _ => None,
        }
    }

    /// The switch was made.
    pub fn switched(&mut self, to: Switch) {
        self.fifo = to == Switch::ToFifo;
        self.switches += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: u64 = Governor::WINDOW_NS;

    #[test]
    fn a_saturated_fifo_loop_is_demoted_and_promoted_again_once_mostly_idle() {
        let mut g = Governor::new(0, 0, true, true);
        // 90 % busy: above the demotion threshold.
        let mut cpu = W * 9 / 10;
        assert_eq!(g.tick(W, || cpu), Some(Switch::ToDefault));
        g.switched(Switch::ToDefault);
        // 60 % busy: between the thresholds, so no change either way.
        cpu += W * 6 / 10;
        assert_eq!(g.tick(2 * W, || cpu), None);
        assert!(!g.is_fifo());
        // 30 % busy: promoted.
        cpu += W * 3 / 10;
        assert_eq!(g.tick(3 * W, || cpu), Some(Switch::ToFifo));
        g.switched(Switch::ToFifo);
        assert!(g.is_fifo());
        assert_eq!(g.switches, 2);
    }

    #[test]
    fn nothing_is_decided_before_a_window_is_over_and_a_mostly_idle_fifo_loop_stays() {
        let mut g = Governor::new(1_000, 500, true, true);
        assert_eq!(g.tick(1_000 + W - 1, || panic!("CPU time read before the window is over")), None);
        // Idle: no CPU time used over two windows' length.
        assert_eq!(g.tick(1_000 + 2 * W, || 500), None);
        assert!(g.is_fifo());
    }

    #[test]
    fn without_fifo_allowed_an_idle_loop_stays_under_the_default_policy() {
        let mut g = Governor::new(0, 0, false, false);
        assert_eq!(g.tick(W, || 0), None);
        assert!(!g.is_fifo());
    }
}
