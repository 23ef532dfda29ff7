//! Monaco's congestion estimation protocol (Wang, Kalyanaraman et al., "Accumulation-based
//! Congestion Control", ACC paper §III-B.1): the control packets, the sender's schedule and
//! timer for them, and the receiver's accumulation estimator. The window policy that acts
//! on the answers is the controller in `cc::monaco`.
//!
//! Once per control period the sender (the paper's ingress node) sends a pair back to back:
//! a [`Control::Probe`] out of band, which strict-priority routers serve ahead of data, and a
//! [`Control::Count`] in band, behind the data. At the receiver (the egress node) the gap
//! between their arrivals is the forward queueing time q of this flow's data; by Little's
//! law the flow's accumulation — its bytes queued along the path — is â = r̂·q, with r̂ the
//! flow's egress rate. The receiver answers on a reverse out-of-band [`Control::Feedback`];
//! the next pair leaves when the answer arrives, so there is one pair per round trip. A
//! pair with no answer after a TCP-like timeout (the endpoint's RTO, doubled on each
//! consecutive expiry) is given up and a new one, with a larger sequence number, is sent.
//!
//! Choices the paper leaves open, and what this module does:
//! - Loss: the paper's in-band packet carries the data bytes sent in its period and the
//!   receiver flags loss when fewer arrived. Here it carries the sender's running total of
//!   payload bytes sent (retransmissions included) and the receiver compares it with its own
//!   running total of payload bytes received: loss is flagged when the difference grew
//!   since the last answer. That is the same test when nothing is lost, and it still finds
//!   the loss when a whole pair went missing, which per-period counts would not. A
//!   retransmission adds to both totals, so one lost segment is reported once.
//! - The egress rate r̂: an EWMA with gain 1/8 (TCP's SRTT gain; the paper gives none) of
//!   the data rate between consecutive in-band packets, which is once per control period;
//!   the first sample runs from the first data byte.
//! - The control loop's round trip: the time from sending a pair's probe to its answer's
//!   arrival is returned with the answer ([`AccumulationFeedback::loop_rtt`]). It is the
//!   "rtt" the paper's Figure 2 measures at the ingress node: forward propagation, the
//!   forward queueing the in-band packet waits, and the reverse propagation of the
//!   out-of-band answer — but not the reverse path's queues, which the answer skips (§III-C:
//!   the estimator "excludes the effect of reverse path congestion"). The controller paces
//!   with it.
//! - Flags: the answer carries â and the loss bit; the paper's increase/decrease flag is
//!   â compared with the target a*, which only the sender needs to know, so the sender
//!   derives it.

use crate::segment::Control;
use pathtwin_core::time::{Duration, Instant};
use std::collections::VecDeque;

/// Gain of the receiver's egress-rate average (TCP's SRTT gain, RFC 6298).
const RATE_GAIN: f64 = 1.0 / 8.0;
/// Consecutive timeouts after which the control timer stops doubling (2^6 · RTO).
const MAX_BACKOFF: u32 = 6;

/// What the sender learns from one answered control pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccumulationFeedback {
    /// The flow's estimated accumulation â in bytes.
    pub accumulation: u64,
    /// Data went missing since the previous answer: the paper's decrease-due-to-loss.
    pub loss: bool,
    /// The control loop's round trip for this pair (probe sent → answer received), which no
    /// reverse-path queue lengthens; None where it is not known.
    pub loop_rtt: Option<Duration>,
}

/// The sender's side: when to send a pair, and matching answers to it.
#[derive(Debug)]
pub struct ControlSender {
    next_seq: u32,
    /// The pair whose probe is out and whose count goes next.
    count_due: Option<u32>,
    /// The pair whose answer is awaited.
    awaited: Option<u32>,
    timer: Option<Instant>,
    /// When the awaited pair's probe left.
    sent_at: Option<Instant>,
    backoff: u32,
    timeouts: u64,
}

impl Default for ControlSender {
    fn default() -> Self {
        ControlSender { next_seq: 1, count_due: None, awaited: None, timer: None, sent_at: None, backoff: 0, timeouts: 0 }
    }
}

impl ControlSender {
    /// The next control packet to send. `active` says whether the flow has data to send or
    /// in flight (pairs stop while it is idle); `bytes_sent` is its running total of payload
    /// bytes sent; `rto` the endpoint's retransmission timeout.
    pub fn poll_transmit(&mut self, now: Instant, active: bool, bytes_sent: u64, rto: Duration) -> Option<Control> {
        if let Some(seq) = self.count_due.take() {
            self.timer = Some(now + rto.mul_f64(f64::from(1u32 << self.backoff)));
            return Some(Control::Count { seq, bytes_sent });
        }
        if !active || self.awaited.is_some() {
            return None;
        }
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        self.awaited = Some(seq);
        self.sent_at = Some(now);
        self.count_due = Some(seq);
        Some(Control::Probe { seq })
    }

