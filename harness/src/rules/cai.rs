//! The CUDA Array Interface rules: what `arrowcert certify --cai` judges of
//! a producer's `__cuda_array_interface__`, each quoting one sentence of
//! `shared/spec/CudaArrayInterface.rst` (version 3). Levels follow the
//! quote's own word; a rule the text implies without an RFC 2119 word is
//! marked `inferred` and is at most SHOULD. The tests below check every
//! quote against the file, after its section's heading.

use super::{Level, Rule, Side};

/// `shared/spec/CudaArrayInterface.rst`.
pub const CAI_SPEC: &str = "CudaArrayInterface.rst";

const SPEC_SECTION: &str = "Python Interface Specification";
const MUST_CONTAIN: &str = "The __cuda_array_interface__ attribute returns a dictionary (dict) that must contain the following entries:";

/// Why the `cai.agree.*` rules are inferred.
const AGREE_INFERRED: &str = "no text says that two protocols' descriptions of one object agree; each describes the object it is exported from (the CAI dict's entries; DLPack's from_dlpack returns \"an array containing the data in x\"; an Arrow device array describes its data), so two descriptions of one object that differ cannot both be right";

const AGREE_HOW_POINTER: &str = "Where the producer's object also has __dlpack__, the harness calls it (max_version=(1, 0), without it if the object refuses the keyword), reads the capsule's DLTensor and drops the capsule; where it has __arrow_c_device_array__ and the CAI array is one-dimensional, it moves the ArrowSchema and ArrowDeviceArray out of their capsules, reads the format, length, offset, buffer list and device, and releases them. No device memory is read: the comparison is of metadata. The address of element 0 (DLPack: data + byte_offset; Arrow: buffers[1] + offset x the element size) must be the dict's data pointer. An array without elements is not compared (CAI gives 0 for it, DLPack any pointer). Where the object exports the CUDA Array Interface only, every cai.agree rule is not exercised, with the reason; where the case already failed a rule that judges the same CAI entry (cai.data.accessible, cai.data.lifetime for the pointer; cai.strides, cai.values for strides; cai.shape, cai.typestr, cai.typestr.format, cai.data), the agree rule is not exercised, so that one fault is reported once.";

