//! The DLPack rules: what `arrowcert certify --dlpack` judges, each quoting
//! one sentence of the DLPack texts in `harness/spec/dlpack/` (the Python
//! specification in dmlc/dlpack, `dlpack.h`'s comments, the Array API
//! standard's `__dlpack__`/`from_dlpack` docstrings). Levels follow the
//! quote's own word; a rule the texts imply without saying is marked
//! `inferred` and is at most SHOULD. The tests in `rules/mod.rs` check every
//! quote against its file.

use super::{Level, Rule, Side};

/// `harness/spec/dlpack/python_spec.rst`.
pub const PYTHON_SPEC: &str = "python_spec.rst";
/// `harness/spec/dlpack/dlpack-h-comments.txt`.
pub const HEADER: &str = "dlpack-h-comments.txt";
/// `harness/spec/dlpack/array-api-dlpack.txt`.
pub const ARRAY_API: &str = "array-api-dlpack.txt";

pub static DLPACK_RULES: &[Rule] = &[
    // ---- the producer (`__dlpack__`; the harness is the consumer) ----
    Rule {
        id: "dlpack.capsule.name",
        level: Level::Must,
        side: Side::Producer,
        area: "dlpack",
        summary: "__dlpack__ returns a capsule named dltensor (dltensor_versioned for a DLManagedTensorVersioned)",
        spec_file: PYTHON_SPEC,
        section: "Implementation",
        quote: "The producer must set the PyCapsule name to \"dltensor\" so that it can be inspected by name, and set PyCapsule_Destructor that calls the deleter of the DLManagedTensor when the \"dltensor\"-named capsule is no longer needed.",
        observation: "The harness calls __dlpack__ and reads the returned capsule's name: it must be dltensor, or dltensor_versioned (\"when DLManagedTensorVersioned is in use the capsule names dltensor and used_dltensor will need a _versioned suffix\"); a versioned capsule is read as DLManagedTensorVersioned, a dltensor one as DLManagedTensor. Any other object or name fails.",
        inferred: None,
    },
    Rule {
        id: "dlpack.capsule.destructor",
        level: Level::Must,
        side: Side::Producer,
        area: "dlpack",
        summary: "an unconsumed capsule's destructor calls the tensor's deleter, exactly once",
        spec_file: PYTHON_SPEC,
        section: "Implementation",
        quote: "The producer must set the PyCapsule name to \"dltensor\" so that it can be inspected by name, and set PyCapsule_Destructor that calls the deleter of the DLManagedTensor when the \"dltensor\"-named capsule is no longer needed.",
        observation: "The harness replaces the tensor's deleter member with a counting trampoline that calls the original, leaves the capsule's name as it is and drops the capsule: the trampoline must have run once. A destructor may call the deleter function itself rather than through the member: when the trampoline did not run, the harness drops every other reference to the library's array and looks at a weak reference to it: the tensor holds the array until it is deleted, so an array still alive means the tensor was never deleted (a fail); an array that takes no weak reference leaves the rule not exercised.",
        inferred: None,
    },
    Rule {
        id: "dlpack.capsule.used-untouched",
        level: Level::Should,
        side: Side::Producer,
        area: "dlpack",
        summary: "a capsule renamed used_dltensor[_versioned] does not call the deleter when it dies",
        spec_file: PYTHON_SPEC,
        section: "Implementation",
        quote: "It does so by renaming the capsule to \"used_dltensor\" to ensure that PyCapsule_Destructor will not get called (ensured if PyCapsule_Destructor calls deleter only for capsules whose name is \"dltensor\"), but the deleter of the DLManagedTensor will be called by the destructor of the consumer library object created to own the DLManagedTensor obtained from the capsule.",
        observation: "The harness takes the tensor as a consumer does (renames the capsule to used_dltensor or used_dltensor_versioned), puts its counting trampoline in the deleter member and drops the capsule: the trampoline must not run until the harness calls the deleter itself.",
        inferred: Some("the sentence tells the consumer what renaming achieves; that the producer's destructor must honour it is implied"),
    },
    Rule {
        id: "dlpack.lifetime.until-deleter",
        level: Level::Should,
        side: Side::Producer,
        area: "dlpack",
        summary: "the tensor's memory stays valid, with its values, until its deleter runs",
        spec_file: PYTHON_SPEC,
        section: "Semantics",
        quote: "The producer keeps owning the memory of x (and y if a copy is made)",
        observation: "After taking the tensor (capsule renamed), the harness drops the capsule and the library's own array, collects garbage, and reads the tensor's data again through process_vm_readv: the values must be unchanged (memory freed or reused reads differently, or not at all). Then it calls the deleter.",
        inferred: Some("the text says the producer keeps owning the memory; that it stays valid until the deleter is called is what owning it for a borrower means"),
    },
    Rule {
        id: "dlpack.tensor.describes",
        level: Level::Should,
        side: Side::Producer,
        area: "dlpack",
        summary: "the DLTensor (shape, strides in elements, dtype, byte_offset, data) describes the array's values",
        spec_file: ARRAY_API,
        section: "from_dlpack",
        quote: "an array containing the data in x.",
        observation: "The harness reads the DLTensor through process_vm_readv (shape, strides, dtype, byte_offset, every element at data + byte_offset + sum(index * stride) * itemsize) and compares each element with what the library was given (after the view the case applied: a step, a transpose, an offset, the first axis reversed (a negative stride), a broadcast (a zero stride), a step along the second axis (gaps inside a row)). Unreadable shape, strides or data, a negative dimension or different values fail.",
        inferred: Some("the texts define the fields; that a capsule describes the array it was exported from is implied by from_dlpack returning \"an array containing the data in x\""),
    },
    Rule {
        id: "dlpack.strides.not-null",
        level: Level::Must,
        side: Side::Producer,
        area: "dlpack",
        summary: "a tensor of DLPack 1.2 or later with ndim > 0 has non-NULL strides",
        spec_file: HEADER,
        section: "Part 2: v1.2 and v1.3",
        quote: "strides of the tensor (in number of elements, not bytes), can not be NULL if ndim != 0, must points to an array of ndim elements that specifies the strides, so consumer can always rely on strides[dim] being valid for 0 <= dim < ndim.",
        observation: "A versioned capsule whose version is 1.2 or later and whose ndim is not 0 must have strides that are not NULL. Older capsules (legacy dltensor, 1.0, 1.1) may have NULL strides, read as compact row-major (\"Before DLPack v1.2, strides can be NULL to indicate contiguous data\").",
        inferred: None,
    },
    Rule {
        id: "dlpack.flags.known",
        level: Level::Should,
        side: Side::Producer,
        area: "dlpack",
        summary: "a versioned tensor's flags are 0 but for the bits the header defines",
        spec_file: HEADER,
        section: "Part 1: v1.1",
        quote: "By default the flags should be set to 0.",
        observation: "A DLManagedTensorVersioned's flags may carry READ_ONLY, IS_COPIED and IS_SUBBYTE_TYPE_PADDED (the bits of v1.3); any other bit fails.",
        inferred: None,
    },
    Rule {
        id: "dlpack.dtype.code",
        level: Level::Should,
        side: Side::Producer,
        area: "dlpack",
        summary: "dtype.code is one of DLDataTypeCode's values",
        spec_file: HEADER,
        section: "Part 1: v1.1",
        quote: "We keep it uint8_t instead of DLDataTypeCode for minimal memory footprint, but the value should be one of DLDataTypeCode enum values.",
        observation: "The harness reads dtype.code: a value above kDLFloat4_e2m1fn (17, the last of v1.3) fails.",
        inferred: None,
    },
    Rule {
        id: "dlpack.data.zero-size-null",
        level: Level::Should,
        side: Side::Producer,
        area: "dlpack",
        summary: "a tensor with no elements has a NULL data pointer",
        spec_file: PYTHON_SPEC,
        section: "Implementation",
        quote: "If the array is of size zero, the data pointer in DLTensor should be set to either NULL or 0.",
        observation: "For an array with a zero-length dimension the harness reads DLTensor.data: anything but NULL fails.",
        inferred: None,
    },
    Rule {
        id: "dlpack.copy.flag",
        level: Level::Must,
        side: Side::Producer,
        area: "dlpack",
        summary: "a copy made for __dlpack__(copy=True) sets DLPACK_FLAG_BITMASK_IS_COPIED",
        spec_file: ARRAY_API,
        section: "__dlpack__",
        quote: "When a copy happens, the DLPACK_FLAG_BITMASK_IS_COPIED flag must be set.",
        observation: "The harness calls __dlpack__(max_version=(1, 0), copy=True): a versioned capsule must have IS_COPIED set. (A legacy capsule cannot carry the flag; a BufferError refusing copy=True is accepted.)",
        inferred: None,
    },
    Rule {
        id: "dlpack.copy.true-copies",
        level: Level::Must,
        side: Side::Producer,
        area: "dlpack",
        summary: "__dlpack__(copy=True) exports a copy, not the array's own memory",
        spec_file: ARRAY_API,
        section: "__dlpack__",
        quote: "If True, the function must always copy (performed by the producer; see also copy-keyword-argument).",
        observation: "The harness exports the same array with copy=None and then with copy=True: the second tensor's data (plus byte_offset) must not be the first's.",
        inferred: None,
    },
    Rule {
        id: "dlpack.copy.false-no-copy",
        level: Level::Must,
        side: Side::Producer,
        area: "dlpack",
        summary: "__dlpack__(copy=False) exports the array's own memory, or raises BufferError",
        spec_file: ARRAY_API,
        section: "__dlpack__",
        quote: "If False, the function must never copy, and raise a BufferError in case a copy is deemed necessary (e.g. if a cross-device data movement is requested, and it is not possible without a copy).",
        observation: "The harness exports the same CPU array with copy=None and then with copy=False: the second tensor must not be flagged IS_COPIED, and its data (plus byte_offset) must be the first's when the first is not a copy. A refusal must be a BufferError (a producer that does not take the keyword, a TypeError, is not judged).",
        inferred: None,
    },
    Rule {
        id: "dlpack.deleter.frees",
        level: Level::Should,
        side: Side::Producer,
        area: "dlpack",
        summary: "the tensor's deleter frees what the export holds (no memory kept per export)",
        spec_file: HEADER,
        section: "Part 1: v1.1",
        quote: "This should be called to destruct manager_ctx which holds the DLManagedTensorVersioned.",
        observation: "In one case per library the harness loads 1024 float64 values, exports them with max_version=(1, 3), takes the capsule, drops every object, calls the deleter and collects garbage, over and over, with the allocation tracker preloaded into the worker (the Arrow *.release.frees accounting: 2 unmeasured repetitions, 3 measured, all growing, confirmed by 3 more after 16): bytes held that grow with every repetition are a leak. In the deleter-thread cases (dlpack.deleter.without-gil) the library's array, dropped by everyone else before the deleter ran on a native thread, must be gone (its weak reference dead) once it returned and garbage was collected.",
        inferred: Some("the header calls the deleter the destructor of manager_ctx; that destructing it frees what the export holds (the memory of an array no one else references) is what a destructor is"),
    },
    Rule {
        id: "dlpack.deleter.without-gil",
        level: Level::Must,
        side: Side::Producer,
        area: "dlpack",
        summary: "the tensor's deleter works when called from a native thread that does not hold the GIL",
        spec_file: PYTHON_SPEC,
        section: "Implementation",
        quote: "The DLManagedTensor deleter must ensure that sharing beyond Python boundaries is possible, this means that the GIL must be acquired explicitly if it uses Python objects or API.",
        observation: "The harness takes the capsule (renamed), drops the library's array and every other reference it holds, and calls the tensor's deleter from a native thread it starts for that call, one that has never run Python and does not hold the GIL (as a consumer's worker thread, or C++ code outside Python, may): the deleter must return within 5 s (a deadlock fails) and must not crash the process (a crash of the case in that call fails; the DLPack worker runs Python with PYTHONMALLOC=debug, whose hooks abort on Python memory calls made without the GIL). Asked legacy and versioned, one case each.",
        inferred: None,
    },
    Rule {
        id: "dlpack.device.unsupported-raises",
        level: Level::Must,
        side: Side::Producer,
        area: "dlpack",
        summary: "__dlpack__(dl_device=...) for a device the producer cannot handle raises BufferError",
        spec_file: ARRAY_API,
        section: "__dlpack__",
        quote: "If the device type cannot be handled by the producer, this function must raise BufferError.",
        observation: "The harness asks a CPU array for dl_device=(kDLCUDA, 0): the call must raise BufferError (a subclass counts), or return a capsule on that device. Any other exception fails.",
        inferred: None,
    },
    Rule {
        id: "dlpack.device.agrees",
        level: Level::Should,
        side: Side::Producer,
        area: "dlpack",
        summary: "without dl_device, the capsule's device is __dlpack_device__()",
        spec_file: ARRAY_API,
        section: "__dlpack__",
        quote: "Default is None, meaning the exported capsule should be on the same device as self is.",
        observation: "The harness calls __dlpack_device__() and compares the (device_type, device_id) it returns with the device of the tensor __dlpack__ exported without dl_device.",
        inferred: None,
    },
    Rule {
        id: "dlpack.errors.buffer-error",
        level: Level::Should,
        side: Side::Producer,
        area: "dlpack",
        summary: "__dlpack__ refuses data it cannot export with BufferError",
        spec_file: ARRAY_API,
        section: "__dlpack__",
        quote: "Implementations should raise BufferError when the data cannot be exported as DLPack (e.g., incompatible dtype or strides).",
        observation: "When __dlpack__(max_version=(1, 3)) raises, the harness calls __dlpack__() without keywords too (a TypeError may only mean the keywords are unknown): a refusal of the array must be a BufferError (a subclass counts); a TypeError or any other exception from both calls fails.",
        inferred: None,
    },
    // ---- the consumer (`from_dlpack`; the harness is the producer) ----
    Rule {
        id: "dlpack.consumer.rename",
        level: Level::Must,
        side: Side::Consumer,
        area: "dlpack",
        summary: "a consumer that took the tensor renamed the capsule used_dltensor[_versioned]",
        spec_file: PYTHON_SPEC,
        section: "Implementation",
        quote: "The consumer must transer ownership of the DLManagedTensor from the capsule to its own object.",
        observation: "The harness's __dlpack__ hands over a capsule and keeps a reference to it; when the library's from_dlpack returned an array, the capsule's name must be used_dltensor (used_dltensor_versioned for a versioned one).",
        inferred: None,
    },
    Rule {
        id: "dlpack.consumer.deleter-once",
        level: Level::Should,
        side: Side::Consumer,
        area: "dlpack",
        summary: "the consumer calls the tensor's deleter exactly once, when done with it",
        spec_file: HEADER,
        section: "Part 1: v1.1",
        quote: "When the borrowing framework doesn't need the tensor, it should call the deleter to notify the host that the resource is no longer needed.",
        observation: "The harness's tensors count deleter calls. After the library's array is dropped and garbage collected, the tensor handed over must have been deleted exactly once (by the consumer, or by the capsule's destructor when it was not taken): never, or twice, fails. A deleter call while the library's array still reads the tensor shows as wrong values (the harness poisons the data when its deleter runs).",
        inferred: None,
    },
    Rule {
        id: "dlpack.consumer.major-version",
        level: Level::Must,
        side: Side::Consumer,
        area: "dlpack",
        summary: "a tensor of another major version is refused, and only its deleter is called",
        spec_file: HEADER,
        section: "Part 1: v1.1",
        quote: "If an obtained DLPack tensor has a major version that disagrees with the version number specified in this header file (i.e. major != DLPACK_MAJOR_VERSION), the consumer must call the deleter (and it is safe to do so).",
        observation: "The harness answers __dlpack__(max_version=(1, x)) with a dltensor_versioned capsule of version 2.0 whose data lies on an inaccessible page: from_dlpack must raise (reading the data crashes the case), and the deleter must have run exactly once after the garbage is collected.",
        inferred: None,
    },
    Rule {
        id: "dlpack.consumer.stream-none",
        level: Level::Should,
        side: Side::Consumer,
        area: "dlpack",
        summary: "for a CPU tensor the consumer passes stream=None (or no stream)",
        spec_file: ARRAY_API,
        section: "__dlpack__",
        quote: "On CPU and other device types without streams, only None is accepted.",
        observation: "The harness's __dlpack__ records the stream of every call on its CPU tensors: anything but None fails.",
        inferred: Some("the sentence says what a producer accepts; that a consumer passes nothing else for a CPU tensor follows"),
    },
    Rule {
        id: "dlpack.consumer.byte-offset",
        level: Level::Should,
        side: Side::Consumer,
        area: "dlpack",
        summary: "the consumer reads from data + byte_offset",
        spec_file: HEADER,
        section: "Part 1: v1.1",
        quote: "The `byte_offset` field should be used to point to the beginning of the data.",
        observation: "The harness hands over tensors whose byte_offset is not 0 (the bytes before it hold other values) and reads the library's array back through its own __dlpack__: every value must be the one sent.",
        inferred: None,
    },
    Rule {
        id: "dlpack.consumer.strides",
        level: Level::Should,
        side: Side::Consumer,
        area: "dlpack",
        summary: "the consumer honours strides (gaps, transposes, zero strides, NULL strides of old versions)",
        spec_file: HEADER,
        section: "Part 2: v1.2 and v1.3",
        quote: "strides of the tensor (in number of elements, not bytes), can not be NULL if ndim != 0, must points to an array of ndim elements that specifies the strides, so consumer can always rely on strides[dim] being valid for 0 <= dim < ndim.",
        observation: "The harness hands over tensors with every other element, transposed, broadcast (a zero stride), with every axis reversed (negative strides, byte_offset at the logical first element, the last one stored) and, in legacy capsules, NULL strides, and reads the library's array back through its own __dlpack__: every value must be the one sent. A consumer that refuses such a tensor (BufferError) is a limitation, not a failure.",
        inferred: Some("the sentence tells the producer to fill strides so that the consumer can rely on them; that the consumer reads by them is implied"),
    },
    Rule {
        id: "dlpack.consumer.values",
        level: Level::Should,
        side: Side::Consumer,
        area: "dlpack",
        summary: "the consumer's array holds the values of the tensor it was given",
        spec_file: ARRAY_API,
        section: "from_dlpack",
        quote: "an array containing the data in x.",
        observation: "The harness reads the library's array back through its own __dlpack__ (versioned if it can) and compares every element with what it sent, for contiguous tensors of every dtype the case plan draws.",
        inferred: Some("from_dlpack's return value is described without an RFC 2119 word"),
    },
    Rule {
        id: "dlpack.consumer.read-only",
        level: Level::Should,
        side: Side::Consumer,
        area: "dlpack",
        summary: "the consumer never writes into a tensor flagged READ_ONLY",
        spec_file: HEADER,
        section: "Part 1: v1.1",
        quote: "bit mask to indicate that the tensor is read only.",
        observation: "The harness hands over versioned tensors with DLPACK_FLAG_BITMASK_READ_ONLY set whose data lies on pages mapped read-only: a write crashes the case, which is this rule's failure.",
        inferred: Some("the header defines the flag without saying what a consumer must do; that it must not write is what the flag means"),
    },
    Rule {
        id: "dlpack.consumer.read-only-array",
        level: Level::Should,
        side: Side::Consumer,
        area: "dlpack",
        summary: "from_dlpack of a READ_ONLY tensor, as a view of its memory, returns a read-only array (where the library has read-only arrays)",
        spec_file: ARRAY_API,
        section: "__dlpack__",
        quote: "A consumer that does not support read-only arrays should ignore this flag (this is preferred over raising an exception; the user is then responsible for ensuring the memory isn't modified).",
        observation: "The harness hands over a versioned tensor flagged DLPACK_FLAG_BITMASK_READ_ONLY. When the library's array shares the tensor's memory (read back through its own __dlpack__, its data lies inside the tensor's) and the library shows a writeable state (the adapter's dlpack_writeable(obj), else NumPy's obj.flags.writeable), that state must be read-only. A copy, or a library without read-only arrays (no writeable state to read), is not judged: ignoring the flag is what the text asks of those.",
        inferred: Some("the sentence tells a consumer without read-only arrays to ignore the flag, leaving the user responsible; that a consumer with read-only arrays gives back a read-only one, rather than leave the user to find out, is implied"),
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{level_supported, normalise};
    use std::collections::HashSet;

    fn spec_text(file: &str) -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/spec/dlpack/").to_string() + file;
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn every_quote_is_a_sentence_of_its_file_under_its_section() {
        let mut failures = Vec::new();
        for r in DLPACK_RULES {
            let text = spec_text(r.spec_file);
            let Some(at) = text.find(r.section) else {
                failures.push(format!(
                    "{}: no section {:?} in {}",
                    r.id, r.section, r.spec_file
                ));
                continue;
            };
            // The quote must come after its section's heading.
            if !normalise(&text[at..]).contains(&normalise(r.quote)) {
                failures.push(format!(
                    "{}: quote not in {} after {:?}",
                    r.id, r.spec_file, r.section
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn levels_follow_the_quotes_and_ids_are_unique() {
        let mut seen = HashSet::new();
        for r in DLPACK_RULES {
            assert!(seen.insert(r.id), "{} twice", r.id);
            assert!(
                r.id.starts_with("dlpack.") && r.area == "dlpack",
                "{}",
                r.id
            );
            level_supported(r).unwrap();
            assert!(crate::rules::RULES.iter().all(|a| a.id != r.id), "{}", r.id);
            assert_eq!(crate::rules::find(r.id).map(|f| f.id), Some(r.id));
        }
        // A rule made stronger than its quote is refused.
        let mut strong = DLPACK_RULES[3];
        strong.level = Level::Must;
        assert!(
            level_supported(&strong).is_err(),
            "inferred rules are at most SHOULD"
        );
    }

    #[test]
    fn a_quote_that_is_not_in_the_file_is_caught() {
        let text = normalise(&spec_text(PYTHON_SPEC));
        assert!(!text.contains(&normalise(
            "The consumer may keep the capsule named dltensor."
        )));
    }
}