    /// An answer to pair `seq` arrived at `now`: the control loop's round trip for it if it
    /// is the awaited one, None otherwise (a late answer to a pair already given up is
    /// ignored). The next pair goes out at the next [`poll_transmit`](Self::poll_transmit).
    pub fn on_feedback(&mut self, now: Instant, seq: u32) -> Option<Duration> {
        if self.awaited != Some(seq) {
            return None;
        }
        self.awaited = None;
        self.timer = None;
        self.backoff = 0;
        Some(now.saturating_since(self.sent_at.take().unwrap_or(now)))
    }

    /// When the awaited pair will be given up.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timer
    }

    /// Gives up the awaited pair if its time has come; a new pair follows.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.timer.is_some_and(|t| t <= now) {
            self.timer = None;
            self.awaited = None;
            self.sent_at = None;
            self.backoff = (self.backoff + 1).min(MAX_BACKOFF);
            self.timeouts += 1;
        }
    }

    /// Pairs given up for want of an answer.
    pub fn timeouts(&self) -> u64 {
        self.timeouts
    }
}

/// The receiver's side: counts data, times probes against counts, and answers.
#[derive(Debug, Default)]
pub struct AccumulationEstimator {
    /// Payload bytes received in total, duplicates included (the sender counts its
    /// retransmissions too).
    received: u64,
    first_data_at: Option<Instant>,
    /// The latest probe: its pair and arrival time.
    probe: Option<(u32, Instant)>,
    /// Arrival time of the last count and `received` at that moment.
    last_count: Option<(Instant, u64)>,
    /// Egress rate estimate r̂ in bytes per second.
    rate: Option<f64>,
    /// Sent minus received at the last answer.
    missing: u64,
    answers: VecDeque<Control>,
}

impl AccumulationEstimator {
    /// A data segment with `bytes` of payload arrived.
    pub fn on_data(&mut self, now: Instant, bytes: u32) {
        self.first_data_at.get_or_insert(now);
        self.received += bytes as u64;
    }

    /// A forward control packet arrived.
    pub fn on_control(&mut self, now: Instant, c: Control) {
        match c {
            Control::Probe { seq } => self.probe = Some((seq, now)),
            Control::Count { seq, bytes_sent } => self.on_count(now, seq, bytes_sent),
            Control::Feedback { .. } => {}
        }
    }

    fn on_count(&mut self, now: Instant, seq: u32, bytes_sent: u64) {
        let (since, base) = self.last_count.unwrap_or((self.first_data_at.unwrap_or(now), 0));
        let dt = now.saturating_since(since).as_secs_f64();
        if dt > 0.0 {
            let sample = (self.received - base) as f64 / dt;
            self.rate = Some(match self.rate {
                None => sample,
                Some(r) => r + RATE_GAIN * (sample - r),
            });
        }
        self.last_count = Some((now, self.received));
        // Without this pair's probe there is no queueing time: no answer, and the sender's
        // timer sends a new pair. The loss test waits for the next answer, which finds the
        // same missing bytes.
        let Some((probe_seq, probe_at)) = self.probe else { return };
        if probe_seq != seq {
            return;
        }
        self.probe = None;
        let queueing = now.saturating_since(probe_at).as_secs_f64();
        let accumulation = (self.rate.unwrap_or(0.0) * queueing).round() as u64;
        let missing = bytes_sent.saturating_sub(self.received);
        let loss = missing > self.missing;
        self.missing = self.missing.max(missing);
        self.answers.push_back(Control::Feedback { seq, accumulation, loss });
    }

    /// The next answer to send, out of band.
    pub fn poll_transmit(&mut self) -> Option<Control> {
        self.answers.pop_front()
    }

    /// The egress rate estimate r̂ in bytes per second, once a count has arrived.
    pub fn rate(&self) -> Option<f64> {
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(v)
    }

    #[test]
    fn a_pair_is_probe_then_count_and_the_next_waits_for_the_answer() {
        let rto = Duration::from_millis(200);
        let mut s = ControlSender::default();
        assert_eq!(s.poll_transmit(ms(0), false, 0, rto), None, "no pairs while idle");
        assert_eq!(s.poll_transmit(ms(0), true, 0, rto), Some(Control::Probe { seq: 1 }));
        assert_eq!(s.poll_transmit(ms(0), true, 5000, rto), Some(Control::Count { seq: 1, bytes_sent: 5000 }));
        assert_eq!(s.poll_transmit(ms(1), true, 6000, rto), None, "one pair per answer");
        assert_eq!(s.on_feedback(ms(20), 7), None, "an answer to another pair is ignored");
        assert_eq!(s.on_feedback(ms(20), 1), Some(Duration::from_millis(20)), "the loop's round trip, from the probe");
        assert_eq!(s.poll_transmit(ms(10), true, 9000, rto), Some(Control::Probe { seq: 2 }));
    }

