//! pathtwin-sim: the discrete-event simulator.
//!
//! It compiles a config with `pathtwin-core`'s topology compiler, runs simulated TCP
//! connections (`pathtwin-tcp`) between the hosts, and drives every element and endpoint
//! from one [`event::EventQueue`] on a virtual clock: the network through `pathtwin-core`'s
//! [`pathtwin_core::driver::Driver`] (the emulator's too), the endpoints itself, and the
//! workload's applications ([`pathtwin_core::app`], the emulator's too) on those endpoints. Identical config and seed give identical tables, bit for bit. Results are
//! columnar tables with the schemas of [`pathtwin_core::results`]: per-flow summary, per-flow
//! time series, per-queue summary and per-queue time series.
//!
//! `[[probe]]` series send light datagrams between hosts, each echoed, and record their
//! times (the `probes` table): what `pathtwin measure` probes real hosts with.
//!
//! Flows may run over `[[pipe]]`s, one path per connection, and replay a traced connection
//! (`app = "replay"`, [`pathtwin_core::replay`]): Monkey Do's replay of a workload, simulated.
//!
//! With `[run] pcap = [hosts]` and [`Simulation::capture_to`], every packet those hosts send
//! or receive is written to `<host>.pcap` ([`pcap`]).
//!
//! Drive it with [`Simulation::advance`] in chunks (so a front end can show progress and stop
//! on Ctrl-C keeping what was measured) or with [`Simulation::run`] to the end.

pub mod event;
pub mod packet;
pub mod pcap;
mod probes;
mod sim;
mod tcp_settings;

pub use sim::{Results, SimError, Simulation, TcpDefaults};

/// The names `[tcp] cc` accepts in the simulator.
pub fn congestion_controls() -> &'static [&'static str] {
    pathtwin_tcp::CcAlgorithm::simulator_names()
}
