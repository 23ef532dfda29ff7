//! The event queue: events ordered by (time, insertion sequence), so simultaneous events run
//! in the order they were scheduled and a run is deterministic. Time never moves backward:
//! popping asserts it.
//!
//! Two heaps hold them, merged by that key at every pop: TCP timers in one, everything else
//! in the other. Nearly every connection has a retransmission timer pending, hundreds of
//! milliseconds out, so one heap would hold about two entries per connection (1 990 at 1 000
//! flows on `bench/sim/scale.py`'s dumbbell), and every pop, whose last entry is usually such
//! a far timer, sifts it down the whole depth. The elements' wakeups, which are most of the
//! events, number far fewer (6, 17 and 124 pending at 10, 100 and 1 000 flows); timers fire
//! rarely, and re-arming one later pushes nothing (the simulation keeps the earlier event and
//! re-arms when it fires).

use pathtwin_core::app::Step;
use pathtwin_core::replay::ReplayStep;
use pathtwin_core::time::Instant;

/// What happens at an event. Indices refer to the simulation's tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// An element may have packets to release.
    Element(u32),
    /// A TCP endpoint's timer (connection, side: 0 client, 1 server).
    Timer(u32, u8),
    /// A connection's start: its client connects and its application starts.
    Start(u32),
    /// A step a connection's application scheduled, or its `stop`
    /// ([`pathtwin_core::app`]).
    App(u32, Step),
    /// Take a sample of every time series.
    Sample,
    /// The next probe of `[[probe]]` entry N.
    Probe(u32),
}

/// Events are stored compactly: the key packs (time, sequence) into one `u128` and the event
/// into a `u64`, so a heap comparison is a single integer comparison (profiling showed the
/// heap at a fifth of the simulator's time with tuple entries).
pub struct EventQueue {
    /// Element wakeups, application steps and samples.
    heap: QuadHeap,
    /// TCP timers.
    timers: QuadHeap,
    seq: u64,
    now: Instant,
    processed: u64,
}

impl Default for EventQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl EventQueue {
    pub fn new() -> Self {
        EventQueue { heap: QuadHeap::with_capacity(1024), timers: QuadHeap::with_capacity(1024), seq: 0, now: Instant::ZERO, processed: 0 }
    }

    pub fn now(&self) -> Instant {
        self.now
    }

    /// Schedules `ev` at `at`; an `at` in the past is a bug in the caller.
    pub fn schedule(&mut self, at: Instant, ev: Event) {
        assert!(at >= self.now, "event {ev:?} scheduled at {at:?}, before now {:?}", self.now);
        let entry = ((at.as_nanos() as u128) << 64 | self.seq as u128, encode(ev));
        if matches!(ev, Event::Timer(..)) {
            self.timers.push(entry);
        } else {
            self.heap.push(entry);
        }
        self.seq += 1;
    }

    /// The heap whose first entry comes first (keys are unique: the sequence is).
    fn first(&mut self) -> Option<&mut QuadHeap> {
        match (self.heap.peek(), self.timers.peek()) {
            (Some(e), Some(t)) if t.0 < e.0 => Some(&mut self.timers),
            (Some(_), _) => Some(&mut self.heap),
            (None, Some(_)) => Some(&mut self.timers),
            (None, None) => None,
        }
    }

    /// Key of the next event.
    fn peek_key(&self) -> Option<u128> {
        match (self.heap.peek(), self.timers.peek()) {
            (Some(e), Some(t)) => Some(e.0.min(t.0)),
            (e, t) => e.or(t).map(|&(k, _)| k),
        }
    }

    /// Time of the next event.
    pub fn peek_time(&self) -> Option<Instant> {
        self.peek_key().map(|k| Instant::from_nanos((k >> 64) as u64))
    }

    /// Removes the next event if it is due by `limit`, and advances the clock to it.
    pub fn pop_due(&mut self, limit: Instant) -> Option<(Instant, Event)> {
        match self.peek_key() {
            Some(key) if (key >> 64) as u64 <= limit.as_nanos() => self.pop(),
            _ => None,
        }
    }

    /// Removes the next event and advances the clock to it.
    pub fn pop(&mut self) -> Option<(Instant, Event)> {
        let (key, code) = self.first()?.pop()?;
        let (t, ev) = (Instant::from_nanos((key >> 64) as u64), decode(code));
        assert!(t >= self.now, "time went backward: {t:?} < {:?}", self.now);
        self.now = t;
        self.processed += 1;
        Some((t, ev))
    }

    /// Events processed so far.
    pub fn processed(&self) -> u64 {
        self.processed
    }
}

/// A min-heap with four children per node over `(key, code)` entries: half the levels of a
/// binary heap, and a node's children share a cache line, so a pop compares more keys but
/// takes fewer unpredictable branches and misses (BinaryHeap::pop was 18 % of a dumbbell run).
struct QuadHeap {
    entries: Vec<(u128, u64)>,
}

impl QuadHeap {
    fn with_capacity(n: usize) -> Self {
        QuadHeap { entries: Vec::with_capacity(n) }
    }

    fn peek(&self) -> Option<&(u128, u64)> {
        self.entries.first()
    }

    fn push(&mut self, entry: (u128, u64)) {
        let mut i = self.entries.len();
        self.entries.push(entry);
        while i > 0 {
            let parent = (i - 1) / 4;
            if self.entries[parent].0 <= entry.0 {
                break;
            }
            self.entries[i] = self.entries[parent];
            i = parent;
        }
        self.entries[i] = entry;
    }