pub static CAI_RULES: &[Rule] = &[
    Rule {
        id: "cai.dict",
        level: Level::Must,
        side: Side::Producer,
        area: "cai",
        summary: "__cuda_array_interface__ is a dict",
        spec_file: CAI_SPEC,
        section: SPEC_SECTION,
        quote: MUST_CONTAIN,
        observation: "The harness reads the object's __cuda_array_interface__ attribute through the bridge: anything but a dict (or a subclass of dict) fails, and then no other rule of the case is judged.",
        inferred: None,
    },
    Rule {
        id: "cai.shape",
        level: Level::Must,
        side: Side::Producer,
        area: "cai",
        summary: "the dict has shape, a tuple of ints",
        spec_file: CAI_SPEC,
        section: SPEC_SECTION,
        quote: MUST_CONTAIN,
        observation: "The entry is listed as \"shape: (integer, ...)\", \"A tuple of int (or long) representing the size of each dimension\": a missing entry, a list, or an element that is not an int (a bool is not one) fails.",
        inferred: None,
    },
    Rule {
        id: "cai.typestr",
        level: Level::Must,
        side: Side::Producer,
        area: "cai",
        summary: "the dict has typestr, a str",
        spec_file: CAI_SPEC,
        section: SPEC_SECTION,
        quote: MUST_CONTAIN,
        observation: "The entry is listed as \"typestr: str\": a missing entry or one of another type (bytes included) fails.",
        inferred: None,
    },
    Rule {
        id: "cai.data",
        level: Level::Must,
        side: Side::Producer,
        area: "cai",
        summary: "the dict has data, a 2-tuple (int pointer, bool read-only flag)",
        spec_file: CAI_SPEC,
        section: SPEC_SECTION,
        quote: MUST_CONTAIN,
        observation: "The entry is listed as \"data: (integer, boolean)\", \"The data is a 2-tuple\": a missing entry, a list, a tuple of another length, a pointer that is not a non-negative int or a flag that is not a bool fails.",
        inferred: None,
    },
    Rule {
        id: "cai.version",
        level: Level::Must,
        side: Side::Producer,
        area: "cai",
        summary: "the dict has version, an int",
        spec_file: CAI_SPEC,
        section: SPEC_SECTION,
        quote: MUST_CONTAIN,
        observation: "The entry is listed as \"version: integer\": a missing entry or one that is not an int (a bool or a str) fails.",
        inferred: None,
    },
    Rule {
        id: "cai.version.current",
        level: Level::Should,
        side: Side::Producer,
        area: "cai",
        summary: "version is 3, the version this text defines",
        spec_file: CAI_SPEC,
        section: SPEC_SECTION,
        quote: "An integer for the version of the interface being exported. The current version is 3.",
        observation: "An int version other than 3 fails (earlier versions made no statement about synchronization or zero-size arrays; later ones are not this text). A version that is not an int is cai.version's, not judged here.",
        inferred: Some("the text names the current version without requiring it; the harness certifies version 3 and an exporter of another version is not judged by this text"),
    },
    Rule {
        id: "cai.typestr.format",
        level: Level::Should,
        side: Side::Producer,
        area: "cai",
        summary: "typestr is a NumPy array-interface type string (byte order, type code, size)",
        spec_file: CAI_SPEC,
        section: SPEC_SECTION,
        quote: "This has the same definition as typestr in the numpy array interface.",
        observation: "A str typestr must read as NumPy's: a byte-order character (<, >, |), a type code (b, i, u, f, c, m, M, O, S, U, V, t) and a decimal size in bytes, a datetime or timedelta followed by its [unit]. Anything else (\"float64\", \"f8\") fails.",
        inferred: Some("the sentence defines typestr by reference to NumPy's without an RFC 2119 word"),
    },
    Rule {
        id: "cai.descr",
        level: Level::Should,
        side: Side::Producer,
        area: "cai",
        summary: "descr, when given, is a NumPy array-interface descr: a list of (name, type[, shape]) tuples",
        spec_file: CAI_SPEC,
        section: SPEC_SECTION,
        quote: "This follows the same specification as in the numpy array interface.",
        observation: "An absent descr is not judged beyond being optional. A given one must be a list of tuples of 2 or 3 elements: a str name (or a (title, name) tuple), a type string or a nested descr list, and optionally a shape tuple of ints. Anything else fails.",
        inferred: Some("the sentence defines descr by reference to NumPy's without an RFC 2119 word"),
    },
    Rule {
        id: "cai.data.accessible",
        level: Level::Must,
        side: Side::Producer,
        area: "cai",
        summary: "the data pointer of an array with elements points at device-accessible memory covering the array",
        spec_file: CAI_SPEC,
        section: SPEC_SECTION,
        quote: "The data must be device-accessible.",
        observation: "For an array with at least one element, a pointer of 0 fails. On the software device (adapters/cai/softdevice.py) the harness asks the device whether every byte the shape, strides and typestr reach lies in one of its live allocations. On CUDA the harness's CUDA backend asks the driver for the allocation holding the pointer (cuMemGetAddressRange, else the pointer's range attributes): the range must lie in one live allocation of device, managed or pinned host memory (not yet run on a GPU); without a driver the rule is not exercised, with the reason.",
        inferred: None,
    },
    Rule {
        id: "cai.data.zero-size",
        level: Level::Should,
        side: Side::Producer,
        area: "cai",
        summary: "a zero-size array's data pointer is 0",
        spec_file: CAI_SPEC,
        section: SPEC_SECTION,
        quote: "For zero-size arrays, use 0 here.",
        observation: "For a shape with a 0 dimension, the pointer of data must be 0; any other value fails.",
        inferred: Some("the sentence is an instruction without an RFC 2119 word"),
    },
    Rule {
        id: "cai.strides",
        level: Level::Should,
        side: Side::Producer,
        area: "cai",
        summary: "strides is absent, None, or a tuple of ints, one per dimension",
        spec_file: CAI_SPEC,
        section: SPEC_SECTION,
        quote: "Otherwise, a tuple of int (or long) is explicitly given for representing the number of bytes to skip to access the next element at each dimension.",
        observation: "An absent or None strides means C-contiguous (\"If strides is not given, or it is None, the array is in C-contiguous layout.\"). A given one must be a tuple of as many ints as shape has: a list, a non-int element or another length fails. (Strides in bytes that do not describe the values are cai.values'.)",
        inferred: Some("the optional entries are defined without an RFC 2119 word"),
    },
    Rule {
        id: "cai.mask",
        level: Level::Should,
        side: Side::Producer,
        area: "cai",
        summary: "mask is absent, None, or an object exposing __cuda_array_interface__",
        spec_file: CAI_SPEC,
        section: SPEC_SECTION,
        quote: "This has the same definition as mask in the numpy array interface.",
        observation: "The entry is listed as \"mask: None or object exposing the __cuda_array_interface__\": any other value fails, and so does a mask object whose own __cuda_array_interface__ is not a dict with shape, typestr, data and version.",
        inferred: Some("the optional entries are defined without an RFC 2119 word"),
    },
    Rule {
        id: "cai.stream.type",
        level: Level::Should,
        side: Side::Producer,
        area: "cai",
        summary: "stream is absent, None or an int",
        spec_file: CAI_SPEC,
        section: SPEC_SECTION,
        quote: "Any other integer: a cudaStream_t represented as a Python integer.",
        observation: "The entry is listed as \"stream: None or integer\": a str, a float, a bool or any other object fails. (0 is cai.stream.zero's.)",
        inferred: Some("the optional entries are defined without an RFC 2119 word"),
    },
    Rule {
        id: "cai.stream.zero",
        level: Level::Should,
        side: Side::Producer,
        area: "cai",
        summary: "stream is never 0 (None, 1 or 2 instead)",
        spec_file: CAI_SPEC,
        section: SPEC_SECTION,
        quote: "Any use case where 0 might be given should either use None, 1, or 2 instead for clarity.",
        observation: "An int stream of 0 fails (\"0: This is disallowed as it would be ambiguous between None and the default stream\"). The harness does not synchronize on it.",
        inferred: None,
    },
    Rule {
        id: "cai.values",
        level: Level::Should,
        side: Side::Producer,
        area: "cai",
        summary: "data, shape, strides and typestr describe the object's values",
        spec_file: CAI_SPEC,
        section: SPEC_SECTION,
        quote: "The first element is the data pointer as a Python int (or long).",
        observation: "After synchronizing on the stream the dict gives (none for None), the harness reads every element at data + sum(index * stride) (C-contiguous strides when strides is absent or None) and compares its bytes with the values the adapter was asked to hold (contiguous, zero-size and every-second-row views). On the software device the memory is host memory, read through process_vm_readv; on CUDA the extent the strides reach is copied to the host through the driver (cuMemcpy) after cuStreamSynchronize on the stream's handle, or cuCtxSynchronize for the settled read (not yet run on a GPU); without a driver: not exercised, with the reason.",
        inferred: Some("the entries are defined without an RFC 2119 word; that they describe the object the dict was read from is what they are for"),
    },
    Rule {
        id: "cai.producer.sync",
        level: Level::Must,
        side: Side::Producer,
        area: "cai",
        summary: "with work pending on the data, synchronizing on the exported stream is enough to see it done",
        spec_file: CAI_SPEC,
        section: "Interface Requirements",
        quote: "When exporting an array through the CAI, Producers must ensure that:",
        observation: "The adapter is asked for an array whose values are still being written by work enqueued on a stream (the software device's emulated stream: the writes happen when that stream is synchronized). The harness synchronizes on the exported stream only (none when stream is None or absent) and reads the values: stale values fail, when synchronizing the whole device then shows the right ones (\"If there is work on the data enqueued in one or more streams, then synchronization on the provided stream is sufficient to ensure synchronization with all pending work.\"). A stream entry that is not a usable int (cai.stream.type, cai.stream.zero) leaves the rule not exercised in that case.",
        inferred: None,
    },
    Rule {
        id: "cai.stream.lifetime",
        level: Level::Must,
        side: Side::Producer,
        area: "cai",
        summary: "an exported stream lives at least as long as the object it was exported from",
        spec_file: CAI_SPEC,
        section: "Streams",
        quote: "It is therefore required that a Producer exporting data on the interface with an associated stream ensures that the exported stream's lifetime is equal to or surpasses the lifetime of the object from which the interface was exported.",
        observation: "For an int stream other than 1 and 2 (the default streams, which always live), the harness asks the device, while the object is still alive and after the dict has been dropped and garbage collected, whether the stream still exists: a destroyed stream fails. The software device answers from its stream table; on CUDA it is not asked (cuStreamQuery on a destroyed handle is undefined, in the harness's own process): not exercised, with the reason.",
        inferred: None,
    },
    Rule {
        id: "cai.data.lifetime",
        level: Level::Should,
        side: Side::Producer,
        area: "cai",
        summary: "the data stays valid, with its values, while the object lives (not only while the dict does)",
        spec_file: CAI_SPEC,
        section: "Data",
        quote: "Obtaining the value of the __cuda_array_interface__ property of any object has no effect on the lifetime of the object from which it was created.",
        observation: "After reading the values, the harness drops the dict (keeping the object), collects garbage, and reads the same bytes again: a range no longer in a live allocation of the device, or different bytes, fails. Software device only, as cai.values.",
        inferred: Some("the text says the dict has no effect on the object's lifetime and the user keeps the owner alive; that the memory the dict points at lives as long as that object does, not as long as the dict, is implied"),
    },
    // ---- across protocols (issue 42 item 4): the same object's DLPack and Arrow device array ----
    Rule {
        id: "cai.agree.pointer",
        level: Level::Should,
        side: Side::Producer,
        area: "cai",
        summary: "where the object also exports __dlpack__ or __arrow_c_device_array__, each puts element 0 at the CAI data pointer",
        spec_file: CAI_SPEC,
        section: SPEC_SECTION,
        quote: "The first element is the data pointer as a Python int (or long).",
        observation: AGREE_HOW_POINTER,
        inferred: Some(AGREE_INFERRED),
    },
    Rule {
        id: "cai.agree.shape",
        level: Level::Should,
        side: Side::Producer,
        area: "cai",
        summary: "where the object also exports __dlpack__ or __arrow_c_device_array__, each gives the CAI shape",
        spec_file: CAI_SPEC,
        section: SPEC_SECTION,
        quote: "A tuple of int (or long) representing the size of each dimension.",
        observation: "The DLTensor's ndim and shape, and the ArrowDeviceArray's length (the one dimension of a one-dimensional CAI array), are compared with the dict's shape: another number of dimensions or another size fails. A shape that cannot be read leaves the rule not exercised with that protocol.",
        inferred: Some(AGREE_INFERRED),
    },
    Rule {
        id: "cai.agree.strides",
        level: Level::Should,
        side: Side::Producer,
        area: "cai",
        summary: "where the object also exports __dlpack__ or __arrow_c_device_array__, its strides and the CAI strides step over the same bytes",
        spec_file: CAI_SPEC,
        section: SPEC_SECTION,
        quote: "If strides is not given, or it is None, the array is in C-contiguous layout.",
        observation: "All are turned into bytes: CAI's strides as given (C-contiguous when absent or None), DLPack's times its element size (C-contiguous when NULL: \"can be NULL, indicating tensor is compact and row-majored\"), an Arrow primitive array's the element size (its values are contiguous). They are compared along every dimension of more than one element (the stride of a dimension of size 0 or 1 steps over nothing): a difference fails. Not exercised when the shapes differ (cai.agree.shape), when the array has no elements, or when an element size is not a whole number of bytes.",
        inferred: Some(AGREE_INFERRED),
    },
    Rule {
        id: "cai.agree.dtype",
        level: Level::Should,
        side: Side::Producer,
        area: "cai",
        summary: "where the object also exports __dlpack__ or __arrow_c_device_array__, its element type is the CAI typestr's",
        spec_file: CAI_SPEC,
        section: SPEC_SECTION,
        quote: "The type string. This has the same definition as typestr in the numpy array interface.",
        observation: "A little-endian or byte-order-free typestr of kind i, u, f, c or b is turned into the DLDataType it names (i: kDLInt, u: kDLUInt, f: kDLFloat, c: kDLComplex, b1: kDLBool with 8 bits; bits = 8 x size; lanes 1) and compared with the capsule's dtype; an Arrow primitive format reads as the typestr it matches (c C s S i I l L e f g: i1 u1 i2 u2 i4 u4 i8 u8 f2 f4 f8). Another type fails; an Arrow format of no such type (booleans are bits in Arrow, bytes in CAI) is not compared. Other typestrs (datetimes, strings, records, a byte order other than this machine's) have no DLPack type to compare with: not exercised, with the reason.",
        inferred: Some(AGREE_INFERRED),
    },
    Rule {
        id: "cai.agree.device",
        level: Level::Should,
        side: Side::Producer,
        area: "cai",
        summary: "where the object also exports __dlpack__ or __arrow_c_device_array__, each places the data on one CUDA device",
        spec_file: CAI_SPEC,
        section: "CUDA Array Interface (Version 3)",
        quote: "The CUDA Array Interface (or CAI) is created for interoperability between different implementations of CUDA array-like objects in various projects.",
        observation: "The DLTensor's device, what __dlpack_device__() returns (when the object has it) and the ArrowDeviceArray's device_type must each be a CUDA device type, which DLPack and Arrow number alike: CUDA (2), CUDA host (3, pinned host memory CUDA can address) or CUDA managed (13). Any other (CPU included) fails. The CAI dict names no device id; the ids the other protocols name for the same CUDA device type must be one (one memory, one device); ids of other types are not compared (Arrow gives the CPU -1 where DLPack gives 0).",
        inferred: Some(AGREE_INFERRED),
    },
    Rule {
        id: "cai.agree.readonly",
        level: Level::Should,
        side: Side::Producer,
        area: "cai",
        summary: "where the object also exports a versioned DLPack tensor, its READ_ONLY flag is the CAI read-only flag",
        spec_file: CAI_SPEC,
        section: SPEC_SECTION,
        quote: "The second element is the read-only flag as a Python bool.",
        observation: "The harness asks __dlpack__ for a DLManagedTensorVersioned (max_version=(1, 0)) and compares bit DLPACK_FLAG_BITMASK_READ_ONLY of its flags with the second element of the dict's data: set for a writable CAI array, or clear for a read-only one, fails. A legacy DLManagedTensor has no flags, nor has the Arrow C device interface: not exercised, with the reason; so is a data flag that is not a bool (cai.data).",
        inferred: Some(AGREE_INFERRED),
    },
    // ---- the consumer (the harness exports) ----
    Rule {
        id: "cai.consumer.sync",
        level: Level::Must,
        side: Side::Consumer,
        area: "cai",
        summary: "a consumer given an int stream synchronizes on it, or enqueues its work on it, before it reads the data",
        spec_file: CAI_SPEC,
        section: SPEC_SECTION,
        quote: "An optional stream upon which synchronization must take place at the point of consumption, either by synchronizing on the stream or enqueuing operations on the data on the given stream.",
        observation: "The harness hands the consumer's cai_consume(obj) an array whose values are still being written by work enqueued on the exported stream (on the software device: the writes happen when that stream is synchronized) and compares the values it returns with the finished ones. Judged only when the same consumer returns the right values for the same array with no work pending (else what it reads is wrong for another reason). On CUDA the harness makes the array itself: device memory holding stale bytes, the values written late by a spin kernel and a copy on a non-blocking stream of its own, that stream in the dict (not yet run on a GPU); without a driver: not exercised, with the reason.",
        inferred: None,
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{level_supported, normalise};
    use std::collections::HashSet;

    /// The spec text, its named hyperlink references (`numpy array
    /// interface`_) shown as their text.
    fn spec_text() -> String {
        let path =
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/spec/").to_string() + CAI_SPEC;
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let chars: Vec<char> = text.chars().collect();
        let mut out = String::with_capacity(text.len());
        for (i, &c) in chars.iter().enumerate() {
            let link_end = c == '_'
                && i > 0
                && chars[i - 1] == '`'
                && chars
                    .get(i + 1)
                    .is_none_or(|n| !n.is_alphanumeric() && *n != '_');
            if !link_end {
                out.push(c);
            }
        }
        out
    }

    /// The same check as the DLPack quotes': the section heading is a line
    /// of the file, and the quote comes after it.
    #[test]
    fn every_quote_is_a_sentence_of_its_file_under_its_section() {
        let text = spec_text();
        let mut failures = Vec::new();
        for r in CAI_RULES {
            let Some(at) = text
                .lines()
                .position(|l| l.trim() == r.section)
                .map(|i| text.lines().take(i).map(|l| l.len() + 1).sum::<usize>())
            else {
                failures.push(format!("{}: no section {:?}", r.id, r.section));
                continue;
            };
            if !normalise(&text[at..]).contains(&normalise(r.quote)) {
                failures.push(format!(
                    "{}: quote not in {} after {:?}: {}",
                    r.id,
                    r.spec_file,
                    r.section,
                    normalise(r.quote)
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn levels_follow_the_quotes_and_ids_are_unique() {
        let mut seen = HashSet::new();
        for r in CAI_RULES {
            assert!(seen.insert(r.id), "{} twice", r.id);
            assert!(r.id.starts_with("cai.") && r.area == "cai", "{}", r.id);
            level_supported(r).unwrap();
            assert_eq!(crate::rules::find(r.id).map(|f| f.id), Some(r.id));
            assert!(r.quote.len() >= 30, "{}: quote too short", r.id);
            if r.inferred.is_some() {
                assert!(crate::rules::explain(r).contains("inferred"), "{}", r.id);
            }
        }
        let mut strong = *CAI_RULES.iter().find(|r| r.id == "cai.values").unwrap();
        strong.level = Level::Must;
        assert!(
            level_supported(&strong).is_err(),
            "inferred rules are at most SHOULD"
        );
        let mut strong = *CAI_RULES
            .iter()
            .find(|r| r.id == "cai.stream.zero")
            .unwrap();
        strong.level = Level::Must;
        assert!(
            level_supported(&strong).is_err(),
            "a should sentence is not MUST"
        );
    }

    #[test]
    fn a_quote_that_is_not_in_the_file_is_caught() {
        let text = normalise(&spec_text());
        assert!(!text.contains(&normalise("The stream entry must never be 0.")));
        assert!(text.contains(&normalise(MUST_CONTAIN)));
    }
}
