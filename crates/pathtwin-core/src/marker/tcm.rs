//! The three-colour meters: single rate (srTCM, RFC 2697) and two rate (trTCM, RFC 2698), in
//! colour-blind mode (each packet metered as if uncoloured, the default) or colour-aware mode
//! (a colour set upstream can only get worse). A packet's precolour is read from its mark,
//! which has two drop precedences: OUT (AF12/AF13 on the wire) is yellow, IN and unmarked are
//! green — so a colour-aware meter never sees a red precolour.
//!
//! Both RFCs update the buckets "CIR times per second" by one byte; here the tokens a rate
//! delivers since the last packet are added at once, in exact integer units, which is the
//! same as the RFCs' per-byte increments evaluated at the packet's arrival. Both buckets
//! start full (RFC 2697 §3, RFC 2698 §3). Rates are configured in bit/s and the RFCs' byte
//! rates are their eighth.

use super::bucket::{units_between, Tokens};
use super::Color;
use crate::time::Instant;
use crate::units::{Rate, Size};

/// RFC 2697 single rate three colour marker: committed bucket C (size CBS) and excess bucket
/// E (size EBS), both filled at CIR — E only with what overflows C (§3).
#[derive(Clone, Debug)]
pub struct SrTcm {
    cir: Rate,
    c: Tokens,
    e: Tokens,
    last: Instant,
    color_aware: bool,
}

impl SrTcm {
    pub fn new(cir: Rate, cbs: Size, ebs: Size) -> SrTcm {
        SrTcm { cir, c: Tokens::full(cbs), e: Tokens::full(ebs), last: Instant::ZERO, color_aware: false }
    }

    /// Colour-aware mode (RFC 2697 §4.2) instead of colour-blind.
    pub fn color_aware(self, on: bool) -> SrTcm {
        SrTcm { color_aware: on, ..self }
    }

    pub fn is_color_aware(&self) -> bool {
        self.color_aware
    }

    /// RFC 2697 §4.1, colour-blind: green if Tc ≥ B (Tc −= B), else yellow if Te ≥ B
    /// (Te −= B), else red. §4.2, colour-aware: green only for a green `pre` packet, yellow
    /// only for a green or yellow one; a red one stays red and takes no tokens.
    pub(crate) fn color(&mut self, now: Instant, len: u32, pre: Color) -> Color {
        let overflow = self.c.add(units_between(self.cir, self.last, now));
        self.e.add(overflow);
        self.last = now.max(self.last);
        let pre = if self.color_aware { pre } else { Color::Green };
        if pre == Color::Green && self.c.covers(len) {
            self.c.take(len);
            Color::Green
        } else if pre != Color::Red && self.e.covers(len) {
            self.e.take(len);
            Color::Yellow
        } else {
            Color::Red
        }
    }
}

/// RFC 2698 two rate three colour marker: peak bucket P (size PBS, rate PIR) and committed
/// bucket C (size CBS, rate CIR), each filled independently (§3).
#[derive(Clone, Debug)]
pub struct TrTcm {
    cir: Rate,
    pir: Rate,
    c: Tokens,
    p: Tokens,
    last: Instant,
    color_aware: bool,
}

impl TrTcm {
    pub fn new(cir: Rate, cbs: Size, pir: Rate, pbs: Size) -> TrTcm {
        TrTcm { cir, pir, c: Tokens::full(cbs), p: Tokens::full(pbs), last: Instant::ZERO, color_aware: false }
    }

    /// Colour-aware mode (RFC 2698 §4) instead of colour-blind.
    pub fn color_aware(self, on: bool) -> TrTcm {
        TrTcm { color_aware: on, ..self }
    }

    pub fn is_color_aware(&self) -> bool {
        self.color_aware
    }

