//! pathtwin-emu: the pathtwin-core model driven by a real clock, so that real programs in
//! network namespaces talk across emulated paths.
pub mod clock;
pub mod device;
pub mod emulator;
pub mod engine;
pub mod lab;
pub mod lateness;
pub mod netns;
pub mod packet;

pub use emulator::{EmuError, Emulator, EmulatorOptions};
