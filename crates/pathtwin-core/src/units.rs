//! Physical quantities used in configs: [`Rate`], [`Size`], [`QueueLimit`], [`Fraction`], and
//! [`Duration`] parsing, with errors that quote the offending text.
//!
//! Conventions (stated once, used everywhere): rates are **bits** per second — `bit`,
//! `kbit`, `mbit`, `gbit` and the paper spellings `bps`, `kbps`, `Mbps`, `Gbps` all mean bits;
//! decimal prefixes are powers of 1000. Sizes are bytes: `B`, `KB` = 1000 B, `MB`, `GB`,
//! and binary `KiB`, `MiB`, `GiB`. Queue limits are a size or a packet count (`100p`,
//! `100pkt`). Times take `ns`, `us`, `ms`, `s`, `min`. Fractions take `%` or a plain number
//! in [0, 1]. A bare number without a unit is rejected (except for fractions), because a
//! silent unit is the most common config mistake in network experiments.
//!
//! Each quantity has a ceiling far above any network's (1 Pbit/s, 1 PB, 10¹² packets, 30
//! years), so that the model's integer arithmetic on them (bytes × 8 × 10⁹, packets × MTU,
//! two directions' queues added) cannot overflow.

use crate::time::Duration;
use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// Why a quantity could not be parsed. The message quotes the text it was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// The text has no number at its start.
    #[error("invalid {kind} {text:?}: expected a number followed by a unit, e.g. {example}")]
    NoNumber { kind: &'static str, text: String, example: &'static str },
    /// A number without a unit, where a unit is required.
    #[error("invalid {kind} {text:?}: missing unit, e.g. {example}")]
    MissingUnit { kind: &'static str, text: String, example: &'static str },
    /// The suffix is not one of the known units.
    #[error("invalid {kind} {text:?}: unknown unit {unit:?} (expected one of {expected})")]
    UnknownUnit { kind: &'static str, text: String, unit: String, expected: &'static str },
    /// The value is negative, NaN, infinite or out of range.
    #[error("invalid {kind} {text:?}: {reason}")]
    OutOfRange { kind: &'static str, text: String, reason: &'static str },
}

/// Splits "4.3mbit" into (4.3, "mbit"); rejects negative and non-finite numbers.
fn split_number<'a>(
    kind: &'static str,
    text: &'a str,
    example: &'static str,
) -> Result<(f64, &'a str), UnitError> {
    split_number_text(kind, text, example).map(|(v, _, unit)| (v, unit))
}

/// [`split_number`], with the number's own text ("4.3") between the value and the unit.
fn split_number_text<'a>(
    kind: &'static str,
    text: &'a str,
    example: &'static str,
) -> Result<(f64, &'a str, &'a str), UnitError> {
    let t = text.trim();
    // The number is the longest prefix that parses as a float ("1e3kbit" -> "1e3").
    let end = (1..=t.len())
        .rev()
        .filter(|&i| t.is_char_boundary(i))
        .find(|&i| t[..i].parse::<f64>().is_ok() && !t[..i].ends_with(|c: char| c.is_alphabetic() && c != 'e'))
        .unwrap_or(0);
    let (num, unit) = t.split_at(end);
    let value: f64 = num
        .parse()
        .map_err(|_| UnitError::NoNumber { kind, text: text.to_string(), example })?;
    if !value.is_finite() {
        return Err(UnitError::OutOfRange { kind, text: text.to_string(), reason: "not a finite number" });
    }
    if value < 0.0 {
        return Err(UnitError::OutOfRange { kind, text: text.to_string(), reason: "must not be negative" });
    }
    Ok((value, num, unit.trim()))
}

/// A data rate in bits per second.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Rate(u64);

impl Rate {
    pub const ZERO: Rate = Rate(0);

