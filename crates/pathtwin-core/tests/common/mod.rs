//! What the integration tests share: a packet type to compile networks with (the tests
//! only look at the compiled elements, never at packets).

use pathtwin_core::packet::{FlowKey, PacketMeta, TcpFlags};

pub struct P;

impl PacketMeta for P {
    fn wire_len(&self) -> u32 {
        1500
    }
    fn payload_len(&self) -> u32 {
        1460
    }
    fn flow_key(&self) -> FlowKey {
        0
    }
    fn tcp_flags(&self) -> Option<TcpFlags> {
        None
    }
}
