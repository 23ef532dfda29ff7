//! Flow monitor: counts active foreground flows through a bandwidth queue, per path slot.
//!
//! NSDI'09 §3.2: "a traffic monitor counts the number of active foreground flows on each path,
//! and informs the emulator which table entry to use". A flow becomes active with its first
//! packet that carries payload (so the ACK stream of a flow in the other direction is not a
//! foreground flow here), and inactive at FIN or RST or after `idle_timeout` without payload.
//! The same code serves both engines: the simulator's TCP and the emulator's real kernel TCP
//! produce the same SYN/FIN/RST signals.

use crate::packet::{FlowKey, PacketMeta};
use crate::time::{Duration, Instant};
use std::collections::BTreeMap;

/// Default idle timeout after which a silent flow no longer counts.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug)]
struct FlowState {
    slot: u16,
    last_payload: Instant,
}

#[derive(Clone, Debug)]
pub struct FlowMonitor {
    flows: BTreeMap<FlowKey, FlowState>,
    active: Vec<u32>,
    idle_timeout: Duration,
    /// Idle flows are swept at most every quarter timeout, so a packet costs O(log flows).
    next_sweep: Instant,
}

impl FlowMonitor {
    pub fn new(slots: usize, idle_timeout: Duration) -> Self {
        FlowMonitor { flows: BTreeMap::new(), active: vec![0; slots.max(1)], idle_timeout, next_sweep: Instant::ZERO }
    }

    /// Observes one packet of path `slot`; returns true if the active counts changed.
    pub fn observe<P: PacketMeta>(&mut self, now: Instant, pkt: &P, slot: u16) -> bool {
        let mut changed = self.expire(now);
        let key = pkt.flow_key();
        let ends = pkt.tcp_flags().is_some_and(|f| f.fin || f.rst);
        if ends {
            if let Some(st) = self.flows.remove(&key) {
                self.active[st.slot as usize] -= 1;
                changed = true;
            }
        } else if pkt.payload_len() > 0 {
            match self.flows.get_mut(&key) {
                Some(st) => st.last_payload = now,
                None => {
                    let slot = slot.min(self.active.len() as u16 - 1);
                    self.flows.insert(key, FlowState { slot, last_payload: now });
                    self.active[slot as usize] += 1;
                    changed = true;
                }
            }
        }
        changed
    }

    /// Drops flows idle for longer than the timeout; returns true if any was dropped.
    pub fn expire(&mut self, now: Instant) -> bool {
        if now < self.next_sweep {
            return false;
        }
        let timeout = self.idle_timeout;
        // At least a nanosecond ahead: a sweep due at the time it ran would have the element
        // woken at that very time again, forever (validation keeps the timeout at 1 ms or more;
        // a network built by hand may not).
        self.next_sweep = now + Duration::from_nanos((timeout.as_nanos() / 4).max(1));
        let before = self.flows.len();
        let active = &mut self.active;
        self.flows.retain(|_, st| {
            let keep = now.saturating_since(st.last_payload) <= timeout;
            if !keep {
                active[st.slot as usize] -= 1;
            }
            keep
        });
        self.flows.len() != before
    }

    /// When a sweep could next retire an idle flow; `None` while no flow is active.
    /// Drivers wake the owning queue then, so that counts (and with them the ABW) fall when
    /// traffic stops, not only when the next packet arrives.
    pub fn next_expiry_check(&self) -> Option<Instant> {
        if self.flows.is_empty() {
            return None;
        }
        Some(self.next_sweep)
    }

    /// Active flows per slot.
    pub fn active(&self) -> &[u32] {
        &self.active
    }

    pub fn total_active(&self) -> u32 {
        self.active.iter().sum()
    }
}