    pub const fn from_bps(bps: u64) -> Self {
        Rate(bps)
    }
    pub const fn from_kbps(k: u64) -> Self {
        Rate(k * 1_000)
    }
    pub const fn from_mbps(m: u64) -> Self {
        Rate(m * 1_000_000)
    }
    pub const fn bps(self) -> u64 {
        self.0
    }
    pub fn as_f64(self) -> f64 {
        self.0 as f64
    }
    /// Time to serialize `bytes` at this rate, rounded up to the next nanosecond so that a
    /// link never runs faster than configured. Zero rate means "never".
    pub fn transmit_time(self, bytes: u64) -> Duration {
        if self.0 == 0 {
            return Duration::MAX;
        }
        // Packet sizes take the fast 64-bit path; u128 only for huge byte counts.
        if bytes < 1 << 31 {
            return Duration::from_nanos((bytes * 8_000_000_000).div_ceil(self.0));
        }
        let bits = bytes as u128 * 8 * 1_000_000_000;
        Duration::from_nanos(bits.div_ceil(self.0 as u128).min(u64::MAX as u128) as u64)
    }
    /// Bytes this rate carries in `d` (rounded down), `u64::MAX` if more (a petabit for 30
    /// years is 10²³ bytes: a plain cast would wrap it to any number).
    pub fn bytes_in(self, d: Duration) -> u64 {
        (self.0 as u128 * d.as_nanos() as u128 / 8_000_000_000).min(u64::MAX as u128) as u64
    }
    pub fn saturating_sub(self, other: Rate) -> Rate {
        Rate(self.0.saturating_sub(other.0))
    }
}

impl FromStr for Rate {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        const KIND: &str = "rate";
        const EX: &str = "\"10mbit\"";
        const EXPECTED: &str = "bit, kbit, mbit, gbit, bps, kbps, Mbps, Gbps";
        let (v, unit) = split_number(KIND, s, EX)?;
        let mult = match unit {
            "" => return Err(UnitError::MissingUnit { kind: KIND, text: s.into(), example: EX }),
            "bit" | "bps" | "b/s" => 1.0,
            "kbit" | "Kbit" | "kbps" | "Kbps" | "kb/s" => 1e3,
            "mbit" | "Mbit" | "mbps" | "Mbps" | "Mb/s" => 1e6,
            "gbit" | "Gbit" | "gbps" | "Gbps" | "Gb/s" => 1e9,
            _ => {
                return Err(UnitError::UnknownUnit { kind: KIND, text: s.into(), unit: unit.into(), expected: EXPECTED })
            }
        };
        let bps = v * mult;
        if bps > 1e15 {
            return Err(UnitError::OutOfRange { kind: KIND, text: s.into(), reason: "above 1 Pbit/s" });
        }
        Ok(Rate(bps.round() as u64))
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b != 0 && b % 1_000_000_000 == 0 {
            write!(f, "{}gbit", b / 1_000_000_000)
        } else if b != 0 && b % 1_000_000 == 0 {
            write!(f, "{}mbit", b / 1_000_000)
        } else if b != 0 && b % 1_000 == 0 {
            write!(f, "{}kbit", b / 1_000)
        } else {
            write!(f, "{b}bit")
        }
    }
}
impl fmt::Debug for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// An amount of data in bytes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Size(u64);

impl Size {
    pub const fn from_bytes(b: u64) -> Self {
        Size(b)
    }
    pub const fn bytes(self) -> u64 {
        self.0
    }
}

/// The largest size and byte queue a config may give, in bytes (1 PB; see the module docs).
pub const MAX_BYTES: u64 = 1_000_000_000_000_000;
/// The largest queue in packets (10¹²: 1.5 PB of full-size packets).
const MAX_PACKETS: f64 = 1e12;

fn size_multiplier(unit: &str) -> Option<f64> {
    Some(match unit {
        "B" | "b" | "byte" | "bytes" => 1.0,
        "KB" | "kB" | "K" | "k" => 1e3,
        "MB" | "M" => 1e6,
        "GB" | "G" => 1e9,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    })
}
const SIZE_UNITS: &str = "B, KB, MB, GB, KiB, MiB, GiB";

