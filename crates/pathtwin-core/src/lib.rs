//! pathtwin-core: the network model shared by the simulator and the emulator.
//!
//! Everything here is sans-IO: no clock is read and no socket is touched. Time is an
//! argument (`now: Instant`), outputs are polled, and each element says when it next needs
//! attention (`next_wakeup`). The simulator drives these types from its event queue, the
//! emulator from a real-time loop, so both engines run the very same model.
//!
//! Modules: [`time`] and [`units`] (quantities), [`packet`] (what the model reads of a
//! packet), [`qdisc`] (queue disciplines), [`element`] (delay, bandwidth queue with
//! placeholders and reactivity, loss, marker), [`marker`] (DiffServ markers), [`monitor`] (foreground flow counting), [`bounds`]
//! (NSDI'09 Eq. 2/4), [`pcapfile`] (writing captures), [`checksum`] (the Internet checksum), [`config`] (the one config
//! schema), [`topology`] (compiling a config to routes over shared elements), [`driver`] (the one network driver both
//! engines run: wake-ups, hop forwarding, queue sampling), [`table`] (columnar result tables), [`results`] (every result
//! table's schema), [`app`] (the `[[flow]]` workload's applications: bulk, on/off,
//! request/response, replay) and [`replay`] (Monkey Do's re-enactment of a traced connection);
//! both engines' workloads run these two.

pub mod app;
pub mod bounds;
pub mod checksum;
pub mod config;
pub mod driver;
pub mod element;
pub mod marker;
pub mod monitor;
pub mod packet;
pub mod pcapfile;
pub mod qdisc;
pub mod replay;
pub mod results;
pub mod table;
pub mod time;
pub mod topology;
pub mod units;

/// The RNG every element and engine uses: small, fast, and reproducible from a `u64` seed.
pub type Rng = rand_xoshiro::Xoshiro256PlusPlus;

/// Derives an independent RNG for one component from the run seed and a stable component id,
/// so that adding an element does not shift the random streams of the others.
pub fn rng_for(seed: u64, component: u64) -> Rng {
    use rand::SeedableRng;
    // SplitMix64 finalizer decorrelates neighbouring ids.
    let mut z = seed ^ component.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    Rng::seed_from_u64(z ^ (z >> 31))
}
