//! Engines that run plans of cases for the commands: certification (runs
//! and shrinking). The commands (`cli`) parse, keep reports and print.

pub mod certify;