impl FromStr for Size {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        const KIND: &str = "size";
        const EX: &str = "\"64KB\"";
        let (v, unit) = split_number(KIND, s, EX)?;
        if unit.is_empty() {
            return Err(UnitError::MissingUnit { kind: KIND, text: s.into(), example: EX });
        }
        let mult = size_multiplier(unit).ok_or_else(|| UnitError::UnknownUnit {
            kind: KIND,
            text: s.into(),
            unit: unit.into(),
            expected: SIZE_UNITS,
        })?;
        let bytes = v * mult;
        if bytes > MAX_BYTES as f64 {
            return Err(UnitError::OutOfRange { kind: KIND, text: s.into(), reason: "above 1 PB" });
        }
        Ok(Size(bytes.round() as u64))
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b != 0 && b % 1_000_000 == 0 {
            write!(f, "{}MB", b / 1_000_000)
        } else if b != 0 && b % 1_024 == 0 {
            write!(f, "{}KiB", b / 1_024)
        } else if b != 0 && b % 1_000 == 0 {
            write!(f, "{}KB", b / 1_000)
        } else {
            write!(f, "{b}B")
        }
    }
}
impl fmt::Debug for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A queue's capacity: bytes or packets.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueueLimit {
    Bytes(u64),
    Packets(u64),
}

impl FromStr for QueueLimit {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        const KIND: &str = "queue size";
        const EX: &str = "\"100p\" or \"64KB\"";
        let (v, unit) = split_number(KIND, s, EX)?;
        match unit {
            "" => Err(UnitError::MissingUnit { kind: KIND, text: s.into(), example: EX }),
            "p" | "pkt" | "pkts" | "packets" => {
                if v.fract() != 0.0 {
                    return Err(UnitError::OutOfRange { kind: KIND, text: s.into(), reason: "packet count must be whole" });
                }
                if v > MAX_PACKETS {
                    return Err(UnitError::OutOfRange { kind: KIND, text: s.into(), reason: "above 10^12 packets" });
                }
                Ok(QueueLimit::Packets(v as u64))
            }
            u => match size_multiplier(u) {
                Some(m) if v * m > MAX_BYTES as f64 => Err(UnitError::OutOfRange { kind: KIND, text: s.into(), reason: "above 1 PB" }),
                Some(m) => Ok(QueueLimit::Bytes((v * m).round() as u64)),
                None => Err(UnitError::UnknownUnit {
                    kind: KIND,
                    text: s.into(),
                    unit: u.into(),
                    expected: "p, pkt, B, KB, MB, KiB, MiB",
                }),
            },
        }
    }
}

impl fmt::Display for QueueLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueLimit::Bytes(b) => fmt::Display::fmt(&Size(*b), f),
            QueueLimit::Packets(p) => write!(f, "{p}p"),
        }
    }
}
impl fmt::Debug for QueueLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A probability or share in [0, 1].
#[derive(Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct Fraction(f64);

impl Fraction {
    pub const ZERO: Fraction = Fraction(0.0);
    pub fn new(v: f64) -> Option<Self> {
        (0.0..=1.0).contains(&v).then_some(Fraction(v))
    }
    pub fn get(self) -> f64 {
        self.0
    }
}

impl FromStr for Fraction {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        const KIND: &str = "fraction";
        let (v, unit) = split_number(KIND, s, "\"1%\" or \"0.01\"")?;
        let v = match unit {
            "%" => v / 100.0,
            "" => v,
            u => {
                return Err(UnitError::UnknownUnit { kind: KIND, text: s.into(), unit: u.into(), expected: "% or none" })
            }
        };
        Fraction::new(v).ok_or(UnitError::OutOfRange { kind: KIND, text: s.into(), reason: "must lie in [0, 1] (0% to 100%)" })
    }
}

