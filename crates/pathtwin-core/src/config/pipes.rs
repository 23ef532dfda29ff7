//! `[[pipe]]`: Monkey Do's per-connection paths (replay) — a server host, one address of a
//! client host, RTT, rate, queue, random loss and trace-driven drops per pipe — and their
//! checks (hosts, rates, drop offsets, the number of pipes a client can hold, and that a
//! host is either server or client).

use super::{ConfigError, Names, PerDirection};
use crate::time::Duration;
use crate::units::{Fraction, QueueLimit, Rate};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Most pipes one client host can hold (its pipe addresses are one /16).
pub const MAX_PIPES_PER_HOST: usize = 65_000;

/// `[[pipe]]`: Monkey Do's per-connection network (Cheng et al., USENIX ATC 2004, §4.1): a
/// Dummynet-style pair of pipes between a server host and *one address* of a client host.
/// A host named as the client of pipes gets one extra address per pipe (the n-th pipe of
/// that host, in file order, owns its n-th address), so thousands of connections, each from
/// its own address, each cross their own path while all their sockets live in one host.
/// Each direction is the trace's drops (`drop`), then a bandwidth queue (drop-tail) holding
/// the direction's half of `rtt`, then random loss, as a `[[link]]` direction is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipeConfig {
    /// `[server, client host]`; per-direction values are `[down, up]`, server to client
    /// first.
    pub between: [String; 2],
    /// Base RTT, split evenly between the directions.
    pub rtt: Duration,
    /// Bottleneck rate of each direction.
    pub rate: PerDirection<Rate>,
    /// Queue of each direction; by default Monkey's rule on the downstream rate (the
    /// topology's `monkey_pipe_queues`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<PerDirection<QueueLimit>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<PerDirection<Fraction>>,
    /// `[[down offsets], [up offsets]]`: the transmissions a capture showed lost, by byte
    /// offset from the direction's ISN + 1 (its first payload byte); an offset listed k
    /// times loses the first k transmissions covering it (`element::TraceLoss`). Each below
    /// 2^32: sequence numbers wrap there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop: Option<[Vec<u64>; 2]>,
}

/// Largest `drop` offset plus one: sequence numbers are 32 bits.
pub const DROP_OFFSET_LIMIT: u64 = 1 << 32;

/// Checks the `[[pipe]]` entries.
pub(super) fn validate(pipes: &[PipeConfig], hosts: &Names<'_>) -> Result<(), ConfigError> {
    for (i, p) in pipes.iter().enumerate() {
        for (j, h) in p.between.iter().enumerate() {
            hosts.require(h, || format!("pipe[{i}].between[{j}]"))?;
        }
        if p.between[0] == p.between[1] {
            return Err(ConfigError::invalid(format!("pipe[{i}].between"), "a pipe needs two different hosts"));
        }
        for d in 0..2 {
            if p.rate.get(d).bps() == 0 {
                return Err(ConfigError::invalid(format!("pipe[{i}].rate"), "rate must be positive"));
            }
        }
        for (d, offsets) in p.drop.iter().flatten().enumerate() {
            if let Some((j, o)) = offsets.iter().enumerate().find(|(_, &o)| o >= DROP_OFFSET_LIMIT) {
                return Err(ConfigError::invalid(
                    format!("pipe[{i}].drop[{d}][{j}]"),
                    format!("offset {o} is beyond a TCP stream's 32-bit sequence space (at most {})", DROP_OFFSET_LIMIT - 1),
                ));
            }
        }
    }
    let mut per_client: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, p) in pipes.iter().enumerate() {
        let n = per_client.entry(p.between[1].as_str()).or_default();
        *n += 1;
        if *n > MAX_PIPES_PER_HOST {
            return Err(ConfigError::invalid(format!("pipe[{i}]"), format!("host {:?} has more than {MAX_PIPES_PER_HOST} pipes", p.between[1])));
        }
    }
    let pipe_servers: BTreeSet<&str> = pipes.iter().map(|p| p.between[0].as_str()).collect();
    if let Some((i, p)) = pipes.iter().enumerate().find(|(_, p)| pipe_servers.contains(p.between[1].as_str())) {
        return Err(ConfigError::invalid(
            format!("pipe[{i}].between[1]"),
            format!("{:?} is the server of other pipes; a host is either a pipe server or a pipe client", p.between[1]),
        ));
    }
    Ok(())
}
