//! The Internet checksum (RFC 1071): the ones'-complement sum of a byte string's 16-bit
//! big-endian words, and its complement, which IPv4 headers (RFC 791), TCP and UDP carry.
//! One implementation for every packet pathtwin builds or rewrites: the simulator's
//! captures, and the emulator's restamped, marked and translated packets and the transport
//! checksums it completes for offloading devices (the pseudo-header sums those start from
//! are the emulator's, in `gso`).

/// The ones'-complement sum of `data` as big-endian 16-bit words, added to `initial` and
/// folded to 16 bits (RFC 1071 §4.1); an odd last byte is padded with zero. Not
/// complemented: a partial sum, to which a pseudo-header or more data may be added.
pub fn sum(data: &[u8], initial: u32) -> u16 {
    // Eight bytes at a time into a 64-bit accumulator: carries cannot overflow it for any
    // datagram (2^32 words), and folding at the end gives the same ones'-complement sum
    // (RFC 1071 §2(C), parallel summation: 2^16 ≡ 1 modulo 0xffff).
    let mut acc = u64::from(initial);
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_be_bytes(c.try_into().expect("8 bytes"));
        acc += (w >> 32) + (w & 0xffff_ffff);
    }
    for w in chunks.remainder().chunks(2) {
        acc += u64::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
    }
    fold(acc)
}

/// The checksum of `data`, whose checksum field holds zero (an IPv4 header) or the
/// pseudo-header sum (a transport segment): the complement of its sum.
pub fn of(data: &[u8]) -> u16 {
    !sum(data, 0)
}

/// The checksum after one 16-bit word it covers changed from `old` to `new`, without summing
/// the rest again (RFC 1624 eq. 3: HC' = ~(~HC + ~m + m')).
pub fn update(checksum: u16, old: u16, new: u16) -> u16 {
    !fold(u64::from(!checksum) + u64::from(!old) + u64::from(new))
}

/// Adds the carries above 16 bits back into the low 16 bits (the end-around carry) until
/// none is left.
fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 header with its checksum field zeroed (Wikipedia's worked example of the
    /// IPv4 header checksum: 0xb861).
    const HEADER: [u8; 20] = [0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7];

    #[test]
    fn checksum_of_a_known_header() {
        assert_eq!(of(&HEADER), 0xb861);
        // A header carrying its checksum sums to all ones.
        let mut h = HEADER;
        h[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert_eq!(of(&h), 0);
    }

    /// The eight-bytes-at-a-time sum agrees with RFC 1071's word-by-word definition on odd
    /// lengths and with a starting sum.
    #[test]
    fn the_wide_sum_equals_the_word_by_word_sum() {
        let word_by_word = |data: &[u8], initial: u32| {
            let mut s = initial;
            for w in data.chunks(2) {
                s += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
                s = (s & 0xffff) + (s >> 16);
            }
            ((s & 0xffff) + (s >> 16)) as u16
        };
        let data: Vec<u8> = (0..1001u32).map(|i| (i * 7919 % 256) as u8).collect();
        for len in [0, 1, 2, 7, 8, 9, 63, 1000, 1001] {
            for initial in [0, 6, 0x1_fffe] {
                assert_eq!(sum(&data[..len], initial), word_by_word(&data[..len], initial), "len {len}, initial {initial}");
            }
        }
    }

    #[test]
    fn an_update_equals_summing_again() {
        let ck = of(&HEADER);
        for new in [0x4500u16, 0x45b8, 0x0000, 0xffff] {
            let mut h = HEADER;
            h[0..2].copy_from_slice(&new.to_be_bytes());
            assert_eq!(update(ck, 0x4500, new), of(&h), "{new:#06x}");
        }
    }
}