impl fmt::Display for Fraction {
    /// A percentage when that text parses back to this very number, else the plain number:
    /// configs are written back with this (JSON, TOML), and 0.007 × 100 is
    /// 0.7000000000000001, whose hundredth is not 0.007.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let percent = self.0 * 100.0;
        if percent / 100.0 == self.0 {
            write!(f, "{percent}%")
        } else {
            write!(f, "{}", self.0)
        }
    }
}
impl fmt::Debug for Fraction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Parses a time span such as "50ms", "1.5s" or "200us".
pub fn parse_duration(s: &str) -> Result<Duration, UnitError> {
    const KIND: &str = "time";
    const EX: &str = "\"50ms\"";
    let (v, num, unit) = split_number_text(KIND, s, EX)?;
    let (mult, unit_ns): (f64, u64) = match unit {
        "" => return Err(UnitError::MissingUnit { kind: KIND, text: s.into(), example: EX }),
        "ns" => (1e-9, 1),
        "us" | "µs" => (1e-6, 1_000),
        "ms" => (1e-3, 1_000_000),
        "s" | "sec" => (1.0, 1_000_000_000),
        "min" | "m" => (60.0, 60_000_000_000),
        "h" => (3600.0, 3_600_000_000_000),
        u => {
            return Err(UnitError::UnknownUnit { kind: KIND, text: s.into(), unit: u.into(), expected: "ns, us, ms, s, min, h" })
        }
    };
    let secs = v * mult;
    if secs > 1e9 {
        return Err(UnitError::OutOfRange { kind: KIND, text: s.into(), reason: "longer than 30 years" });
    }
    // In integers where the digits allow: seconds in an f64 lose nanoseconds beyond 2^53 ns
    // (104 days), so "822803136531ms" would not read back as itself once written in ns.
    let exact = exact_nanos(num, unit_ns.into()).and_then(|ns| u64::try_from(ns).ok());
    Ok(exact.map_or_else(|| Duration::from_secs_f64(secs), Duration::from_nanos))
}

/// The decimal `num` ("2.5", "1e3", "+.5": what `split_number_text` accepts) times `unit_ns`
/// nanoseconds, rounded half up, computed on its digits; `None` when they overflow `u128`.
fn exact_nanos(num: &str, unit_ns: u128) -> Option<u128> {
    let num = num.strip_prefix('+').unwrap_or(num);
    let (mantissa, exponent) = match num.find(['e', 'E']) {
        Some(i) => (&num[..i], num[i + 1..].parse::<i32>().ok()?),
        None => (num, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut digits: u128 = 0;
    for c in whole.chars().chain(fraction.chars()) {
        digits = digits.checked_mul(10)?.checked_add(c.to_digit(10)?.into())?;
    }
    let scaled = digits.checked_mul(unit_ns)?;
    let power = exponent.checked_sub(i32::try_from(fraction.len()).ok()?)?;
    if power >= 0 {
        scaled.checked_mul(10u128.checked_pow(power.unsigned_abs())?)
    } else {
        let divisor = 10u128.checked_pow(power.unsigned_abs())?;
        Some(scaled.checked_add(divisor / 2)? / divisor)
    }
}

// --- serde: quantities are strings with units in config files and in run.json ---

/// Deserializes a string (or, for fractions, a number) through `FromStr`, so that errors quote
/// the text; numbers without units are refused with the same message as in a string.
macro_rules! string_quantity_serde {
    ($ty:ty, $parse:expr, $expecting:literal, $numbers_ok:expr) => {
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> de::Visitor<'de> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_str<E: de::Error>(self, s: &str) -> Result<$ty, E> {
                        $parse(s).map_err(E::custom)
                    }
                    fn visit_f64<E: de::Error>(self, v: f64) -> Result<$ty, E> {
                        if $numbers_ok {
                            $parse(&v.to_string()).map_err(E::custom)
                        } else {
                            Err(E::custom(format!("{} needs a unit, as a string: {}", v, $expecting)))
                        }
                    }
                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<$ty, E> {
                        self.visit_f64(v as f64)
                    }
                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$ty, E> {
                        self.visit_f64(v as f64)
                    }
                }
                d.deserialize_any(V)
            }
        }
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
    };
}

