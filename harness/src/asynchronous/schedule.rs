//! What the harness does in an async case, as data.
//!
//! [`Schedule`]: the harness plays the consumer of a producer under test.
//! [`Delivery`]: the harness plays the producer for a consumer under test.
//! Each prints as a short comma-separated text (`r1,deferred,slow`,
//! `each-thread,error@1`) that is the schedule's segment of the case ID
//! and parses back, so a case ID alone replays its schedule. Schedules
//! are drawn from a seed ([`Schedule::draw`], [`Delivery::draw`]); a
//! generated schedule only makes valid call sequences except where it says
//! so on purpose (`r0`, `r-1`), and always keeps the stream moving (every
//! task is followed by a request, unless the schedule cancels).
//! [`Schedule::simpler`] lists the one-step simplifications shrinking
//! tries.

#![forbid(unsafe_code)]

use std::fmt;

/// A deterministic generator (splitmix64): the same seed draws the same
/// schedules on every machine.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// A seed from a run seed and a text (a scenario name).
    pub fn for_case(seed: u64, text: &str) -> Rng {
        let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
        for b in text.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        Rng(h)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// True with probability `num/den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
}

/// The first thing the harness does in on_schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum First {
    /// `request(n)`, n > 0 (`i64::MAX` prints as `rmax`).
    Request(i64),
    /// `request(n)` with n <= 0, and nothing else: on_error must follow.
    Invalid(i64),
    /// Refuse the schema with EINVAL.
    Refuse,
}

/// How the harness asks for more after each task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refill {
    /// `request(n)` from inside on_next_task.
    Each(u8),
    /// `request(1)` k times from inside on_next_task.
    Burst(u8),
    /// `request(1)` from the extraction thread, after extracting: the task
    /// is moved out and extracted on another thread after the callback.
    Deferred,
}

/// How tasks are extracted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Extract {
    /// `extract_data(task, &array)` inside on_next_task.
    Array,
    /// `extract_data(task, NULL)`: the data is not wanted.
    Null,
    /// The task is moved into the harness's own ArrowAsyncTask and
    /// extracted on another thread after on_next_task returns.
    Thread,
    /// Array, Null and Thread in turn, by task index.
    Mixed,
}

/// Where the harness cancels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CancelAt {
    /// Inside on_schema, after its first request (before it returns).
    Schema,
    /// Inside on_next_task for task k (0-based), after extracting it.
    Task(u8),
    /// Inside on_next_task(NULL): after the last task.
    EndOfStream,
}

/// How the harness cancels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CancelHow {
    /// Once, on the callback's thread.
    Inline,
    /// Once, from a new thread (the callback does not wait for it).
    Thread,
    /// Twice in a row on the callback's thread.
    Twice,
    /// From three threads released together by a barrier.
    Race,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cancel {
    pub at: CancelAt,
    pub how: CancelHow,
}

/// The harness as the consumer of a producer under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Schedule {
    pub first: First,
    pub refill: Refill,
    pub extract: Extract,
    /// Sleep this long before each extraction (microseconds).
    pub slow_us: u32,
    /// Refuse task k (extracting it with NULL first) with EINVAL.
    pub refuse_task: Option<u8>,
    pub cancel: Option<Cancel>,
    /// `request(n)` right after cancelling (must be a NOP).
    pub request_after_cancel: Option<i64>,
}

impl Default for Schedule {
    fn default() -> Self {
        Schedule {
            first: First::Request(4),
            refill: Refill::Each(1),
            extract: Extract::Array,
            slow_us: 0,
            refuse_task: None,
            cancel: None,
            request_after_cancel: None,
        }
    }
}

