//! The real clock and the release timer: maps `CLOCK_MONOTONIC` to model [`Instant`]s and
//! sleeps until absolute nanosecond deadlines.
//!
//! Deadlines are absolute (a `timerfd` armed with `TFD_TIMER_ABSTIME`), so lateness never
//! accumulates from one sleep to the next the way relative sleeps' overshoot does. The
//! process's timer slack is set to 1 ns (the default 50 µs would be added to every wake-up
//! of a non-realtime thread). What the kernel still adds — the wake-up latency of the
//! scheduler, about 30 µs at the median on the development VM — can be hidden by spinning:
//! when the next deadline is closer than the spin threshold the driver polls instead of
//! sleeping. Spinning burns a core, so it is off unless asked for.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use pathtwin_core::time::Instant;

/// `CLOCK_MONOTONIC` in nanoseconds.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Model time zero is the moment the emulation starts.
#[derive(Clone, Copy, Debug)]
pub struct RealClock {
    origin_ns: u64,
}

impl RealClock {
    pub fn start() -> RealClock {
        RealClock { origin_ns: mono_ns() }
    }
    pub fn now(&self) -> Instant {
        Instant::from_nanos(mono_ns().saturating_sub(self.origin_ns))
    }
    /// The `CLOCK_MONOTONIC` reading at which model time `at` is reached.
    pub fn to_mono_ns(&self, at: Instant) -> u64 {
        self.origin_ns.saturating_add(at.as_nanos())
    }
}

/// Sets this thread's timer slack to 1 ns (`PR_SET_TIMERSLACK`).
pub fn set_min_timer_slack() -> io::Result<()> {
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A PM QoS request for zero CPU wake-up latency (`/dev/cpu_dma_latency` ← 0), held for as
/// long as this value lives; the kernel drops the request when the descriptor closes.
///
/// With it, idle CPUs poll for work instead of halting, so waking the loop (or a host's
/// process the loop just handed a packet) costs no halt exit. Measured on the 2-core
/// development VM (cpuidle driver `haltpoll`), UDP echo RTT p50 between two namespaces over
/// raw veth fell from ~95 to ~20 µs with it, and over a pathtwin zero-delay path from
/// ~250–400 to ~40–60 µs: a halted vCPU takes tens of µs to wake, and a pathtwin path has
/// two more wake-ups per round trip (the loop, once each way) than a veth pair. The price is
/// idle CPUs that spin while the emulation runs.
#[derive(Debug)]
pub struct CpuLatencyRequest {
    _fd: OwnedFd,
}

impl CpuLatencyRequest {
    pub fn hold() -> io::Result<CpuLatencyRequest> {
        // SAFETY: open(2) with a NUL-terminated path.
        let raw = unsafe { libc::open(c"/dev/cpu_dma_latency".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: raw is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let zero = 0i32.to_ne_bytes();
        // SAFETY: write of 4 bytes from a buffer we own.
        if unsafe { libc::write(fd.as_raw_fd(), zero.as_ptr().cast(), zero.len()) } != zero.len() as isize {
            return Err(io::Error::last_os_error());
        }
        Ok(CpuLatencyRequest { _fd: fd })
    }
}

/// A `timerfd` on `CLOCK_MONOTONIC`, armed with absolute deadlines; readable when due.
#[derive(Debug)]
pub struct DeadlineTimer {
    fd: OwnedFd,
    armed_at: Option<u64>,
}

impl DeadlineTimer {
    pub fn new() -> io::Result<DeadlineTimer> {
        // SAFETY: timerfd_create returns a new descriptor or -1.
        let raw = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: raw is fresh and ours.
        Ok(DeadlineTimer { fd: unsafe { OwnedFd::from_raw_fd(raw) }, armed_at: None })
    }

    /// Arms the timer for the absolute `CLOCK_MONOTONIC` time `deadline_ns`, or disarms it
    /// for `None`. Re-arming to the same deadline is skipped (one syscall saved per loop).
    pub fn set(&mut self, deadline_ns: Option<u64>) -> io::Result<()> {
        if deadline_ns == self.armed_at {
            return Ok(());
        }
        // A zero it_value disarms; an absolute time of 0 would too, so clamp to 1 ns.
        let ns = deadline_ns.map_or(0, |d| d.max(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec { tv_sec: (ns / 1_000_000_000) as _, tv_nsec: (ns % 1_000_000_000) as _ },
        };
        // SAFETY: timerfd_settime reads the itimerspec we own.
        let r = unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        self.armed_at = deadline_ns;
        Ok(())
    }

    /// Consumes an expiry so the descriptor stops being readable.
    pub fn acknowledge(&mut self) {
        let mut n = [0u8; 8];
        // SAFETY: read of 8 bytes into a buffer we own; EAGAIN is fine.
        let r = unsafe { libc::read(self.fd.as_raw_fd(), n.as_mut_ptr().cast(), 8) };
        if r == 8 {
            self.armed_at = None;
        }
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_time_follows_the_monotonic_clock() {
        let c = RealClock::start();
        let a = c.now();
        let m = mono_ns();
        let b = c.now();
        assert!(a <= b);
        assert!(c.to_mono_ns(a) <= m && m <= c.to_mono_ns(b));
    }

    #[test]
    fn the_timer_fires_at_an_absolute_deadline_and_never_before() {
        let mut t = DeadlineTimer::new().unwrap();
        let deadline = mono_ns() + 2_000_000;
        t.set(Some(deadline)).unwrap();
        let mut pfd = libc::pollfd { fd: t.raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: poll on one pollfd we own.
        let r = unsafe { libc::poll(&mut pfd, 1, 1000) };
        assert_eq!(r, 1, "timer did not fire within a second");
        assert!(mono_ns() >= deadline, "timer fired before its deadline");
        t.acknowledge();
        // SAFETY: as above, with a zero timeout: nothing is pending after acknowledging.
        assert_eq!(unsafe { libc::poll(&mut pfd, 1, 0) }, 0);
    }
}