string_quantity_serde!(Rate, |s: &str| s.parse::<Rate>(), "a rate such as \"10mbit\"", false);
string_quantity_serde!(Size, |s: &str| s.parse::<Size>(), "a size such as \"64KB\"", false);
string_quantity_serde!(QueueLimit, |s: &str| s.parse::<QueueLimit>(), "a queue size such as \"100p\" or \"64KB\"", false);
string_quantity_serde!(Fraction, |s: &str| s.parse::<Fraction>(), "a fraction such as \"1%\" or 0.01", true);
string_quantity_serde!(Duration, parse_duration, "a time such as \"50ms\"", false);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_bits_per_second_with_decimal_prefixes() {
        assert_eq!("4.3mbit".parse::<Rate>().unwrap().bps(), 4_300_000);
        assert_eq!("409kbit".parse::<Rate>().unwrap().bps(), 409_000);
        assert_eq!("100Mbps".parse::<Rate>().unwrap().bps(), 100_000_000);
        assert_eq!("1e3kbit".parse::<Rate>().unwrap().bps(), 1_000_000);
    }

    #[test]
    fn sizes_distinguish_decimal_and_binary_prefixes() {
        assert_eq!("73KB".parse::<Size>().unwrap().bytes(), 73_000);
        assert_eq!("64KiB".parse::<Size>().unwrap().bytes(), 65_536);
        assert_eq!("100p".parse::<QueueLimit>().unwrap(), QueueLimit::Packets(100));
        assert_eq!("1MB".parse::<QueueLimit>().unwrap(), QueueLimit::Bytes(1_000_000));
    }

    #[test]
    fn times_and_fractions() {
        assert_eq!(parse_duration("50ms").unwrap(), Duration::from_millis(50));
        assert_eq!(parse_duration("2.5ms").unwrap(), Duration::from_micros(2500));
        assert_eq!("1%".parse::<Fraction>().unwrap().get(), 0.01);
        assert_eq!("0.25".parse::<Fraction>().unwrap().get(), 0.25);
    }

    #[test]
    fn errors_quote_the_bad_text() {
        let e = "4.3mbt".parse::<Rate>().unwrap_err().to_string();
        assert!(e.contains("\"4.3mbt\"") && e.contains("\"mbt\""), "{e}");
        let e = "-5mbit".parse::<Rate>().unwrap_err().to_string();
        assert!(e.contains("negative"), "{e}");
        let e = "10".parse::<Rate>().unwrap_err().to_string();
        assert!(e.contains("missing unit"), "{e}");
        assert!("150%".parse::<Fraction>().is_err());
        assert!(parse_duration("fast").is_err());
    }

    #[test]
    fn transmit_time_never_rounds_down() {
        // 1500 B at 10 Mbit/s is exactly 1.2 ms.
        assert_eq!(Rate::from_mbps(10).transmit_time(1500), Duration::from_micros(1200));
        // 1 B at 3 bit/s is 2.666..s: rounded up.
        assert_eq!(Rate::from_bps(3).transmit_time(1).as_nanos(), 2_666_666_667);
    }

    #[test]
    fn display_round_trips() {
        for s in ["10mbit", "409kbit", "73KB", "64KiB", "100p"] {
            let q: QueueLimit = if s.ends_with('p') || s.ends_with('B') { s.parse().unwrap() } else { QueueLimit::Packets(0) };
            if s.ends_with("bit") {
                assert_eq!(s.parse::<Rate>().unwrap().to_string(), s);
            } else {
                assert_eq!(q.to_string(), s);
            }
        }
    }
}