    fn pop(&mut self) -> Option<(u128, u64)> {
        let last = self.entries.pop()?;
        let n = self.entries.len();
        if n == 0 {
            return Some(last);
        }
        let top = self.entries[0];
        let mut i = 0;
        loop {
            let first = 4 * i + 1;
            if first >= n {
                break;
            }
            let end = (first + 4).min(n);
            // Selects without branching: which child is least is a coin toss the branch
            // predictor loses.
            let (mut min, mut min_key) = (first, self.entries[first].0);
            for c in first + 1..end {
                let key = self.entries[c].0;
                let less = key < min_key;
                min = if less { c } else { min };
                min_key = if less { key } else { min_key };
            }
            if min_key >= last.0 {
                break;
            }
            self.entries[i] = self.entries[min];
            i = min;
        }
        self.entries[i] = last;
        Some(top)
    }
}

/// An event's code: its kind in bits 32..40, an argument byte (a timer's side, an
/// application step) in bits 40..48, an index in the low 32 bits.
fn encode(ev: Event) -> u64 {
    match ev {
        Event::Element(e) => e as u64,
        Event::Timer(c, side) => 1 << 32 | (side as u64) << 40 | c as u64,
        Event::App(c, step) => 2 << 32 | (step_code(step) as u64) << 40 | c as u64,
        Event::Sample => 3 << 32,
        Event::Start(c) => 4 << 32 | c as u64,
        Event::Probe(p) => 5 << 32 | p as u64,
    }
}

fn decode(code: u64) -> Event {
    let low = code as u32;
    let arg = (code >> 40) as u8;
    match (code >> 32) as u8 {
        0 => Event::Element(low),
        1 => Event::Timer(low, arg),
        2 => Event::App(low, step_of(arg)),
        4 => Event::Start(low),
        5 => Event::Probe(low),
        _ => Event::Sample,
    }
}

fn step_code(step: Step) -> u8 {
    match step {
        Step::Stop => 0,
        Step::Toggle => 1,
        Step::NextRequest => 2,
        Step::Respond => 3,
        Step::Replay(ReplayStep::NextRequest) => 4,
        Step::Replay(ReplayStep::Respond) => 5,
        Step::Replay(ReplayStep::RespondRest) => 6,
    }
}

fn step_of(code: u8) -> Step {
    match code {
        0 => Step::Stop,
        1 => Step::Toggle,
        2 => Step::NextRequest,
        3 => Step::Respond,
        4 => Step::Replay(ReplayStep::NextRequest),
        5 => Step::Replay(ReplayStep::Respond),
        _ => Step::Replay(ReplayStep::RespondRest),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pathtwin_core::time::Duration;

    #[test]
    fn ties_run_in_insertion_order() {
        let mut q = EventQueue::new();
        let t = Instant::ZERO + Duration::from_millis(1);
        q.schedule(t, Event::Sample);
        q.schedule(t, Event::Element(7));
        q.schedule(Instant::ZERO, Event::Element(9));
        assert_eq!(q.pop().unwrap().1, Event::Element(9));
        assert_eq!(q.pop().unwrap().1, Event::Sample);
        assert_eq!(q.pop().unwrap().1, Event::Element(7));
    }

    #[test]
    fn every_event_survives_encoding() {
        for ev in [
            Event::Element(u32::MAX),
            Event::Timer(7, 1),
            Event::Start(u32::MAX),
            Event::App(3, Step::Stop),
            Event::App(3, Step::Toggle),
            Event::App(3, Step::NextRequest),
            Event::App(u32::MAX, Step::Respond),
            Event::App(5, Step::Replay(ReplayStep::NextRequest)),
            Event::App(5, Step::Replay(ReplayStep::Respond)),
            Event::App(5, Step::Replay(ReplayStep::RespondRest)),
            Event::Sample,
            Event::Probe(u32::MAX),
        ] {
            assert_eq!(decode(encode(ev)), ev);
        }
    }

    proptest::proptest! {
        /// Whatever the schedule, events come out as a stable sort by time would order them
        /// (the order a run depends on), also when scheduled while others are popped, and
        /// across the two heaps (every third event is a timer).
        #[test]
        fn pops_in_time_then_insertion_order(times in proptest::collection::vec(0u64..50, 1..300), pops_between in 0usize..4) {
            let mut q = EventQueue::new();
            let mut expected: Vec<(u64, u32)> = Vec::new();
            let mut got = Vec::new();
            for (i, &t) in times.iter().enumerate() {
                let at = q.now() + Duration::from_nanos(t);
                q.schedule(at, if i % 3 == 0 { Event::Timer(i as u32, 0) } else { Event::Element(i as u32) });
                expected.push((at.as_nanos(), i as u32));
                if i % 4 < pops_between {
                    got.push(q.pop().unwrap());
                }
            }
            while let Some(e) = q.pop() {
                got.push(e);
            }
            // The model of the queue: at each pop, the earliest pending (time, index).
            let mut pending: Vec<(u64, u32)> = Vec::new();
            let mut model = Vec::new();
            let mut scheduled = expected.into_iter();
            for (i, _) in times.iter().enumerate() {
                pending.push(scheduled.next().unwrap());
                if i % 4 < pops_between {
                    pending.sort();
                    model.push(pending.remove(0));
                }
            }
            pending.sort();
            model.extend(pending);
            let got: Vec<(u64, u32)> = got.into_iter().map(|(t, e)| match e { Event::Element(i) | Event::Timer(i, _) => (t.as_nanos(), i), _ => unreachable!() }).collect();
            proptest::prop_assert_eq!(got, model);
        }
    }

    #[test]
    #[should_panic(expected = "before now")]
    fn scheduling_in_the_past_is_refused() {
        let mut q = EventQueue::new();
        q.schedule(Instant::ZERO + Duration::from_secs(1), Event::Sample);
        q.pop();
        q.schedule(Instant::ZERO, Event::Sample);
    }
}
