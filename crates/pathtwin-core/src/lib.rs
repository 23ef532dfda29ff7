//! pathtwin-core: the network model shared by the simulator and the emulator.
//!
//! Everything here is sans-IO: no clock is read and no socket is touched. Time is an
//! argument (`now: Instant`), outputs are polled, and each element says when it next needs
//! attention (`next_wakeup`). The simulator drives these types from its event queue, the
//! emulator from a real-time loop, so both engines run the very same model.

pub mod time;
pub mod units;
