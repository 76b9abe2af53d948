//! The async protocol as a state machine, from the handler's point of view.
//!
//! A trace is what the harness saw, in the order it saw it: handler
//! callbacks as they entered (with whether another callback was running on
//! a different thread, and whether the harness's own thread was inside a
//! call to the producer's `request` or `cancel`), and the calls the consumer
//! made (`request(n)` and `cancel`, recorded just before each call, so a
//! task the producer delivers in response is always counted after it).
//!
//! [`judge`] walks the trace through the phases of the stream and returns
//! every rule the producer broke, each broken step reported once under the
//! first rule that forbids it (a task after a refused schema is
//! `async.schema-refused`, not also back-pressure), with the phase it
//! happened in. [`Phase::allowed`] says which callbacks are legal next; the
//! tests use it to generate legal traces and check that none is judged.

#![forbid(unsafe_code)]

use std::fmt;

/// A handler callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Callback {
    Schema,
    /// `on_next_task` with a task.
    Task,
    /// `on_next_task(NULL)`.
    EndOfStream,
    Error,
    Release,
}

impl Callback {
    pub fn name(self) -> &'static str {
        match self {
            Callback::Schema => "on_schema",
            Callback::Task => "on_next_task",
            Callback::EndOfStream => "on_next_task(NULL)",
            Callback::Error => "on_error",
            Callback::Release => "release",
        }
    }
}

/// A producer method the consumer's thread was inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Inside {
    Request,
    Cancel,
}

/// One callback as the handler saw it enter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entered {
    pub callback: Callback,
    /// Another callback was running on a different thread.
    pub overlapped: bool,
    /// The thread it came on was inside this producer method.
    pub inside: Option<Inside>,
    /// What the handler answered (on_schema and on_next_task): 0 accepts.
    /// For on_error: the error code the producer passed.
    pub answer: i32,
}

/// One step of a trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Callback(Entered),
    /// The consumer is about to call `request(n)`.
    Request(i64),
    /// The consumer is about to call `cancel`.
    Cancel,
    /// An `extract_data` call by the consumer returned this non-zero code.
    ExtractFailed(i32),
}

impl Event {
    /// A callback that entered alone, on a thread not inside the producer.
    pub fn plain(callback: Callback, answer: i32) -> Event {
        Event::Callback(Entered {
            callback,
            overlapped: false,
            inside: None,
            answer,
        })
    }
}

/// Where the stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Nothing yet: on_schema or on_error must come first.
    Start,
    /// on_schema was accepted: tasks flow as requested.
    Open,
    /// on_schema was refused: only release may follow.
    SchemaRefused,
    /// A task was refused: release must follow, without on_error.
    TaskRefused,
    /// on_next_task(NULL) came: only release may follow.
    Ended,
    /// on_error came: only release may follow.
    Errored,
    /// extract_data failed while streaming: only on_error may follow ("it
    /// should be followed only by the producer calling the on_error
    /// callback").
    ExtractFailed,
    /// release came: nothing may follow.
    Released,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Start => "before on_schema",
            Phase::Open => "streaming",
            Phase::SchemaRefused => "after a refused on_schema",
            Phase::TaskRefused => "after a refused task",
            Phase::Ended => "after on_next_task(NULL)",
            Phase::Errored => "after on_error",
            Phase::ExtractFailed => "after a failed extract_data",
            Phase::Released => "after release",
        })
    }
}

impl Phase {
    /// The callbacks a producer may call next (whatever the consumer did).
    pub fn allowed(self) -> &'static [Callback] {
        use Callback::*;
        match self {
            Phase::Start => &[Schema, Error],
            Phase::Open => &[Task, EndOfStream, Error, Release],
            Phase::SchemaRefused | Phase::TaskRefused | Phase::Ended | Phase::Errored => &[Release],
            Phase::ExtractFailed => &[Error],
            Phase::Released => &[],
        }
    }
}

/// A broken rule, where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub rule: &'static str,
    /// The step: `#<index> <callback>` of the trace.
    pub at: String,
    pub message: String,
}

/// How the trace ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ending {
    /// The handler's release came within the case deadline.
    pub released: bool,
    /// The deadline, for evidence.
    pub deadline_ms: u64,
}

