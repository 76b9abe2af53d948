//! Validation throughput: arrowcert's full validation (`validate_array`,
//! through `probe::check_array`, UTF-8 of utf8 values included) beside
//! nanoarrow's (`ArrowArrayViewInitFromSchema` + `ArrowArrayViewSetArray` +
//! `ArrowArrayViewValidate(FULL)`) and arrow-rs's `ArrayData::validate_full`
//! (on the ArrayData that was exported: the same buffers), on the same
//! exported `ArrowArray`s of 100 million values: int64 with nulls, utf8
//! with nulls, list<int32> with nulls. Beside them, the host's memory bandwidth measured in the same run,
//! and the bytes each validator must read, so that a figure faster than
//! reading those bytes at memory speed stands out.
//!
//! Run with `cargo bench -p arrowcert-bench-nanoarrow --features nanoarrow`
//! (or `just bench`); `ARROWCERT_BENCH_VALUES=N` changes the array length.
//! Figures are printed, never asserted; the validators' verdicts are.

use std::sync::Arc;
use std::time::Instant;

use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::{Array, Int32Array, Int64Array, ListArray, StringArray};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_data::ArrayData;
use arrow_schema::{DataType, Field};
use arrowcert::abi::arrow_rs::{array_from_arrow_rs, schema_from_arrow_rs};
use arrowcert::abi::ops::Guard;
use arrowcert::abi::{ArrowArray, ArrowSchema};
use arrowcert::inspect::probe;
use arrowcert_bench_nanoarrow::nanoarrow::{self, Level};

const MB: f64 = 1e6;
const GB: f64 = 1e9;
/// Timed repetitions per validator and array.
const REPS: usize = 7;

/// A buffer larger than the last-level cache (32 MiB on the machine the
/// figures in docs/BENCHMARKS.md come from), read before a "cold" run.
struct Evict(Vec<u64>);

impl Evict {
    fn new() -> Self {
        Evict((0..(256usize << 20) / 8).map(|i| i as u64).collect())
    }
    fn run(&self) {
        std::hint::black_box(sum(&self.0));
    }
}

fn sum(v: &[u64]) -> u64 {
    v.iter().fold(0u64, |a, &x| a.wrapping_add(x))
}

/// Seconds per call of `f`: (median cold, best warm). Cold runs follow a
/// read of a buffer 8x the L3 size; warm runs follow each other.
fn timed(evict: &Evict, mut f: impl FnMut()) -> (f64, f64) {
    let mut cold = Vec::with_capacity(REPS);
    for _ in 0..REPS {
        evict.run();
        let t = Instant::now();
        f();
        cold.push(t.elapsed().as_secs_f64());
    }
    let mut warm = f64::MAX;
    f();
    for _ in 0..REPS {
        let t = Instant::now();
        f();
        warm = warm.min(t.elapsed().as_secs_f64());
    }
    cold.sort_by(f64::total_cmp);
    (cold[REPS / 2], warm)
}

/// The same sum with eight independent lanes (no loop-carried dependency).
fn sum8(v: &[u64]) -> u64 {
    let mut acc = [0u64; 8];
    let mut chunks = v.chunks_exact(8);
    for c in &mut chunks {
        for (a, x) in acc.iter_mut().zip(c) {
            *a = a.wrapping_add(*x);
        }
    }
    acc.iter()
        .fold(sum(chunks.remainder()), |a, &x| a.wrapping_add(x))
}

/// Memory bandwidth in this run, single-threaded like both validators:
/// (read GB/s, memcpy GB/s copied), each the best of 5 passes (of two read
/// kernels) over buffers far larger than the caches.
fn bandwidth() -> (f64, f64) {
    let src: Vec<u64> = (0..(1usize << 30) / 8).map(|i| i as u64).collect();
    let bytes = (src.len() * 8) as f64;
    let mut read = 0f64;
    for _ in 0..5 {
        for kernel in [sum, sum8] {
            let t = Instant::now();
            std::hint::black_box(kernel(std::hint::black_box(&src)));
            read = read.max(bytes / t.elapsed().as_secs_f64());
        }
    }
    let half = &src[..src.len() / 2];
    let mut dst = vec![1u64; half.len()];
    let mut copy = 0f64;
    for _ in 0..5 {
        let t = Instant::now();
        dst.copy_from_slice(std::hint::black_box(half));
        std::hint::black_box(&dst);
        copy = copy.max((half.len() * 8) as f64 / t.elapsed().as_secs_f64());
    }
    (read / GB, copy / GB)
}