    #[test]
    fn a_pair_without_answer_times_out_with_backoff_and_a_new_pair_follows() {
        let rto = Duration::from_millis(200);
        let mut s = ControlSender::default();
        s.poll_transmit(ms(0), true, 0, rto);
        s.poll_transmit(ms(0), true, 0, rto);
        assert_eq!(s.poll_timeout(), Some(ms(200)));
        s.handle_timeout(ms(199));
        assert_eq!(s.poll_transmit(ms(199), true, 0, rto), None);
        s.handle_timeout(ms(200));
        assert_eq!(s.poll_transmit(ms(200), true, 0, rto), Some(Control::Probe { seq: 2 }));
        s.poll_transmit(ms(200), true, 0, rto);
        assert_eq!(s.poll_timeout(), Some(ms(600)), "the timer doubles, as TCP's does");
        assert_eq!(s.on_feedback(ms(250), 1), None, "the answer to the abandoned pair comes too late");
        assert_eq!(s.on_feedback(ms(250), 2), Some(Duration::from_millis(50)), "timed from the new pair's probe");
        assert_eq!(s.timeouts(), 1);
    }

    /// Little's law at the egress: a flow delivering r bytes per second whose in-band packet
    /// trails its out-of-band probe by q has r·q bytes queued.
    #[test]
    fn accumulation_is_egress_rate_times_forward_queueing_time() {
        let mut e = AccumulationEstimator::default();
        // 1000-byte segments every millisecond from t = 0: 1 MB/s over 58 ms.
        for t in 0..58 {
            e.on_data(ms(t), 1000);
            if t == 54 {
                e.on_control(ms(54), Control::Probe { seq: 2 });
            }
        }
        // The count arrives 4 ms after its probe, with every byte the sender had sent.
        e.on_control(ms(58), Control::Count { seq: 2, bytes_sent: 58_000 });
        let rate = e.rate().unwrap();
        assert!((rate - 1e6).abs() < 1e-6, "the first rate sample runs from the first byte: {rate}");
        assert_eq!(e.poll_transmit(), Some(Control::Feedback { seq: 2, accumulation: 4000, loss: false }));
        assert_eq!(e.poll_transmit(), None);
    }

    #[test]
    fn the_rate_is_an_eighth_gain_average_of_per_period_rates() {
        let mut e = AccumulationEstimator::default();
        e.on_data(ms(0), 0);
        e.on_data(ms(10), 10_000);
        e.on_control(ms(10), Control::Count { seq: 1, bytes_sent: 10_000 }); // 1 MB/s
        e.on_data(ms(20), 20_000);
        e.on_control(ms(20), Control::Count { seq: 2, bytes_sent: 30_000 }); // 2 MB/s
        let want = 1e6 + (2e6 - 1e6) / 8.0;
        assert!((e.rate().unwrap() - want).abs() < 1e-3, "{:?}", e.rate());
        assert_eq!(e.poll_transmit(), None, "counts without their probes get no answer");
    }

    #[test]
    fn missing_bytes_are_reported_once_even_across_an_unanswered_pair() {
        let mut e = AccumulationEstimator::default();
        let answer = |e: &mut AccumulationEstimator, t: u64, seq: u32, sent: u64| {
            e.on_control(ms(t), Control::Probe { seq });
            e.on_control(ms(t + 1), Control::Count { seq, bytes_sent: sent });
            match e.poll_transmit() {
                Some(Control::Feedback { loss, .. }) => loss,
                other => panic!("{other:?}"),
            }
        };
        e.on_data(ms(0), 3000);
        assert!(!answer(&mut e, 1, 1, 3000));
        // 1000 bytes lost; the next pair's probe is lost too, so its count is unanswered.
        e.on_data(ms(5), 2000);
        e.on_control(ms(6), Control::Count { seq: 2, bytes_sent: 6000 });
        assert_eq!(e.poll_transmit(), None);
        assert!(answer(&mut e, 10, 3, 6000), "the loss is reported at the next answer");
        // The retransmission counts on both sides: nothing new is missing.
        e.on_data(ms(20), 1000);
        assert!(!answer(&mut e, 21, 4, 7000));
    }
}