const SLOW_US: u32 = 2000;

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = vec![match self.first {
            First::Request(i64::MAX) => "rmax".into(),
            First::Request(n) | First::Invalid(n) => format!("r{n}"),
            First::Refuse => "refuse-schema".into(),
        }];
        match self.refill {
            Refill::Each(1) => {}
            Refill::Each(n) => parts.push(format!("each{n}")),
            Refill::Burst(k) => parts.push(format!("burst{k}")),
            Refill::Deferred => parts.push("deferred".into()),
        }
        match self.extract {
            Extract::Array => {}
            Extract::Null => parts.push("extract-null".into()),
            Extract::Thread => parts.push("extract-thread".into()),
            Extract::Mixed => parts.push("extract-mixed".into()),
        }
        match self.slow_us {
            0 => {}
            SLOW_US => parts.push("slow".into()),
            us => parts.push(format!("slow{us}us")),
        }
        if let Some(k) = self.refuse_task {
            parts.push(format!("refuse@{k}"));
        }
        if let Some(c) = self.cancel {
            let at = match c.at {
                CancelAt::Schema => "schema".to_string(),
                CancelAt::Task(k) => k.to_string(),
                CancelAt::EndOfStream => "end".into(),
            };
            let how = match c.how {
                CancelHow::Inline => "",
                CancelHow::Thread => ":thread",
                CancelHow::Twice => ":twice",
                CancelHow::Race => ":race",
            };
            parts.push(format!("cancel@{at}{how}"));
        }
        if let Some(n) = self.request_after_cancel {
            parts.push(format!("then-r{n}"));
        }
        f.write_str(&parts.join(","))
    }
}

fn int<T: std::str::FromStr>(s: &str, what: &str) -> Result<T, String> {
    s.parse()
        .map_err(|_| format!("{what}: `{s}` is not a number"))
}

impl std::str::FromStr for Schedule {
    type Err = String;

    fn from_str(text: &str) -> Result<Schedule, String> {
        let mut s = Schedule::default();
        let mut parts = text.split(',');
        let first = parts.next().unwrap_or_default();
        s.first = match first {
            "rmax" => First::Request(i64::MAX),
            "refuse-schema" => First::Refuse,
            r => {
                let n: i64 = int(
                    r.strip_prefix('r').ok_or_else(|| {
                        format!("`{r}`: a schedule starts with r<n>, rmax or refuse-schema")
                    })?,
                    "request",
                )?;
                if n > 0 {
                    First::Request(n)
                } else {
                    First::Invalid(n)
                }
            }
        };
        for p in parts {
            if let Some(n) = p.strip_prefix("each") {
                s.refill = Refill::Each(int(n, p)?);
            } else if let Some(k) = p.strip_prefix("burst") {
                s.refill = Refill::Burst(int(k, p)?);
            } else if p == "deferred" {
                s.refill = Refill::Deferred;
            } else if p == "extract-null" {
                s.extract = Extract::Null;
            } else if p == "extract-thread" {
                s.extract = Extract::Thread;
            } else if p == "extract-mixed" {
                s.extract = Extract::Mixed;
            } else if p == "slow" {
                s.slow_us = SLOW_US;
            } else if let Some(us) = p.strip_prefix("slow").and_then(|r| r.strip_suffix("us")) {
                s.slow_us = int(us, p)?;
            } else if let Some(k) = p.strip_prefix("refuse@") {
                s.refuse_task = Some(int(k, p)?);
            } else if let Some(c) = p.strip_prefix("cancel@") {
                let (at, how) = c.split_once(':').unwrap_or((c, ""));
                let at = match at {
                    "schema" => CancelAt::Schema,
                    "end" => CancelAt::EndOfStream,
                    k => CancelAt::Task(int(k, p)?),
                };
                let how = match how {
                    "" => CancelHow::Inline,
                    "thread" => CancelHow::Thread,
                    "twice" => CancelHow::Twice,
                    "race" => CancelHow::Race,
                    other => {
                        return Err(format!(
                            "`{other}`: cancel is inline, :thread, :twice or :race"
                        ))
                    }
                };
                s.cancel = Some(Cancel { at, how });
            } else if let Some(n) = p.strip_prefix("then-r") {
                s.request_after_cancel = Some(int(n, p)?);
            } else {
                return Err(format!("`{p}` is not a schedule step"));
            }
        }
        if matches!(s.refill, Refill::Each(0) | Refill::Burst(0)) {
            return Err("a refill of 0 would stall the stream".into());
        }
        Ok(s)
    }
}