    /// RFC 2698 §4, colour-blind: red if Tp < B; else yellow if Tc < B (Tp −= B); else green
    /// (Tp −= B, Tc −= B). Colour-aware: a red `pre` packet is red, a yellow one at best
    /// yellow, with the same token accounting.
    pub(crate) fn color(&mut self, now: Instant, len: u32, pre: Color) -> Color {
        self.c.add(units_between(self.cir, self.last, now));
        self.p.add(units_between(self.pir, self.last, now));
        self.last = now.max(self.last);
        let pre = if self.color_aware { pre } else { Color::Green };
        if pre == Color::Red || !self.p.covers(len) {
            Color::Red
        } else if pre == Color::Yellow || !self.c.covers(len) {
            self.p.take(len);
            Color::Yellow
        } else {
            self.p.take(len);
            self.c.take(len);
            Color::Green
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;
    use Color::{Green, Red, Yellow};

    fn at_ms(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    /// CIR of 8000 bit/s is 1000 bytes per second: one byte of tokens per millisecond.
    const CIR_1000_BPS: Rate = Rate::from_bps(8000);

    #[test]
    fn srtcm_colours_follow_the_tc_te_counters() {
        // RFC 2697 §4.1 with CBS = 1500, EBS = 1000, both full at t = 0.
        let mut m = SrTcm::new(CIR_1000_BPS, Size::from_bytes(1500), Size::from_bytes(1000));
        assert_eq!(m.color(at_ms(0), 1000, Green), Green); // Tc 1500 → 500
        assert_eq!(m.color(at_ms(0), 600, Green), Yellow); // Tc 500 < 600; Te 1000 → 400
        assert_eq!(m.color(at_ms(0), 500, Green), Green); // Tc 500 → 0: B ≤ Tc is green
        assert_eq!(m.color(at_ms(0), 401, Green), Red); // Tc 0, Te 400 < 401
        assert_eq!(m.color(at_ms(0), 400, Green), Yellow); // Te 400 → 0
        // 300 ms later: 300 bytes went to C (not full, so nothing overflowed to E).
        assert_eq!(m.color(at_ms(300), 301, Green), Red);
        assert_eq!(m.color(at_ms(300), 300, Green), Green);
        // Two seconds of idleness fill C to CBS and the 500 bytes beyond overflow into E.
        assert_eq!(m.color(at_ms(2300), 1500, Green), Green);
        assert_eq!(m.color(at_ms(2300), 501, Green), Red);
        assert_eq!(m.color(at_ms(2300), 500, Green), Yellow);
    }

    #[test]
    fn srtcm_long_run_green_rate_is_cir() {
        // 1000 B/s committed, offered 10 × 1000 B/s of 100-byte packets for 100 s.
        let mut m = SrTcm::new(CIR_1000_BPS, Size::from_bytes(1000), Size::from_bytes(2000));
        let mut green = 0u64;
        for i in 0..100_000u64 {
            if m.color(at_ms(i), 10, Green) == Green {
                green += 10;
            }
        }
        // CIR × 100 s plus the initial CBS; the excess bucket fills only when C overflows,
        // which an overloaded source never lets happen after the first burst.
        assert!((green as i64 - 101_000).abs() <= 20, "{green}");
    }

    #[test]
    fn trtcm_colours_follow_the_tp_tc_counters() {
        // RFC 2698 §4: PIR 2000 B/s, PBS 2000; CIR 1000 B/s, CBS 1000.
        let mut m = TrTcm::new(CIR_1000_BPS, Size::from_bytes(1000), Rate::from_bps(16_000), Size::from_bytes(2000));
        assert_eq!(m.color(at_ms(0), 800, Green), Green); // Tp 2000 → 1200, Tc 1000 → 200
        assert_eq!(m.color(at_ms(0), 800, Green), Yellow); // Tc 200 < 800; Tp 1200 → 400
        assert_eq!(m.color(at_ms(0), 500, Green), Red); // Tp 400 < 500: neither bucket changes
        assert_eq!(m.color(at_ms(0), 400, Green), Yellow); // Tp 400 → 0, Tc stays 200
        assert_eq!(m.color(at_ms(0), 200, Green), Red); // Tp 0, although Tc 200 would cover it
        // 100 ms: Tp + 200 = 200, Tc + 100 = 300.
        assert_eq!(m.color(at_ms(100), 250, Green), Red);
        assert_eq!(m.color(at_ms(100), 200, Green), Green); // Tp 200 → 0, Tc 300 → 100
        // 10 s idle: both back at their sizes, not beyond.
        assert_eq!(m.color(at_ms(10_100), 1000, Green), Green);
        assert_eq!(m.color(at_ms(10_100), 1000, Green), Yellow);
        assert_eq!(m.color(at_ms(10_100), 1, Green), Red);
    }

    #[test]
    fn colour_aware_srtcm_never_promotes_a_packet() {
        // RFC 2697 §4.2 with full buckets (CBS = EBS = 1000): a yellow packet skips C even
        // though Tc covers it, and takes from E.
        let mut m = SrTcm::new(CIR_1000_BPS, Size::from_bytes(1000), Size::from_bytes(1000)).color_aware(true);
        assert_eq!(m.color(at_ms(0), 600, Yellow), Yellow); // Te 1000 → 400, Tc untouched
        assert_eq!(m.color(at_ms(0), 1000, Green), Green); // Tc 1000 → 0
        assert_eq!(m.color(at_ms(0), 400, Red), Red); // Te 400 would cover it; red stays red
        assert_eq!(m.color(at_ms(0), 400, Green), Yellow); // Tc 0: green falls to E, Te → 0
        // The same sequence colour-blind: every precolour is ignored.
        let mut blind = SrTcm::new(CIR_1000_BPS, Size::from_bytes(1000), Size::from_bytes(1000));
        let got: Vec<Color> = [(600, Yellow), (1000, Green), (400, Red), (400, Green)].iter().map(|&(l, c)| blind.color(at_ms(0), l, c)).collect();
        assert_eq!(got, [Green, Yellow, Green, Red]);
    }

    #[test]
    fn colour_aware_trtcm_never_promotes_a_packet() {
        // RFC 2698 §4: PBS 2000, CBS 1000, both full.
        let mut m = TrTcm::new(CIR_1000_BPS, Size::from_bytes(1000), Rate::from_bps(16_000), Size::from_bytes(2000)).color_aware(true);
        assert_eq!(m.color(at_ms(0), 500, Red), Red); // no tokens taken
        assert_eq!(m.color(at_ms(0), 800, Yellow), Yellow); // Tp 2000 → 1200, Tc stays 1000
        assert_eq!(m.color(at_ms(0), 1000, Green), Green); // Tp → 200, Tc → 0
        assert_eq!(m.color(at_ms(0), 200, Yellow), Yellow); // Tp → 0
        assert_eq!(m.color(at_ms(0), 1, Green), Red);
    }

    #[test]
    fn trtcm_long_run_rates_are_cir_and_pir() {
        let mut m = TrTcm::new(CIR_1000_BPS, Size::from_bytes(1000), Rate::from_bps(24_000), Size::from_bytes(1000));
        let (mut green, mut not_red) = (0u64, 0u64);
        // Offered 10 000 B/s for 100 s; PIR is 3000 B/s.
        for i in 0..100_000u64 {
            match m.color(at_ms(i), 10, Green) {
                Green => {
                    green += 10;
                    not_red += 10;
                }
                Yellow => not_red += 10,
                Red => {}
            }
        }
        assert!((green as i64 - 101_000).abs() <= 20, "green {green}");
        assert!((not_red as i64 - 301_000).abs() <= 20, "green + yellow {not_red}");
    }
}