fn nulls(n: usize, every: usize) -> NullBuffer {
    NullBuffer::new(BooleanBuffer::collect_bool(n, |i| i % every != 0))
}

/// Offsets for slot lengths `len(i)`.
fn offsets(n: usize, len: impl Fn(usize) -> i32) -> Vec<i32> {
    let mut o = Vec::with_capacity(n + 1);
    let mut at = 0i32;
    o.push(0);
    for i in 0..n {
        at += len(i);
        o.push(at);
    }
    o
}

/// One array under test, exported through the C data interface once; both
/// validators read these very structures.
struct Case {
    name: &'static str,
    values: usize,
    schema: Guard<ArrowSchema>,
    array: Guard<ArrowArray>,
    /// The arrow-rs data exported (its buffers are the export's).
    data: ArrayData,
    /// Buffers: (what, bytes), the whole tree.
    buffers: Vec<(&'static str, usize)>,
    /// Bytes arrowcert's validator must read: validity bitmaps (null
    /// counts), offsets (monotonic, in range) and utf8 data (UTF-8).
    harness_reads: usize,
    /// Bytes nanoarrow's FULL level must read: offsets only.
    nanoarrow_reads: usize,
    /// Bytes nanoarrow's FULL level plus null counting must read: validity
    /// bitmaps and offsets.
    counted_reads: usize,
}

/// A validator to time: its label, the bytes it must read, one run.
type Row<'a> = (&'static str, usize, Box<dyn FnMut() + 'a>);

fn export(data: &ArrayData) -> (Guard<ArrowSchema>, Guard<ArrowArray>) {
    let field = Field::new("values", data.data_type().clone(), true);
    let schema = FFI_ArrowSchema::try_from(&field).expect("exportable type");
    (
        Guard::new(schema_from_arrow_rs(schema)),
        Guard::new(array_from_arrow_rs(FFI_ArrowArray::new(data))),
    )
}

fn int64(n: usize) -> Case {
    let a = Int64Array::new(
        ScalarBuffer::from((0..n as i64).collect::<Vec<_>>()),
        Some(nulls(n, 7)),
    );
    let data = a.to_data();
    let (schema, array) = export(&data);
    let validity = n.div_ceil(8);
    Case {
        name: "int64 (1 in 7 null)",
        values: n,
        schema,
        array,
        data,
        buffers: vec![("validity", validity), ("values", n * 8)],
        harness_reads: validity,
        nanoarrow_reads: 0,
        counted_reads: validity,
    }
}

/// A utf8 array of `n` slots (1 in 11 null) of `len(i)` bytes cut from
/// `byte(k)`, the k-th data byte.
fn utf8_case(
    name: &'static str,
    n: usize,
    len: impl Fn(usize) -> i32,
    byte: impl Fn(usize) -> u8,
    offsets_read: usize,
) -> Case {
    let o = offsets(n, len);
    let total = *o.last().unwrap_or(&0) as usize;
    let data: Vec<u8> = (0..total).map(byte).collect();
    let a = StringArray::try_new(
        OffsetBuffer::new(ScalarBuffer::from(o)),
        Buffer::from_vec(data),
        Some(nulls(n, 11)),
    )
    .expect("valid utf8 array");
    let data = a.to_data();
    let (schema, array) = export(&data);
    let (validity, offs) = (n.div_ceil(8), (n + 1) * 4);
    Case {
        name,
        values: n,
        schema,
        array,
        data,
        buffers: vec![("validity", validity), ("offsets", offs), ("data", total)],
        harness_reads: validity + offsets_read * offs + total,
        nanoarrow_reads: offs,
        counted_reads: validity + offs,
    }
}

fn utf8(n: usize) -> Case {
    // ASCII throughout: one pass over the data decides UTF-8.
    utf8_case(
        "utf8 (1 in 11 null, 0-7 bytes)",
        n,
        |i| (i % 8) as i32,
        |k| b'a' + (k % 26) as u8,
        1,
    )
}

/// utf8 whose values are not ASCII ("é" repeated 0-3 times: 0-6 bytes),
/// the path that validates UTF-8 and checks that every offset starts a
/// character: the offsets are read twice (in order, then as character
/// starts).
fn utf8_non_ascii(n: usize) -> Case {
    utf8_case(
        "utf8 non-ASCII (1 in 11 null, 0-6 bytes)",
        n,
        |i| (i % 4) as i32 * 2,
        |k| if k % 2 == 0 { 0xc3 } else { 0xa9 },
        2,
    )
}

fn list_int32(n: usize) -> Case {
    let o = offsets(n, |i| (i % 4) as i32);
    let total = *o.last().unwrap_or(&0) as usize;
    let child = Int32Array::from((0..total as i32).collect::<Vec<_>>());
    let a = ListArray::try_new(
        Arc::new(Field::new_list_field(DataType::Int32, false)),
        OffsetBuffer::new(ScalarBuffer::from(o)),
        Arc::new(child),
        Some(nulls(n, 13)),
    )
    .expect("valid list array");
    let data = a.to_data();
    let (schema, array) = export(&data);
    let (validity, offs) = (n.div_ceil(8), (n + 1) * 4);
    Case {
        name: "list<int32> (1 in 13 null, 0-3 items)",
        values: n,
        schema,
        array,
        data,
        buffers: vec![
            ("validity", validity),
            ("offsets", offs),
            ("child values", total * 4),
        ],
        harness_reads: validity + offs,
        nanoarrow_reads: offs,
        counted_reads: validity + offs,
    }
}

/// Both validators accept; corruptions each must (or, by level, need not)
/// see are seen, which shows how far each reads.
fn verdicts(c: &mut Case) {
    let found = probe::check_array(&c.schema, &c.array);
    assert!(found.is_empty(), "{}: arrowcert: {found:?}", c.name);
    for level in [Level::Minimal, Level::Default, Level::Full] {
        // SAFETY: a live array and schema arrow-rs just exported.
        let r = unsafe { nanoarrow::validate(&c.schema, &c.array, level) };
        assert_eq!(r, Ok(()), "{}: nanoarrow {level:?}", c.name);
    }
    // SAFETY: as above.
    let r = unsafe { nanoarrow::validate_full_and_null_counts(&c.schema, &c.array) };
    assert_eq!(r, Some(0), "{}: nanoarrow null counts", c.name);

    // A wrong null count: found only by reading the whole validity bitmap.
    c.array.null_count += 1;
    let found = probe::check_array(&c.schema, &c.array);
    assert!(
        found.iter().any(|v| v.rule == "array.null-count"),
        "{}: arrowcert missed a wrong null count",
        c.name
    );
    // SAFETY: as above; only the null count changed, within the length.
    let full = unsafe { nanoarrow::validate(&c.schema, &c.array, Level::Full) };
    // SAFETY: as above.
    let counted = unsafe { nanoarrow::validate_full_and_null_counts(&c.schema, &c.array) };
    c.array.null_count -= 1;
    assert_eq!(counted, Some(1), "{}: bit counting missed it", c.name);
    println!(
        "  null_count off by one: arrowcert reports array.null-count; nanoarrow FULL {}",
        if full.is_ok() {
            "accepts it (FULL does not read validity bitmaps)"
        } else {
            "rejects it"
        }
    );
}

/// A utf8 array whose last-but-one offset is larger than the last: only a
/// validator that scans every offset sees it.
fn late_offset_break(n: usize) {
    let mut o = offsets(n, |i| (i % 8) as i32);
    let total = *o.last().unwrap_or(&0) as usize;
    o[n - 1] = o[n] + 1;
    let data = ArrayData::builder(DataType::Utf8)
        .len(n)
        .add_buffer(Buffer::from_vec(o))
        .add_buffer(Buffer::from_vec(vec![b'a'; total]));
    // SAFETY: deliberately invalid offsets, handed only to the two
    // validators, which read offsets before using them and never read the
    // data buffer; nothing reads values from this array.
    let data = unsafe { data.build_unchecked() };
    let (schema, array) = export(&data);
    let harness = probe::check_array(&schema, &array);
    // SAFETY: the structures are live; nanoarrow's DEFAULT and FULL levels
    // only compare offsets with each other and with the data buffer size,
    // which SetArray takes from the last offset (within the buffer).
    let (default, full) = unsafe {
        (
            nanoarrow::validate(&schema, &array, Level::Default),
            nanoarrow::validate(&schema, &array, Level::Full),
        )
    };
    assert!(
        harness.iter().any(|v| v.rule == "array.offsets.valid"),
        "arrowcert missed offsets[{}] > offsets[{n}]",
        n - 1
    );
    assert!(full.is_err(), "nanoarrow FULL missed the decreasing offset");
    println!(
        "utf8 with offsets[{}] > offsets[{n}] (the very end): arrowcert rejects it; \
         nanoarrow FULL rejects it; nanoarrow DEFAULT {}",
        n - 1,
        if default.is_ok() {
            "accepts it (it reads only the first and last offsets)"
        } else {
            "rejects it"
        }
    );
}

fn main() {
    let n: usize = std::env::var("ARROWCERT_BENCH_VALUES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000_000);
    println!(
        "validation throughput: arrowcert validate_array vs nanoarrow {} ArrowArrayViewValidate",
        nanoarrow::version()
    );
    let (read_bw, copy_bw) = bandwidth();
    println!(
        "memory bandwidth (this run): read {read_bw:.1} GB/s (sum over 1 GiB), \
         memcpy {copy_bw:.1} GB/s copied (512 MiB)"
    );
    let evict = Evict::new();
    late_offset_break(n);

    for make in [int64, utf8, utf8_non_ascii, list_int32] {
        let t = Instant::now();
        let mut c = make(n);
        let total: usize = c.buffers.iter().map(|(_, b)| b).sum();
        println!(
            "\n{}: {} values, built and exported in {:.1}s; buffers {} = {:.1} MB",
            c.name,
            c.values,
            t.elapsed().as_secs_f64(),
            c.buffers
                .iter()
                .map(|(w, b)| format!("{w} {:.1} MB", *b as f64 / MB))
                .collect::<Vec<_>>()
                .join(" + "),
            total as f64 / MB
        );
        verdicts(&mut c);
        println!(
            "  {:<34} {:>9} {:>9} {:>9} {:>10} {:>9} {:>9} {:>8}",
            "validator",
            "reads MB",
            "cold ms",
            "warm ms",
            "Mvalues/s",
            "GB/s buf",
            "GB/s rd",
            "rd/bw"
        );
        let (schema, array, data) = (&*c.schema, &*c.array, &c.data);
        let rows: [Row; 6] = [
            (
                "arrowcert validate_array (full)",
                c.harness_reads,
                Box::new(|| {
                    let found = probe::check_array(schema, array);
                    assert!(found.is_empty());
                }),
            ),
            (
                "nanoarrow FULL",
                c.nanoarrow_reads,
                Box::new(|| {
                    // SAFETY: live structures arrow-rs exported (above).
                    let r = unsafe { nanoarrow::validate(schema, array, Level::Full) };
                    assert!(r.is_ok());
                }),
            ),
            (
                "nanoarrow FULL + null counts",
                c.counted_reads,
                Box::new(|| {
                    // SAFETY: as above.
                    let r = unsafe { nanoarrow::validate_full_and_null_counts(schema, array) };
                    assert_eq!(r, Some(0));
                }),
            ),
            (
                "arrow-rs validate_full",
                c.harness_reads,
                Box::new(|| {
                    assert!(data.validate_full().is_ok());
                }),
            ),
            (
                "nanoarrow DEFAULT",
                if c.nanoarrow_reads > 0 { 8 } else { 0 },
                Box::new(|| {
                    // SAFETY: as above.
                    let r = unsafe { nanoarrow::validate(schema, array, Level::Default) };
                    assert!(r.is_ok());
                }),
            ),
            (
                "nanoarrow MINIMAL",
                0,
                Box::new(|| {
                    // SAFETY: as above.
                    let r = unsafe { nanoarrow::validate(schema, array, Level::Minimal) };
                    assert!(r.is_ok());
                }),
            ),
        ];
        let mut harness_cold = 0.0;
        for (i, (label, reads, mut f)) in rows.into_iter().enumerate() {
            let (cold, warm) = timed(&evict, &mut f);
            if i == 0 {
                harness_cold = cold;
            }
            let rd = reads as f64 / cold / GB;
            println!(
                "  {:<34} {:>9.1} {:>9.3} {:>9.3} {:>10.0} {:>9.1} {:>9.1} {:>8.2}{}",
                label,
                reads as f64 / MB,
                cold * 1e3,
                warm * 1e3,
                c.values as f64 / cold / 1e6,
                total as f64 / cold / GB,
                rd,
                rd / read_bw,
                if i > 0 && i < 4 {
                    format!("   arrowcert {:.2}x as fast", cold / harness_cold)
                } else {
                    String::new()
                }
            );
        }
    }
    let (read_end, _) = bandwidth();
    println!(
        "\nmemory read bandwidth at the end of the run: {read_end:.1} GB/s \
         (start: {read_bw:.1}); cold = median of {REPS} runs each after reading 256 MiB, \
         warm = best of {REPS} back-to-back runs; GB/s buf = all buffer bytes / cold time, \
         GB/s rd = bytes the validator must read / cold time, rd/bw = that over the read bandwidth"
    );
}
