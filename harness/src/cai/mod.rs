//! The CUDA Array Interface (`__cuda_array_interface__`, version 3;
//! `shared/spec/CudaArrayInterface.rst`), certified:
//! [`value`] is the typed description of a dict the Python bridge sends,
//! [`check`] the pure checker of the dict's rules, [`run`] the cases that
//! play a strict consumer against it, [`consumer`] the cases that judge a
//! consumer, [`pair`] one library's array read by another's consumer,
//! [`exports`] the object's other protocols (its DLPack and,
//! through [`arrow`], its Arrow device array) and
//! [`agree`] whether they say what the dict says, and [`suite`] the cases
//! as a worker runs them (docs/CAI.md).

#![forbid(unsafe_code)]

pub mod agree;
pub mod arrow;
pub mod check;
pub mod consumer;
pub mod exports;
pub mod pair;
pub mod run;
pub mod suite;
pub mod value;