/// The running state of a judged trace.
#[derive(Debug, Clone, Default)]
struct Counts {
    /// Sum of every request(n > 0) so far (after a cancel too: the
    /// back-pressure rule is about what was asked for).
    requested: i128,
    /// The same sum at the moment of the first cancel.
    requested_before_cancel: Option<i128>,
    cancels: u32,
    invalid_request: Option<i64>,
    delivered: i128,
    releases: u32,
}

/// Judges a whole trace: every rule broken, at most once per rule.
pub fn judge(trace: &[Event], ending: Ending) -> Vec<Finding> {
    let mut phase = Phase::Start;
    let mut c = Counts::default();
    let mut out: Vec<Finding> = Vec::new();
    let mut report = |rule: &'static str, at: String, message: String| {
        if !out.iter().any(|f| f.rule == rule) {
            out.push(Finding { rule, at, message });
        }
    };
    for (i, ev) in trace.iter().enumerate() {
        let e = match ev {
            Event::Request(n) => {
                if *n > 0 {
                    c.requested += i128::from(*n);
                } else if c.cancels == 0 {
                    c.invalid_request.get_or_insert(*n);
                }
                continue;
            }
            Event::Cancel => {
                c.cancels += 1;
                c.requested_before_cancel.get_or_insert(c.requested);
                continue;
            }
            Event::ExtractFailed(_) => {
                if phase == Phase::Open {
                    phase = Phase::ExtractFailed;
                }
                continue;
            }
            Event::Callback(e) => e,
        };
        let at = format!("#{i} {}", e.callback.name());
        if e.overlapped {
            // MUST for on_next_task: "A producer MUST NOT call this
            // concurrently from multiple threads." For the other
            // callbacks the spec says SHOULD: "All handler functions ...
            // should only be called in a serialized manner".
            let rule = if e.callback == Callback::Task {
                crate::rule!("async.callbacks.serial")
            } else {
                crate::rule!("async.callbacks.serialized")
            };
            report(
                rule,
                at.clone(),
                format!(
                    "{} entered while another handler callback was still running on another thread ({phase})",
                    e.callback.name()
                ),
            );
        }
        match (e.inside, e.callback) {
            (Some(Inside::Request), cb) => report(
                crate::rule!("async.request.reentrant"),
                at.clone(),
                format!(
                    "{} was called synchronously from inside request(), on the consumer's thread",
                    cb.name()
                ),
            ),
            (Some(Inside::Cancel), cb) if cb != Callback::Error => report(
                crate::rule!("async.cancel.reentrant"),
                at.clone(),
                format!(
                    "{} was called synchronously from inside cancel(), on the consumer's thread",
                    cb.name()
                ),
            ),
            _ => {}
        }
        phase = if e.overlapped {
            // It started before the callback it overlapped had returned,
            // so it cannot be judged by that callback's outcome (a refusal,
            // the end): counted, judged only as the overlap it is.
            step(phase, e, &mut c, &at, &mut |_, _, _| {})
        } else {
            step(phase, e, &mut c, &at, &mut report)
        };
    }
    if !ending.released {
        let stalled_on_invalid = c.invalid_request.is_some() && phase == Phase::Open;
        if stalled_on_invalid {
            report(
                crate::rule!("async.request.invalid"),
                "end".into(),
                format!(
                    "after request({}) nothing came within {} ms: no on_error, no release",
                    c.invalid_request.unwrap_or_default(),
                    ending.deadline_ms
                ),
            );
        } else if phase != Phase::Released {
            report(
                crate::rule!("async.release.last"),
                "end".into(),
                format!(
                    "the handler's release did not come within {} ms; the stream was stuck {phase} \
                     ({} tasks delivered, {} requested{})",
                    ending.deadline_ms,
                    c.delivered,
                    c.requested,
                    if c.cancels > 0 { ", cancelled" } else { "" }
                ),
            );
        }
    }
    out
}

