//! pathtwin-emu: the pathtwin-core model driven by a real clock, so that real programs in
//! network namespaces — with the kernel's own TCP — talk across emulated paths.
//!
//! Modules: [`netns`] (run ids, namespaces, stale cleanup), [`lab`] (a run's hosts: one
//! namespace, TUN device, addresses and hosts file each), [`device`] (the [`device::PacketIo`]
//! trait and TUN), [`gso`] (segmentation offload: super-packets cut into wire segments and
//! merged back), [`packet`] (IPv4/IPv6 TCP/UDP/ICMP parsing into `PacketMeta`),
//! [`clock`] (real clock ↔ model time, absolute `timerfd` deadlines, 1 ns timer slack),
//! [`lateness`] (histograms), [`priority`] (the loop thread's scheduling), [`engine`] (the
//! release loop), [`tcpinfo`] (the `sock_diag` wire format and `struct tcp_info`),
//! [`sampler`] (the thread sampling every host's TCP sockets into `flow_series`),
//! [`spill`] (time series written to an unlinked file as they come, so that a long run's
//! memory stays flat), [`long_tables`] (the tables that grow with a run's length, read back
//! from those files a row group at a time), [`monarch`] (Monarch's probe translation, sans-IO), [`real_target`] (Monarch's probes to a host outside the emulation, through the machine's own stack), [`workload`] (the
//! config's `[[flow]]` workload as kernel TCP between the hosts, written as the simulator's
//! `flows` table), [`emulator`] (config → hosts → loop → results). Python
//! (`pathtwin.emulation`) owns processes, captures and result files.
//!
//! # Packet I/O and threading, and why
//! TUN devices (as Mahimahi), one per host, all read and written by **one thread** with one
//! epoll set and one `timerfd`; each datagram is carried through the model and written
//! before the next is read. Measured on the 2-core development VM with `bench/emu/run.py`
//! (iperf3 at MTU 1500, 5 s; idle UDP echo RTT; every case of a pass under the same CPU idle
//! policy; pathtwin's defaults: nice −20 with `SCHED_FIFO` while mostly idle, idle CPUs
//! polling):
//!
//! | case | throughput | idle RTT p50 (added over veth) | release lateness p50/p99/max |
//! |---|---|---|---|
//! | raw veth between two namespaces | 14.9 Gbit/s | 21 µs (—) | — |
//! | pathtwin, unlimited path (0 ms, 100 Gbit/s) | 2.41 Gbit/s | 41 µs (+20 µs) | 0 / 1 / 217 µs |
//! | Rattan 0.1.1, same (AF_PACKET on veth, one worker) | 1.22 Gbit/s | 137 µs (+116 µs) | — |
//! | pathtwin, 1 Gbit/s, 1 ms RTT | 0.96 Gbit/s | 1084 µs | 18 / 82 / 1560 µs |
//! | Rattan, 1 Gbit/s, 1 ms RTT | 0.63 Gbit/s | 1090 µs | — |
//!
//! With CPUs that halt when idle (`cpu_latency_qos` off) throughput is the same but a
//! sleeping loop takes tens of µs to wake: unlimited path +260–280 µs over veth (Rattan
//! +100–150 µs). What got the loop from 1.6 to 2.4 Gbit/s and from +100 to +20 µs: a timer
//! heap with one live entry per element instead of a growing queue of duplicates
//! ([`engine`]), no preemption by the hosts it wakes ([`priority`]), polling idle CPUs
//! ([`clock::CpuLatencyRequest`]), buffers reused instead of allocated.
//! A profile of the unlimited path then shows the kernel's own work dominating: the receiving
//! host's TCP runs in the loop's `write(2)` (TUN delivers in the writer's context), which
//! AF_PACKET on veth (Rattan's choice) does as well, so it was not pursued. With two cores for
//! the emulator, two hosts' kernels and iperf3, a second emulator thread has no core of its
//! own; one thread is the choice here. Timer wake-ups (deadline → loop running) are ~20 µs
//! at p50; `--spin-us 30` wakes that much early and polls through, for lateness p50 < 1 µs.
//!
//! # Segmentation offload
//! The table above is one datagram per system call. With TUN offload (the default, [`gso`])
//! a host's TCP hands over 64-KB super-packets and takes merged ones back; the model still
//! sees every MTU-sized segment. `bench/emu/run.py`, same VM, one run, idle CPUs polling (the
//! halting pass agrees: 10.6 against 14.9 Gbit/s):
//!
//! | case | throughput | × veth | × Rattan |
//! |---|---|---|---|
//! | raw veth | 15.3 Gbit/s | 1 | |
//! | pathtwin, unlimited path, offload | 10.9 Gbit/s | 0.72 | 15.6 |
//! | pathtwin, unlimited path, no offload | 1.07 Gbit/s | 0.07 | 1.5 |
//! | Rattan 0.1.1, same | 0.70 Gbit/s | 0.05 | 1 |
//! | pathtwin, 1 Gbit/s, 1 ms RTT (offload) | 0.96 Gbit/s | | 1.75 |
//!
//! The idle RTT is the same with and without offload (small datagrams are never cut). What is
//! left on the loop's thread is the kernel's: copying each super-packet out of the sender's
//! device and into the receiver's (a third of its time), the receiving host's TCP (which runs
//! in the loop's `writev`), and a fifth in the model and the cutting and merging.

pub mod clock;
pub mod device;
pub mod emulator;
pub mod engine;
pub mod flow_records;
pub mod gso;
pub mod lab;
pub mod lateness;
pub mod long_tables;
pub mod monarch;
pub mod netns;
pub mod packet;
pub mod priority;
pub mod real_target;
pub mod sampler;
pub mod spill;
pub mod tcpinfo;
pub mod workload;

pub use emulator::{EmuError, Emulator, EmulatorOptions};
