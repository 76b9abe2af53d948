//! From fuzz bytes to a scenario.
//!
//! Every target reads its choices from the front of the input
//! ([`arbitrary::Unstructured`]) and then hands the rest to [`scenario`],
//! which reads one source byte and then:
//!
//! - [`Source::Builtin`]: one byte picks a built-in scenario;
//! - [`Source::Generated`]: a run seed and a scenario index for the
//!   scenario generator (`generate::tree`, what certification draws from);
//! - [`Source::Ipc`]: the rest is an Arrow IPC stream (the gold files are
//!   seeds of this kind); data that does not decode or does not pass arrow-rs's
//!   full validation is not a scenario.
//!
//! [`encode`] writes the header of a seed file, so corpora can be built
//! from the gold files and from generated scenarios.

#![forbid(unsafe_code)]

use std::sync::OnceLock;

use arbitrary::Unstructured;
use proptest::strategy::ValueTree;

use crate::scenario::Scenario;

/// Where a fuzz input's scenario comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Builtin = 0,
    Generated = 1,
    Ipc = 2,
}

fn builtins() -> &'static [Scenario] {
    static ALL: OnceLock<Vec<Scenario>> = OnceLock::new();
    ALL.get_or_init(crate::scenario::builtin)
}

/// A stable short name for an input (FNV-1a of its bytes): scenario names
/// and varied-encoding seeds derive from it.
pub fn tag(data: &[u8]) -> String {
    format!("{:016x}", crate::certify::consumer::fnv1a(data))
}

thread_local! {
    /// Recently built scenarios by the bytes that describe them: libFuzzer
    /// mutates the header bytes far more often than the scenario's, and
    /// decoding or drawing a scenario costs more than checking it.
    static CACHE: std::cell::RefCell<std::collections::HashMap<Vec<u8>, Result<Scenario, String>>> =
        Default::default();
}

/// How many scenarios [`CACHE`] keeps.
const CACHED: usize = 512;

/// The scenario the rest of the input describes. Without `ipc`, a
/// generated scenario's IPC stream is left empty ([`crate::generate::data`]):
/// only a producer plugin reads it.
pub fn scenario(u: Unstructured, tag: &str, ipc: bool) -> Result<Scenario, String> {
    let mut key = vec![ipc as u8];
    key.extend_from_slice(u.peek_bytes(u.len()).unwrap_or_default());
    if let Some(hit) = CACHE.with(|c| c.borrow().get(&key).cloned()) {
        return hit;
    }
    let built = build(u, tag, ipc).and_then(bounded);
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= CACHED {
            c.clear();
        }
        c.insert(key, built.clone());
    });
    built
}

/// The most elements any array of a fuzz scenario holds: an IPC stream
/// can declare a huge length for an array that needs no memory (a struct
/// with no children), which the harness's exporter would lay out element
/// by element; such inputs check nothing more than small ones do.
pub const MAX_ELEMENTS: usize = 1 << 20;

fn bounded(s: Scenario) -> Result<Scenario, String> {
    fn longest(d: &arrow_data::ArrayData) -> usize {
        d.child_data()
            .iter()
            .map(longest)
            .fold(d.len() + d.offset(), usize::max)
    }
    let n = s
        .batches
        .iter()
        .flat_map(|b| {
            let rows = std::iter::once(b.num_rows());
            rows.chain(b.columns().iter().map(|c| longest(&c.to_data())))
        })
        .max()
        .unwrap_or(0);
    if n > MAX_ELEMENTS {
        return Err(format!(
            "an array of {n} elements, beyond the fuzz bound {MAX_ELEMENTS}"
        ));
    }
    Ok(s)
}

fn build(u: Unstructured, tag: &str, ipc: bool) -> Result<Scenario, String> {
    let mut u = u;
    let source = u.int_in_range(0u8..=2).unwrap_or(0);
    match source {
        0 => {
            let all = builtins();
            let i = u.choose_index(all.len()).unwrap_or(0);
            Ok(all[i].clone())
        }
        1 => generated(u.take_rest(), tag, ipc),
        _ => self::ipc(u.take_rest(), tag),
    }
}

