//! arrowcert: conformance and fuzz testing for the Apache Arrow C data,
//! stream, device and async device stream interfaces.
//!
//! Module map (see ARCHITECTURE.md, "Layers"): [`abi`] holds every raw
//! layout; [`plugin`] loads libraries under test and calls them; [`registry`]
//! names the bundled ones. `unsafe` lives only in the modules ARCHITECTURE.md's
//! unsafe map names, with the count of blocks each holds (checked by
//! `harness/tests/module_graph.rs`).

pub mod abi;
pub mod assets;
pub mod asynchronous;
pub mod cai;
pub mod certify;
pub mod cli;
pub mod compare;
pub mod device;
pub mod dlpack;
pub mod engine;
pub mod export;
pub mod fuzz;
pub mod generate;
pub mod inspect;
pub mod malformed;
pub mod matrix;
pub mod plugin;
pub mod quiet;
pub mod registry;
pub mod report;
pub mod roundtrip;
pub mod rules;
pub mod run;
pub mod scenario;
pub mod sdk;
pub mod sources;