impl Schedule {
    /// The fixed schedules every scenario gets: each behaviour the rules
    /// need, once.
    pub fn fixed() -> Vec<Schedule> {
        [
            "r4",
            "r1,deferred,slow",
            "rmax,extract-null",
            "r2,burst3,extract-thread",
            "r0",
            "r-1",
            "refuse-schema",
            "r4,refuse@0",
            "r1,cancel@schema",
            "r1,cancel@0,then-r5",
            "r2,cancel@0:thread",
            "r2,cancel@0:twice",
            "r2,cancel@0:race",
            "r4,cancel@end",
        ]
        .iter()
        .map(|s| s.parse().expect("fixed schedules parse"))
        .collect()
    }

    /// Draws one schedule.
    pub fn draw(rng: &mut Rng) -> Schedule {
        let first = match rng.below(20) {
            0 => First::Invalid(-(rng.below(2) as i64)),
            1 => First::Refuse,
            2 | 3 => First::Request(i64::MAX),
            _ => First::Request(1 + rng.below(5) as i64),
        };
        let refill = match rng.below(4) {
            0 => Refill::Burst(2 + rng.below(3) as u8),
            1 => Refill::Deferred,
            2 => Refill::Each(2),
            _ => Refill::Each(1),
        };
        let extract = match rng.below(5) {
            0 => Extract::Null,
            1 => Extract::Thread,
            2 => Extract::Mixed,
            _ => Extract::Array,
        };
        let mut s = Schedule {
            first,
            refill,
            extract,
            ..Schedule::default()
        };
        if rng.chance(1, 5) {
            s.slow_us = 200 + rng.below(1800) as u32;
        }
        if rng.chance(1, 8) {
            s.refuse_task = Some(rng.below(3) as u8);
        }
        if rng.chance(2, 5) {
            let at = match rng.below(5) {
                0 => CancelAt::Schema,
                1 => CancelAt::EndOfStream,
                _ => CancelAt::Task(rng.below(3) as u8),
            };
            let how = match rng.below(4) {
                0 => CancelHow::Thread,
                1 => CancelHow::Twice,
                2 => CancelHow::Race,
                _ => CancelHow::Inline,
            };
            s.cancel = Some(Cancel { at, how });
            if rng.chance(1, 3) {
                s.request_after_cancel = Some(1 + rng.below(8) as i64);
            }
        }
        s
    }

    /// The schedules one step simpler than this one, simplest first.
    pub fn simpler(&self) -> Vec<Schedule> {
        let d = Schedule::default();
        let mut out = Vec::new();
        let mut with = |f: &dyn Fn(&mut Schedule)| {
            let mut s = *self;
            f(&mut s);
            if s != *self && !out.contains(&s) {
                out.push(s);
            }
        };
        with(&|s| s.request_after_cancel = None);
        with(&|s| {
            if let Some(c) = &mut s.cancel {
                c.how = CancelHow::Inline;
            }
        });
        with(&|s| {
            s.cancel = None;
            s.request_after_cancel = None;
        });
        with(&|s| s.refuse_task = None);
        with(&|s| s.slow_us = 0);
        with(&|s| s.extract = d.extract);
        with(&|s| s.refill = d.refill);
        with(&|s| {
            if let First::Request(n) = s.first {
                if n > 1 {
                    s.first = First::Request(if n == i64::MAX { 4 } else { 1 });
                }
            }
        });
        with(&|s| {
            if let Some(Cancel {
                at: CancelAt::Task(k),
                ..
            }) = &mut s.cancel
            {
                *k = k.saturating_sub(1);
            }
        });
        out
    }

    /// The same schedule with one cancel instead of several (the
    /// differential run that tells `async.cancel.idempotent` apart).
    pub fn with_single_cancel(&self) -> Option<Schedule> {
        let c = self.cancel?;
        matches!(c.how, CancelHow::Twice | CancelHow::Race).then(|| Schedule {
            cancel: Some(Cancel {
                how: CancelHow::Inline,
                ..c
            }),
            ..*self
        })
    }
}

