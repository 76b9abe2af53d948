//! The async device stream (CDeviceDataInterface.rst, "Async Device Stream
//! Interface"), checked from both sides.
//!
//! - [`model`]: the protocol as a state machine. It judges a trace of
//!   handler callbacks and consumer calls, and (in tests) generates legal
//!   traces; both certification sides use it, so a rule reads the same
//!   whichever side broke it.
//! - [`schedule`]: what the harness does when it plays the consumer
//!   (request sizes, cancels, refusals, extraction) and when it plays the
//!   producer (threads, delays, errors); each is a short text that is part
//!   of the case ID, so replaying an ID replays the schedule, and shrinking
//!   walks towards fewer steps.
//! - [`handler`] (unsafe): the instrumented `ArrowAsyncDeviceStreamHandler`
//!   the harness hands to a producer under test.
//!
//! The harness's own async producer, which a consumer under test receives,
//! lives with the other exports in [`crate::export::asynchronous`].

pub mod handler;
pub mod model;
pub mod schedule;
