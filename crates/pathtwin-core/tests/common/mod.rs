//! What the integration tests share: a packet type, 1500 bytes on the wire, whose only
//! content is its drop precedence (its flow is its mark: flow 1 for OUT, 0 otherwise).

use pathtwin_core::packet::{FlowKey, Mark, PacketMeta, TcpFlags};

#[derive(Debug)]
pub struct P(pub Mark);

impl PacketMeta for P {
    fn wire_len(&self) -> u32 {
        1500
    }
    fn payload_len(&self) -> u32 {
        1460
    }
    fn flow_key(&self) -> FlowKey {
        u64::from(self.0 == Mark::Out)
    }
    fn tcp_flags(&self) -> Option<TcpFlags> {
        None
    }
    fn mark(&self) -> Mark {
        self.0
    }
}