/// One callback through the phases; returns the next phase.
fn step(
    phase: Phase,
    e: &Entered,
    c: &mut Counts,
    at: &str,
    report: &mut dyn FnMut(&'static str, String, String),
) -> Phase {
    use Callback::*;
    let cb = e.callback;
    let accepted = e.answer == 0;
    if phase == Phase::ExtractFailed {
        // SHOULD: "If a non-zero value is returned from this, it should be
        // followed only by the producer calling the on_error callback".
        if cb != Error {
            report(
                crate::rule!("async.extract.error-follows"),
                at.into(),
                format!(
                    "{} came after extract_data had failed, instead of on_error",
                    cb.name()
                ),
            );
        }
        if cb == Release {
            // The same misstep as a release without the end of stream:
            // reported once, under the rule above.
            c.releases += 1;
            return Phase::Released;
        }
        return step(Phase::Open, e, c, at, report);
    }
    match (phase, cb) {
        (Phase::Released, Release) => {
            c.releases += 1;
            report(
                crate::rule!("async.release.last"),
                at.into(),
                format!("release was called again (call {})", c.releases),
            );
            Phase::Released
        }
        (Phase::Released, _) => {
            report(
                crate::rule!("async.release.last"),
                at.into(),
                format!("{} came after the handler's release", cb.name()),
            );
            Phase::Released
        }
        (_, Release) => released(phase, c, at, report),
        (Phase::Start, Schema) => {
            if accepted {
                Phase::Open
            } else {
                Phase::SchemaRefused
            }
        }
        (Phase::Start, Error) => Phase::Errored,
        (Phase::Start, Task | EndOfStream) => {
            report(
                crate::rule!("async.schema.first"),
                at.into(),
                format!("{} came before on_schema", cb.name()),
            );
            // Judged from here on as if the schema had come.
            step(Phase::Open, e, c, at, &mut |_, _, _| {})
        }
        (Phase::Open, Schema) => {
            report(
                crate::rule!("async.schema.first"),
                at.into(),
                "on_schema came a second time".into(),
            );
            Phase::Open
        }
        (Phase::Open, Task) => task(e, c, at, report),
        (Phase::Open, EndOfStream) => Phase::Ended,
        (Phase::Open, Error) => error(e, c, at, report),
        (Phase::SchemaRefused | Phase::TaskRefused | Phase::Ended | Phase::Errored, _) => {
            only_release_may_follow(phase, cb, at, report)
        }
        // Handled before the match (judged as Open after its own rule).
        (Phase::ExtractFailed, _) => step(Phase::Open, e, c, at, report),
    }
}

/// A handler's release in any phase but after a release: the release
/// ends the stream, and judges how the stream got there (the schema
/// first, an invalid request answered with on_error, the end of stream
/// signalled before it).
fn released(
    phase: Phase,
    c: &mut Counts,
    at: &str,
    report: &mut dyn FnMut(&'static str, String, String),
) -> Phase {
    c.releases += 1;
    match phase {
        Phase::Start => report(
            crate::rule!("async.schema.first"),
            at.into(),
            "release came before on_schema or on_error".into(),
        ),
        Phase::Open if c.cancels == 0 && c.invalid_request.is_some() => report(
            crate::rule!("async.request.invalid"),
            at.into(),
            format!(
                "after request({}) the stream was released without on_error",
                c.invalid_request.unwrap_or_default()
            ),
        ),
        Phase::Open if c.cancels == 0 => report(
            crate::rule!("async.eos.null-task"),
            at.into(),
            format!(
                "release came after {} tasks without on_next_task(NULL) or on_error, and the consumer did not cancel",
                c.delivered
            ),
        ),
        _ => {}
    }
    Phase::Released
}

/// A task on an open stream: counted against what was requested
/// (async.backpressure), and against what was requested before a cancel
/// (async.cancel.request-nop); a refusal leaves only release to follow.
fn task(
    e: &Entered,
    c: &mut Counts,
    at: &str,
    report: &mut dyn FnMut(&'static str, String, String),
) -> Phase {
    let accepted = e.answer == 0;
    c.delivered += 1;
    // Tasks past what was requested before the cancel break the
    // NOP rule only when a request came after the cancel; with
    // none, they are tasks delivered past the requests
    // (back-pressure, SHOULD): "a consumer MUST be prepared to
    // receive one or more calls to on_next_task or on_error even
    // after calling cancel".
    let nop_broken = c
        .requested_before_cancel
        .is_some_and(|before| c.delivered > before && c.requested > before);
    if nop_broken {
        report(
            crate::rule!("async.cancel.request-nop"),
            at.into(),
            format!(
                "task {} came after cancel, but only {} were requested before the cancel (a request after cancel must be a NOP)",
                c.delivered,
                c.requested_before_cancel.unwrap_or_default()
            ),
        );
    } else if c.delivered > c.requested {
        report(
            crate::rule!("async.backpressure"),
            at.into(),
            format!(
                "task {} was delivered while the requests so far added up to {}",
                c.delivered, c.requested
            ),
        );
    }
    if accepted {
        Phase::Open
    } else {
        Phase::TaskRefused
    }
}

/// on_error on an open stream: after a cancel, judged by whether anything
/// requested was still pending (async.cancel.no-error,
/// async.cancel.error-after).
fn error(
    e: &Entered,
    c: &mut Counts,
    at: &str,
    report: &mut dyn FnMut(&'static str, String, String),
) -> Phase {
    // "a consumer MUST be prepared to receive one or more calls to
    // on_next_task or on_error even after calling cancel if there
    // are still requested arrays pending": on_error after a cancel
    // breaks "Successful cancelling MUST NOT result in a producer
    // calling on_error" only when nothing requested was pending.
    let pending = c
        .requested_before_cancel
        .is_some_and(|before| before > c.delivered);
    let reports_the_cancel = e.answer == libc::ECANCELED;
    if c.cancels > 0 && c.invalid_request.is_none() {
        if reports_the_cancel || !pending {
            report(
                crate::rule!("async.cancel.no-error"),
                at.into(),
                format!(
                    "on_error ({}) came after the consumer cancelled{} (\"Successful cancelling MUST NOT result in a producer calling on_error\")",
                    e.answer,
                    if reports_the_cancel { ", reporting the cancel itself" } else { " with no requested task pending" }
                ),
            );
        } else {
            // Accepted, and noted (INFO): a repeated cancel that
            // brings it on is then told from a single one.
            report(
                crate::rule!("async.cancel.error-after"),
                at.into(),
                format!(
                    "on_error ({}) came after the consumer cancelled, with requested tasks pending",
                    e.answer
                ),
            );
        }
    }
    Phase::Errored
}

/// A callback other than release in a phase after which only release may
/// come (a refused schema or task, the end of stream, an error): the
/// rule of that phase is broken, and the phase stays.
fn only_release_may_follow(
    phase: Phase,
    cb: Callback,
    at: &str,
    report: &mut dyn FnMut(&'static str, String, String),
) -> Phase {
    match phase {
        Phase::SchemaRefused => {
            report(
                crate::rule!("async.schema-refused"),
                at.into(),
                format!(
                    "{} came after on_schema returned an error; only release may follow",
                    cb.name()
                ),
            );
            Phase::SchemaRefused
        }
        Phase::TaskRefused => {
            report(
                crate::rule!("async.task-refused"),
                at.into(),
                format!(
                    "{} came after on_next_task returned an error; the producer should only release",
                    cb.name()
                ),
            );
            Phase::TaskRefused
        }
        Phase::Ended => {
            report(
                crate::rule!("async.eos.null-task"),
                at.into(),
                format!(
                    "{} came after on_next_task(NULL); only release may follow",
                    cb.name()
                ),
            );
            Phase::Ended
        }
        Phase::Errored => {
            report(
                crate::rule!("async.error.release-next"),
                at.into(),
                format!(
                    "{} came after on_error; release should be the next and last call",
                    cb.name()
                ),
            );
            Phase::Errored
        }
        // step sends only the four phases above here.
        _ => phase,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use Callback::*;

    const DONE: Ending = Ending {
        released: true,
        deadline_ms: 1000,
    };

    fn rules(trace: &[Event], ending: Ending) -> Vec<&'static str> {
        judge(trace, ending).into_iter().map(|f| f.rule).collect()
    }

    fn cb(c: Callback) -> Event {
        Event::plain(c, 0)
    }

    #[test]
    fn a_plain_stream_is_clean() {
        let t = [
            cb(Schema),
            Event::Request(2),
            cb(Task),
            cb(Task),
            Event::Request(1),
            cb(EndOfStream),
            cb(Release),
        ];
        assert!(rules(&t, DONE).is_empty());
    }

    #[test]
    fn each_misstep_is_one_rule() {
        let cases: Vec<(Vec<Event>, &str)> = vec![
            // The harness refuses a task that comes before the schema.
            (
                vec![Event::plain(Task, 22), cb(Release)],
                crate::rule!("async.schema.first"),
            ),
            (
                vec![
                    cb(Schema),
                    Event::Request(1),
                    cb(Task),
                    cb(Task),
                    cb(EndOfStream),
                    cb(Release),
                ],
                crate::rule!("async.backpressure"),
            ),
            (
                vec![cb(Schema), Event::Request(1), cb(Release)],
                crate::rule!("async.eos.null-task"),
            ),
            (
                vec![cb(Schema), cb(EndOfStream), cb(Release), cb(Release)],
                crate::rule!("async.release.last"),
            ),
            (
                vec![
                    cb(Schema),
                    Event::Request(1),
                    Event::Cancel,
                    Event::plain(Error, libc::ECANCELED),
                    cb(Release),
                ],
                crate::rule!("async.cancel.no-error"),
            ),
            (
                vec![cb(Schema), Event::Request(0), cb(Release)],
                crate::rule!("async.request.invalid"),
            ),
            (
                vec![Event::plain(Schema, 22), cb(Task), cb(Release)],
                crate::rule!("async.schema-refused"),
            ),
            (
                vec![
                    cb(Schema),
                    Event::Request(2),
                    Event::plain(Task, 22),
                    cb(Error),
                    cb(Release),
                ],
                crate::rule!("async.task-refused"),
            ),
            (
                vec![
                    cb(Schema),
                    Event::Request(1),
                    Event::Cancel,
                    Event::Request(5),
                    cb(Task),
                    cb(Task),
                    cb(Release),
                ],
                crate::rule!("async.cancel.request-nop"),
            ),
        ];
        for (trace, rule) in cases {
            assert_eq!(rules(&trace, DONE), vec![rule], "{trace:?}");
        }
    }

    #[test]
    fn a_failed_extraction_must_be_followed_by_on_error_only() {
        let base = [
            cb(Schema),
            Event::Request(4),
            cb(Task),
            Event::ExtractFailed(5),
        ];
        let with = |tail: &[Event]| {
            let mut t = base.to_vec();
            t.extend_from_slice(tail);
            rules(&t, DONE)
        };
        // on_error, then release: clean.
        assert!(with(&[Event::plain(Error, 5), cb(Release)]).is_empty());
        // Another task, the end of stream, or release straight away.
        for tail in [
            vec![cb(Task), cb(EndOfStream), cb(Release)],
            vec![cb(EndOfStream), cb(Release)],
            vec![cb(Release)],
        ] {
            assert_eq!(
                with(&tail),
                [crate::rule!("async.extract.error-follows")],
                "{tail:?}"
            );
        }
        // A failure after the end (a late extraction) changes nothing.
        let t = [
            cb(Schema),
            Event::Request(4),
            cb(Task),
            cb(EndOfStream),
            Event::ExtractFailed(5),
            cb(Release),
        ];
        assert!(rules(&t, DONE).is_empty());
    }

    #[test]
    fn stalls_are_verdicts_with_the_phase() {
        let t = [cb(Schema), Event::Request(1), cb(Task)];
        let f = judge(
            &t,
            Ending {
                released: false,
                deadline_ms: 50,
            },
        );
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].rule, crate::rule!("async.release.last"));
        assert!(f[0].message.contains("streaming"), "{}", f[0].message);
        let t = [cb(Schema), Event::Request(0)];
        let f = judge(
            &t,
            Ending {
                released: false,
                deadline_ms: 50,
            },
        );
        assert_eq!(f[0].rule, crate::rule!("async.request.invalid"));
    }

    #[test]
    fn reentry_and_overlap() {
        let nested = Event::Callback(Entered {
            callback: Task,
            overlapped: false,
            inside: Some(Inside::Request),
            answer: 0,
        });
        let t = [
            cb(Schema),
            Event::Request(1),
            nested,
            cb(EndOfStream),
            cb(Release),
        ];
        assert_eq!(
            rules(&t, DONE),
            vec![crate::rule!("async.request.reentrant")]
        );
        let overlap = Event::Callback(Entered {
            callback: Task,
            overlapped: true,
            inside: None,
            answer: 0,
        });
        let t = [
            cb(Schema),
            Event::Request(2),
            cb(Task),
            overlap,
            cb(EndOfStream),
            cb(Release),
        ];
        assert_eq!(
            rules(&t, DONE),
            vec![crate::rule!("async.callbacks.serial")]
        );
        // Another callback overlapping: the spec's SHOULD ("should only
        // be called in a serialized manner").
        let late_error = Event::Callback(Entered {
            callback: Error,
            overlapped: true,
            inside: None,
            answer: libc::EIO,
        });
        let t = [
            cb(Schema),
            Event::Request(2),
            cb(Task),
            late_error,
            cb(Release),
        ];
        assert_eq!(
            rules(&t, DONE),
            vec![crate::rule!("async.callbacks.serialized")]
        );
        // on_error after a cancel with requested tasks still pending is
        // what a consumer "MUST be prepared to receive": no rule; the
        // same with nothing pending, or reporting the cancel itself, is
        // async.cancel.no-error.
        let error = |code| {
            Event::Callback(Entered {
                callback: Error,
                overlapped: false,
                inside: None,
                answer: code,
            })
        };
        let pending = [
            cb(Schema),
            Event::Request(3),
            cb(Task),
            Event::Cancel,
            error(libc::EIO),
            cb(Release),
        ];
        assert_eq!(
            rules(&pending, DONE),
            vec![crate::rule!("async.cancel.error-after")]
        );
        let cancelled = [
            cb(Schema),
            Event::Request(3),
            cb(Task),
            Event::Cancel,
            error(libc::ECANCELED),
            cb(Release),
        ];
        assert_eq!(
            rules(&cancelled, DONE),
            vec![crate::rule!("async.cancel.no-error")]
        );
        let nothing_pending = [
            cb(Schema),
            Event::Request(1),
            cb(Task),
            Event::Cancel,
            error(libc::EIO),
            cb(Release),
        ];
        assert_eq!(
            rules(&nothing_pending, DONE),
            vec![crate::rule!("async.cancel.no-error")]
        );
        // Tasks past the requests after a cancel with no request after it:
        // back-pressure (SHOULD), not the request-after-cancel NOP rule.
        let over = [
            cb(Schema),
            Event::Request(1),
            Event::Cancel,
            cb(Task),
            cb(Task),
            cb(Release),
        ];
        assert_eq!(rules(&over, DONE), vec![crate::rule!("async.backpressure")]);
        // on_error from inside cancel is allowed ("other than on_error").
        let err = Event::Callback(Entered {
            callback: Error,
            overlapped: false,
            inside: Some(Inside::Cancel),
            answer: 0,
        });
        let t = [cb(Schema), Event::Request(0), err, cb(Release)];
        assert!(rules(&t, DONE).is_empty());
    }

    /// A legal producer trace for a consumer that requests `credits`
    /// up front and cancels at `cancel_at` (if any): generated from
    /// [`Phase::allowed`] and the counts, never judged.
    fn legal(choices: Vec<u8>, credits: i64, cancel_at: Option<usize>) -> Vec<Event> {
        let mut t = vec![];
        let mut phase = Phase::Start;
        let mut delivered = 0i64;
        let mut cancelled = false;
        for (i, ch) in choices.into_iter().enumerate() {
            if cancel_at == Some(i) && phase == Phase::Open {
                t.push(Event::Cancel);
                cancelled = true;
            }
            let options: Vec<Callback> = phase
                .allowed()
                .iter()
                .copied()
                .filter(|c| match c {
                    Task => delivered < credits,
                    Error => !cancelled,
                    Release => phase != Phase::Open || cancelled,
                    _ => true,
                })
                .collect();
            if options.is_empty() {
                break;
            }
            let c = options[ch as usize % options.len()];
            if phase == Phase::Start && c == Schema {
                t.push(cb(Schema));
                t.push(Event::Request(credits));
                phase = Phase::Open;
                continue;
            }
            if c == Task {
                delivered += 1;
            }
            t.push(cb(c));
            phase = match c {
                Schema => Phase::Open,
                Task => Phase::Open,
                EndOfStream => Phase::Ended,
                Error => Phase::Errored,
                Release => Phase::Released,
            };
        }
        if phase != Phase::Released {
            if phase == Phase::Start {
                t.push(cb(Error));
            }
            if phase == Phase::Open && !cancelled {
                t.push(cb(EndOfStream));
            }
            t.push(cb(Release));
        }
        t
    }

    proptest! {
        #[test]
        fn legal_traces_are_never_judged(
            choices in proptest::collection::vec(any::<u8>(), 0..24),
            credits in 1i64..6,
            cancel_at in proptest::option::of(0usize..24),
        ) {
            let t = legal(choices, credits, cancel_at);
            prop_assert!(judge(&t, DONE).is_empty(), "{:?} judged {:?}", t, judge(&t, DONE));
        }

        #[test]
        fn a_second_release_anywhere_is_caught(
            choices in proptest::collection::vec(any::<u8>(), 0..24),
            credits in 1i64..6,
        ) {
            let mut t = legal(choices, credits, None);
            t.push(cb(Release));
            prop_assert_eq!(rules(&t, DONE), vec![crate::rule!("async.release.last")]);
        }
    }
}