/// A generated scenario: the first 8 bytes are the run seed, the next 2
/// the scenario's index (zeros when missing), drawn exactly as
/// `arrowcert certify --seed S` draws `gen/<index>`.
///
/// (The bytes do not drive the generator's choices one by one: proptest's
/// pass-through RNG splits its bytes in half at every forked RNG, and the
/// generator forks per value, so the draw ran out of bytes and rand's
/// rejection sampling spun forever on the zeros that follow.)
pub fn generated(bytes: &[u8], tag: &str, ipc: bool) -> Result<Scenario, String> {
    let mut seed = [0u8; 8];
    let mut index = [0u8; 2];
    for (d, s) in seed.iter_mut().chain(index.iter_mut()).zip(bytes) {
        *d = *s;
    }
    let (seed, index) = (u64::from_le_bytes(seed), u16::from_le_bytes(index) as u64);
    let spec = crate::generate::tree(seed, index)?.current();
    let name = format!("fuzz/gen-{tag}");
    if ipc {
        crate::generate::build(&name, &spec)
    } else {
        crate::generate::data(&name, &spec)
    }
}

/// A scenario from IPC stream bytes that decode to valid data.
pub fn ipc(bytes: &[u8], tag: &str) -> Result<Scenario, String> {
    let s = Scenario::from_ipc(&format!("fuzz/ipc-{tag}"), bytes.to_vec())?;
    // Names are NUL-terminated C strings in the C data interface: a name
    // with a NUL byte cannot be exported at all, so it is no scenario.
    fn nul(f: &arrow_schema::Field) -> bool {
        f.name().contains('\0') || nul_within(f.data_type())
    }
    // Every field under a type, a dictionary's values included (a field
    // of a struct of dictionary values is named too).
    fn nul_within(dt: &arrow_schema::DataType) -> bool {
        match dt {
            arrow_schema::DataType::Dictionary(_, values) => nul_within(values),
            _ => crate::compare::nested_fields(dt).iter().any(|c| nul(c)),
        }
    }
    if s.schema.fields().iter().any(|f| nul(f)) {
        return Err("a field name holds a NUL byte, which a C string cannot".into());
    }
    // arrow-rs's IPC reader takes types the format strings cannot express
    // validly (a decimal of precision 0, say): a producer exporting one
    // faithfully would be judged for the input's fault, so such an input
    // is no scenario. The harness's own format check decides, as it does
    // for an export.
    for f in s.schema.fields() {
        exportable_type(f.data_type())?;
    }
    // arrow-rs's IPC reader also takes structures the C data interface's
    // rules forbid (a map whose entries struct has no children, found by
    // the producer target): the harness's own export of the input schema
    // must pass the harness's own schema checks, or a producer would be
    // judged for the input's fault.
    schema_sound(&s.schema)?;
    for b in &s.batches {
        for c in b.columns() {
            crate::quiet::quietly(|| c.to_data().validate_full())
                .map_err(|p| format!("arrow-rs validation panicked: {p}"))?
                .map_err(|e| format!("the IPC data is not valid: {e}"))?;
        }
        // arrow-rs's full validation takes data the spec forbids too (a
        // dense union whose offsets into one child go down, found by the
        // producer target): the harness's own export of each batch must
        // pass the harness's own array checks, as for the schema.
        batch_sound(&s.schema, b)?;
    }
    Ok(s)
}

