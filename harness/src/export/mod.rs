//! The harness's own exporter: the instrumented producer consumers are
//! certified against (`arrowcert certify --consumer`).
//!
//! It does not use arrow-rs's `to_ffi`: every member of every structure is
//! chosen here. [`encode`] decides what each structure will hold (offsets,
//! lengths, null counts, which buffers are NULL, what garbage lies under
//! null slots), safely, from arrow-rs data; [`raw`] writes the structures
//! and installs release callbacks that record every call, poison what they
//! release and check for writes; [`stream`] does the same for streams, with
//! injected errors; [`asynchronous`] is an instrumented async device stream
//! producer. Only `raw`, `stream` and `asynchronous` use `unsafe`.

pub mod asynchronous;
pub mod encode;
pub mod format;
mod raw;
mod stream;

pub use encode::{Encoding, Node, SchemaNode, Variation};
pub use raw::{Findings, Handed, Ledger, Root, RELEASED_BYTE};
pub use stream::{FailAt, Failure, StreamPlan, OVERWRITTEN};