/// How the harness's producer ends the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum End {
    /// Every batch, then on_next_task(NULL).
    Complete,
    /// on_next_task(NULL) right after on_schema (no batches at all).
    Empty,
    /// on_error(EIO, message, metadata) after k tasks.
    Error(u8),
    /// After k tasks the harness asks the consumer to cancel
    /// (`arrowcert_consume_async_cancel`); once it has, the producer still
    /// sends what [`Late`] says before release, as the spec allows: "a
    /// consumer *MUST* be prepared to receive one or more calls to
    /// ``on_next_task`` or ``on_error`` even after calling ``cancel``".
    Cancel(u8, Late),
}

/// What the harness's producer sends after the consumer's cancel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Late {
    /// The tasks still requested (at most [`MAX_LATE_TASKS`]), then release.
    Tasks,
    /// on_error (an error while handling the cancel: "Any error encountered
    /// during handling a call to cancel must be reported via the
    /// ``on_error`` callback"), then release.
    Error,
}

/// At most this many tasks come after a consumer's cancel.
pub const MAX_LATE_TASKS: usize = 2;

/// The harness as the producer for a consumer under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Delivery {
    /// A new thread for each callback (still one at a time) instead of one
    /// producer thread.
    pub thread_per_callback: bool,
    /// Sleep between callbacks (microseconds).
    pub gap_us: u32,
    pub end: End,
    /// The `varied` encoding (offsets, NULL buffers, ...) for the arrays.
    pub varied: bool,
    /// One row per task (about [`MAX_ROW_CHUNKS`] tasks, then the rest of
    /// each batch whole), whatever the batches: many tasks, so a consumer
    /// must keep requesting.
    pub rows: bool,
}

/// About this many one-row tasks; after them each batch's rest is one task.
pub const MAX_ROW_CHUNKS: usize = 24;

impl Default for Delivery {
    fn default() -> Self {
        Delivery {
            thread_per_callback: false,
            gap_us: 0,
            end: End::Complete,
            varied: false,
            rows: false,
        }
    }
}

impl fmt::Display for Delivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = vec![if self.thread_per_callback {
            "each-thread".into()
        } else {
            "one-thread".into()
        }];
        if self.gap_us > 0 {
            parts.push(format!("gap{}us", self.gap_us));
        }
        match self.end {
            End::Complete => {}
            End::Empty => parts.push("empty".into()),
            End::Error(k) => parts.push(format!("error@{k}")),
            End::Cancel(k, Late::Tasks) => parts.push(format!("cancel@{k}")),
            End::Cancel(k, Late::Error) => parts.push(format!("cancel@{k}:error")),
        }
        if self.varied {
            parts.push("varied".into());
        }
        if self.rows {
            parts.push("rows".into());
        }
        f.write_str(&parts.join(","))
    }
}

impl std::str::FromStr for Delivery {
    type Err = String;

    fn from_str(text: &str) -> Result<Delivery, String> {
        let mut d = Delivery::default();
        for (i, p) in text.split(',').enumerate() {
            match p {
                "one-thread" if i == 0 => {}
                "each-thread" if i == 0 => d.thread_per_callback = true,
                "empty" => d.end = End::Empty,
                "varied" => d.varied = true,
                "rows" => d.rows = true,
                _ => {
                    if let Some(us) = p.strip_prefix("gap").and_then(|r| r.strip_suffix("us")) {
                        d.gap_us = int(us, p)?;
                    } else if let Some(k) = p.strip_prefix("error@") {
                        d.end = End::Error(int(k, p)?);
                    } else if let Some(k) = p.strip_prefix("cancel@") {
                        d.end = match k.strip_suffix(":error") {
                            Some(k) => End::Cancel(int(k, p)?, Late::Error),
                            None => End::Cancel(int(k, p)?, Late::Tasks),
                        };
                    } else {
                        return Err(format!("`{p}` is not a delivery step"));
                    }
                }
            }
        }
        Ok(d)
    }
}