/// The harness's array checks on its own plain export of `batch`: `Err`
/// with the first MUST finding when the input data itself breaks a rule.
fn batch_sound(
    schema: &arrow_schema::Schema,
    batch: &arrow_array::RecordBatch,
) -> Result<(), String> {
    use crate::abi::ops::Owned;
    let snode = crate::export::encode::schema(schema, crate::export::Encoding::Plain)?;
    let node = crate::export::encode::batch(batch, crate::export::Encoding::Plain, 0)?;
    let ledger = crate::export::Ledger::new(false);
    let mut s = ledger.schema(&snode, "schema");
    let mut a = ledger.array(&node, "array");
    let found = crate::inspect::probe::check_array(s.get(), a.get());
    // Released through the ledger's own callbacks, so that they free the
    // memory.
    a.get().release();
    s.get().release();
    drop(ledger.finish());
    no_must(&found, "data")
}

/// `Err` naming the first MUST finding of the harness's checks on its own
/// export of the input's `part` (schema or data): the input's fault.
fn no_must(found: &[crate::inspect::Violation], part: &str) -> Result<(), String> {
    match found.iter().find(|v| crate::rules::is_must(v.rule)) {
        Some(v) => Err(format!(
            "the IPC {part} breaks {} at {}: {}",
            v.rule, v.at, v.message
        )),
        None => Ok(()),
    }
}

/// The harness's schema checks on its own plain export of `schema`:
/// `Err` with the first MUST finding when the input itself breaks a rule.
fn schema_sound(schema: &arrow_schema::Schema) -> Result<(), String> {
    use crate::abi::ops::Owned;
    let node = crate::export::encode::schema(schema, crate::export::Encoding::Plain)?;
    let ledger = crate::export::Ledger::new(false);
    let mut s = ledger.schema(&node, "schema");
    let found = crate::inspect::probe::check_schema(s.get());
    // Released through the ledger's own callback, so that it frees the
    // memory.
    s.get().release();
    drop(ledger.finish());
    no_must(&found, "schema")
}

/// Every type in `dt` (children and dictionary values included) as the
/// exporter writes its format string, and that string valid to the
/// harness's format parser.
fn exportable_type(dt: &arrow_schema::DataType) -> Result<(), String> {
    let fmt = crate::export::format::format(dt)?;
    crate::inspect::format::parse(&fmt)
        .map_err(|e| format!("the type {dt} is no valid Arrow type here: {e}"))?;
    if let arrow_schema::DataType::Dictionary(_, values) = dt {
        exportable_type(values)?;
    }
    crate::compare::nested_fields(dt)
        .iter()
        .try_for_each(|c| exportable_type(c.data_type()))
}

/// The scenario part of a seed: `source` then its bytes (a built-in
/// scenario's index, the generator's bytes, or an IPC stream).
pub fn encode(source: Source, payload: &[u8]) -> Vec<u8> {
    // int_in_range(0..=2) reads one byte and takes it modulo 3.
    let mut out = vec![source as u8];
    out.extend_from_slice(payload);
    out
}

/// The scenario part of a seed drawing `gen/<index>` of run `seed`.
pub fn generated_seed(seed: u64, index: u16) -> Vec<u8> {
    let mut out = seed.to_le_bytes().to_vec();
    out.extend_from_slice(&index.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_gives_a_scenario() {
        let s = scenario(Unstructured::new(&encode(Source::Builtin, &[3])), "t", true).unwrap();
        assert_eq!(s.name, builtins()[3].name);
        let s = scenario(
            Unstructured::new(&encode(Source::Generated, &generated_seed(7, 3))),
            "t",
            true,
        )
        .unwrap();
        assert_eq!(s.name, "fuzz/gen-t");
        assert!(!s.ipc.is_empty());
        let d = scenario(
            Unstructured::new(&encode(Source::Generated, &generated_seed(7, 3))),
            "t",
            false,
        )
        .unwrap();
        assert!(d.ipc.is_empty());
        assert_eq!(d.batches, s.batches);
        let ipc = builtins()[0].ipc.clone();
        let s = scenario(Unstructured::new(&encode(Source::Ipc, &ipc)), "t", true).unwrap();
        assert_eq!(s.batches, builtins()[0].batches);
        assert!(scenario(Unstructured::new(&encode(Source::Ipc, b"junk")), "t", true).is_err());
    }
}
