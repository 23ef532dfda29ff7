//! The classic pcap file format, writer side: the global header, record headers with
//! nanosecond timestamps (magic `0xa1b23c4d`) and bare IP packets (`LINKTYPE_RAW`, 101).
//! Shared by the simulator's per-host captures and the emulator's capture at Monarch's
//! proxy; what goes in a record is theirs (the checksums of the packets they build are
//! [`crate::checksum`]'s). Writing to a caller's `Write` keeps this sans-IO.

use std::io::{self, Write};

const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// Link type of bare IPv4/IPv6 packets.
pub const LINKTYPE_RAW: u32 = 101;

/// Writes the file's global header (version 2.4, records cut at `snaplen`).
pub fn write_header(w: &mut impl Write, snaplen: u32) -> io::Result<()> {
    w.write_all(&MAGIC_NANOS.to_le_bytes())?;
    w.write_all(&2u16.to_le_bytes())?;
    w.write_all(&4u16.to_le_bytes())?;
    w.write_all(&0i32.to_le_bytes())?;
    w.write_all(&0u32.to_le_bytes())?;
    w.write_all(&snaplen.to_le_bytes())?;
    w.write_all(&LINKTYPE_RAW.to_le_bytes())
}

/// Writes one record: `data` (what was kept of the packet) of a packet `orig_len` bytes long,
/// seen at `time_ns`.
pub fn write_record(w: &mut impl Write, time_ns: u64, data: &[u8], orig_len: u32) -> io::Result<()> {
    w.write_all(&((time_ns / 1_000_000_000) as u32).to_le_bytes())?;
    w.write_all(&((time_ns % 1_000_000_000) as u32).to_le_bytes())?;
    w.write_all(&(data.len() as u32).to_le_bytes())?;
    w.write_all(&orig_len.to_le_bytes())?;
    w.write_all(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_carries_seconds_and_nanoseconds() {
        let mut out = Vec::new();
        write_header(&mut out, 1500).unwrap();
        write_record(&mut out, 3_000_000_042, &[1, 2, 3], 60).unwrap();
        assert_eq!(out.len(), 24 + 16 + 3);
        assert_eq!(&out[24..28], &3u32.to_le_bytes());
        assert_eq!(&out[28..32], &42u32.to_le_bytes());
        assert_eq!(&out[32..36], &3u32.to_le_bytes());
        assert_eq!(&out[36..40], &60u32.to_le_bytes());
    }
}
