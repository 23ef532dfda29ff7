//! pathtwin-emu: the pathtwin-core model driven by a real clock, so that real programs in
//! network namespaces — with the kernel's own TCP — talk across emulated paths.
//!
//! Modules: [`netns`] (run ids, namespaces, stale cleanup), [`lab`] (a run's hosts: one
//! namespace, TUN device, addresses and hosts file each), [`device`] (the [`device::PacketIo`]
//! trait and TUN), [`packet`] (IPv4/IPv6 TCP/UDP/ICMP parsing into `PacketMeta`),
//! [`clock`] (real clock ↔ model time, absolute `timerfd` deadlines, 1 ns timer slack),
//! [`lateness`] (histograms), [`engine`] (the release loop), [`emulator`] (config → hosts →
//! loop → results). Python (`pathtwin.emulation`) owns processes, captures and result files.
//!
//! # Packet I/O and threading, and why
//! TUN devices (as Mahimahi), one per host, all read and written by **one thread** with one
//! epoll set and one `timerfd`. Measured on the 2-core development VM (shared with other
//! builds, so absolute numbers are noisy; `bench/emu/run.py`, iperf3 at MTU 1500, 5 s):
//!
//! | case | throughput | idle UDP RTT p50 (added over veth) | release lateness p50/p99 |
//! |---|---|---|---|
//! | raw veth between two namespaces | 10.9 Gbit/s | 114 µs (—) | — |
//! | pathtwin, unlimited path (0 ms, 100 Gbit/s) | 1.70 Gbit/s (0.16× veth) | 232 µs (+118 µs) | 201 / 672 µs |
//! | pathtwin, 1 Gbit/s, 1 ms RTT | 0.94 Gbit/s | 1244 µs (+131 µs beyond the 1 ms) | 54 / 4063 µs |
//!
//! Timer wake-ups (deadline → loop running) measured 25 µs p50, 74 µs p99 under load;
//! an idle 40 ms path echoes in 40.2–40.5 ms. With two cores for the emulator, two hosts'
//! kernels and iperf3, a second emulator thread has no core of its own, so one thread is
//! the choice here; AF_PACKET on veth was not measured yet (the trait is there for it).

pub mod clock;
pub mod device;
pub mod emulator;
pub mod engine;
pub mod lab;
pub mod lateness;
pub mod netns;
pub mod packet;

pub use emulator::{EmuError, Emulator, EmulatorOptions};
