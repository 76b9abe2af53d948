#![no_main]
use arrowcert::fuzz::{fuzz, Target};
libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz(Target::DlpackReader, data));