impl Delivery {
    pub fn fixed() -> Vec<Delivery> {
        [
            "one-thread",
            "each-thread,gap300us,varied",
            "one-thread,rows",
            "one-thread,empty",
            "one-thread,error@1",
            "one-thread,cancel@1",
            "each-thread,cancel@1:error",
        ]
        .iter()
        .map(|s| s.parse().expect("fixed deliveries parse"))
        .collect()
    }

    pub fn draw(rng: &mut Rng) -> Delivery {
        Delivery {
            thread_per_callback: rng.chance(1, 2),
            gap_us: if rng.chance(1, 3) {
                rng.below(1000) as u32
            } else {
                0
            },
            // Cancel deliveries are fixed ones only: drawing them would
            // change every draw made for a seed before they existed (and
            // the committed expectations made from those draws).
            end: match rng.below(8) {
                0 => End::Empty,
                1 | 2 => End::Error(rng.below(3) as u8),
                _ => End::Complete,
            },
            varied: rng.chance(1, 2),
            rows: rng.chance(1, 3),
        }
    }

    pub fn simpler(&self) -> Vec<Delivery> {
        let d = Delivery::default();
        let mut out = Vec::new();
        for s in [
            Delivery { gap_us: 0, ..*self },
            Delivery {
                thread_per_callback: false,
                ..*self
            },
            Delivery {
                varied: false,
                ..*self
            },
            Delivery {
                rows: false,
                ..*self
            },
            Delivery {
                end: d.end,
                ..*self
            },
            Delivery {
                end: match self.end {
                    End::Error(k) => End::Error(k.saturating_sub(1)),
                    End::Cancel(k, late) => End::Cancel(k.saturating_sub(1), late),
                    e => e,
                },
                ..*self
            },
        ] {
            if s != *self && !out.contains(&s) {
                out.push(s);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_print_and_parse_back() {
        let mut rng = Rng::new(7);
        for _ in 0..2000 {
            let s = Schedule::draw(&mut rng);
            let text = s.to_string();
            assert!(!text.contains('/'), "{text}");
            assert_eq!(text.parse::<Schedule>(), Ok(s), "{text}");
            let d = Delivery::draw(&mut rng);
            assert_eq!(d.to_string().parse::<Delivery>(), Ok(d), "{d}");
        }
        for s in Schedule::fixed() {
            assert_eq!(s.to_string().parse::<Schedule>(), Ok(s));
        }
        assert_eq!(Schedule::default().to_string(), "r4");
    }

    #[test]
    fn draws_are_deterministic_per_seed() {
        let a: Vec<_> = (0..50)
            .map({
                let mut r = Rng::for_case(3, "primitive");
                move |_| Schedule::draw(&mut r)
            })
            .collect();
        let b: Vec<_> = (0..50)
            .map({
                let mut r = Rng::for_case(3, "primitive");
                move |_| Schedule::draw(&mut r)
            })
            .collect();
        assert_eq!(a, b);
    }

    #[test]
    fn bad_text_is_an_error() {
        for bad in ["", "x4", "r4,each0", "r4,cancel@2:sideways", "r4,zzz"] {
            assert!(bad.parse::<Schedule>().is_err(), "{bad}");
        }
        assert!("one-thread,zzz".parse::<Delivery>().is_err());
        assert!("one-thread,cancel@x".parse::<Delivery>().is_err());
        assert!("one-thread,cancel@1:late".parse::<Delivery>().is_err());
        assert_eq!(
            "one-thread,cancel@2:error"
                .parse::<Delivery>()
                .map(|d| d.end),
            Ok(End::Cancel(2, Late::Error))
        );
    }

    #[test]
    fn shrinking_ends_at_the_default() {
        let mut s: Schedule = "r3,burst2,extract-mixed,slow,refuse@1,cancel@2:race,then-r4"
            .parse()
            .unwrap();
        let mut steps = 0;
        while let Some(next) = s.simpler().first().copied() {
            s = next;
            steps += 1;
            assert!(steps < 50);
        }
        assert_eq!(s.to_string(), "r1");
    }
}
