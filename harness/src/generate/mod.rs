//! Generated scenarios (proptest): schemas over every type of
//! `Columnar.rst`, with empty, all-null and multi-batch data, zero-length
//! batches, deep nesting and slices at any offset.
//!
//! A run has one seed. Scenario `gen/<i>` is drawn from a proptest value
//! tree seeded by (seed, i), so any one of them is rebuilt without drawing
//! the others. Shrinking walks that tree; the walk is recorded in the name
//! (`gen/<i>@s3c1s2`: simplify three times, complicate once, simplify
//! twice) so a shrunk scenario is rebuilt from the seed and its name alone,
//! by a worker process or by `arrowcert replay`.

#![forbid(unsafe_code)]

pub mod shrink;
pub mod types;
pub mod values;

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{ArrowError, DataType, Field, Schema};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use crate::scenario::Scenario;
use crate::sdk::ipc;
pub use values::Nulls;

/// The name prefix of generated scenarios.
pub const PREFIX: &str = "gen/";

/// How deep types nest (list<struct<map<...>>>).
pub const MAX_DEPTH: u32 = 3;

/// One batch of a generated scenario.
#[derive(Debug, Clone)]
pub struct BatchSpec {
    pub len: usize,
    pub nulls: Nulls,
    /// Seeds the values (see `values::Rng`).
    pub seed: u64,
    /// Picks the zero-copy slice this batch is also exported as.
    pub slice: (u8, u8),
}

/// A generated scenario before it is built: what proptest draws and
/// shrinks.
#[derive(Debug, Clone)]
pub struct Spec {
    pub fields: Vec<(DataType, bool, u8, u8)>,
    pub schema_metadata: bool,
    pub batches: Vec<BatchSpec>,
}

fn batch() -> impl Strategy<Value = BatchSpec> {
    (
        prop_oneof![3 => 0usize..8, 3 => 0usize..70, 1 => 0usize..300],
        prop_oneof![3 => Just(Nulls::None), 4 => Just(Nulls::Some), 1 => Just(Nulls::All)],
        // The value seed does not shrink: a smaller seed is not simpler
        // data, and its 64 halving steps would eat the shrink budget.
        any::<u64>().no_shrink(),
        any::<(u8, u8)>(),
    )
        .prop_map(|(len, nulls, seed, slice)| BatchSpec {
            len,
            nulls,
            seed,
            slice,
        })
}

/// The strategy every generated scenario comes from: one to four columns,
/// zero to four batches (zero: a stream that ends at once). Batches come
/// first in the tuple because proptest shrinks a tuple in order: dropping
/// batches and rows is cheap and often decisive, and leaves the (slower)
/// walk down the type trees fewer rows to carry.
pub fn strategy() -> impl Strategy<Value = Spec> {
    (
        prop::collection::vec(batch(), 0..=4),
        prop::collection::vec(types::field(MAX_DEPTH), 1..=4),
        any::<bool>(),
    )
        .prop_map(|(batches, fields, schema_metadata)| Spec {
            fields,
            schema_metadata,
            batches,
        })
}

/// The 32-byte proptest seed of scenario `index` of a run seeded `seed`.
fn rng_seed(seed: u64, index: u64) -> [u8; 32] {
    let mut r = values::Rng::new(seed ^ index.wrapping_mul(0xA076_1D64_78BD_642F));
    let mut out = [0u8; 32];
    for chunk in out.chunks_mut(8) {
        chunk.copy_from_slice(&r.next_u64().to_le_bytes());
    }
    out
}

/// The value tree of scenario `index`: `current()` is the scenario as
/// drawn; `simplify`/`complicate` shrink it.
pub fn tree(seed: u64, index: u64) -> Result<Box<dyn ValueTree<Value = Spec>>, String> {
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &rng_seed(seed, index));
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    strategy()
        .new_tree(&mut runner)
        .map(|t| Box::new(t) as Box<dyn ValueTree<Value = Spec>>)
        .map_err(|e| format!("cannot draw scenario {index}: {e}"))
}

/// Builds the data a spec describes, through IPC (the scenario's batches
/// are what a producer decodes from the bytes it is given).
pub fn build(name: &str, spec: &Spec) -> Result<Scenario, String> {
    let data = data(name, spec)?;
    let bytes =
        ipc::encode(&data.schema, &data.batches).map_err(|e| format!("{name}: {}", e.message))?;
    let mut scenario = Scenario::from_ipc(name, bytes)?;
    scenario.slices = data.slices;
    Ok(scenario)
}

/// Builds the data a spec describes without encoding it: the scenario's
/// `ipc` is empty, so it serves only where no producer plugin is given
/// the bytes (the harness's own exports: the validate, consumer and
/// consumer-side async fuzz targets, where the IPC round trip cost more
/// than the check).
pub fn data(name: &str, spec: &Spec) -> Result<Scenario, String> {
    let err = |e: ArrowError| format!("{name}: generated data: {e}");
    let fields: Vec<Field> = spec
        .fields
        .iter()
        .enumerate()
        .map(|(i, f)| types::to_field(i, f))
        .collect();
    let mut schema = Schema::new(fields);
    if spec.schema_metadata {
        schema = schema.with_metadata(std::collections::HashMap::from([
            ("arrowcert.generated".to_string(), name.to_string()),
            ("".to_string(), "".to_string()),
        ]));
    }
    let schema = Arc::new(schema);
    let mut batches = Vec::with_capacity(spec.batches.len());
    let mut slices = Vec::with_capacity(spec.batches.len());
    for b in &spec.batches {
        let mut rng = values::Rng::new(b.seed);
        let columns = schema
            .fields()
            .iter()
            .map(|f| values::array(f.data_type(), f.is_nullable(), b.len, b.nulls, &mut rng))
            .collect::<Result<Vec<_>, _>>()
            .map_err(err)?;
        batches.push(RecordBatch::try_new(schema.clone(), columns).map_err(err)?);
        let offset = b.slice.0 as usize % (b.len + 1);
        slices.push((offset, b.slice.1 as usize % (b.len - offset + 1)));
    }
    Ok(Scenario {
        name: name.to_string(),
        ipc: Vec::new(),
        schema,
        batches,
        slices: Some(slices),
    })
}

/// A shrink walk: `true` is a `simplify` call, `false` a `complicate`.
pub fn encode_walk(walk: &[bool]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < walk.len() {
        let run = walk[i..].iter().take_while(|&&c| c == walk[i]).count();
        out.push(if walk[i] { 's' } else { 'c' });
        out.push_str(&run.to_string());
        i += run;
    }
    out
}

fn decode_walk(s: &str) -> Option<Vec<bool>> {
    let mut out = Vec::new();
    let mut chars = s.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        let step = match c {
            's' => true,
            'c' => false,
            _ => return None,
        };
        let mut n = String::new();
        while let Some(&(_, d)) = chars.peek() {
            if !d.is_ascii_digit() {
                break;
            }
            n.push(d);
            chars.next();
        }
        let n: usize = n.parse().ok()?;
        if n == 0 || out.len() + n > 1_000_000 {
            return None;
        }
        out.extend(std::iter::repeat_n(step, n));
    }
    Some(out)
}

/// The name of scenario `index` after `walk`.
pub fn name(index: u64, walk: &[bool]) -> String {
    if walk.is_empty() {
        format!("{PREFIX}{index}")
    } else {
        format!("{PREFIX}{index}@{}", encode_walk(walk))
    }
}

/// Parses `gen/<i>[@walk]`.
pub fn parse_name(name: &str) -> Option<(u64, Vec<bool>)> {
    let rest = name.strip_prefix(PREFIX)?;
    let (index, walk) = match rest.split_once('@') {
        Some((i, w)) => (i, decode_walk(w)?),
        None => (rest, Vec::new()),
    };
    Some((index.parse().ok()?, walk))
}

/// Rebuilds a generated scenario from the run's seed and its name.
pub fn scenario(seed: u64, name: &str) -> Result<Scenario, String> {
    let (index, walk) =
        parse_name(name).ok_or_else(|| format!("{name}: not a generated scenario name"))?;
    let mut t = tree(seed, index)?;
    for (n, &step) in walk.iter().enumerate() {
        let moved = if step { t.simplify() } else { t.complicate() };
        if !moved {
            return Err(format!(
                "{name}: shrink step {} does not apply (was the seed {seed}?)",
                n + 1
            ));
        }
    }
    build(name, &t.current())
}

/// Scenarios `gen/0` to `gen/<count-1>` of a run seeded `seed`.
pub fn scenarios(seed: u64, count: u64) -> Result<Vec<Scenario>, String> {
    (0..count)
        .map(|i| build(&name(i, &[]), &tree(seed, i)?.current()))
        .collect()
}

/// One line saying what a scenario holds: its columns' types and its
/// batches' lengths.
pub fn describe(s: &Scenario) -> String {
    let cols: Vec<String> = s
        .schema
        .fields()
        .iter()
        .map(|f| {
            format!(
                "{}: {}{}",
                crate::report::printable(f.name()),
                f.data_type(),
                if f.is_nullable() { "" } else { " not null" }
            )
        })
        .collect();
    let rows: Vec<String> = s.batches.iter().map(|b| b.num_rows().to_string()).collect();
    format!(
        "{{{}}}, batches of [{}] rows",
        cols.join(", "),
        rows.join(", ")
    )
}

/// A fresh seed for a run that was not given one.
pub fn fresh_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    values::Rng::new(t ^ (std::process::id() as u64) << 32).next_u64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Every draw builds: the generator never asks arrow-rs for data it
    /// rejects (a non-nullable field with nulls, a misaligned buffer...).
    #[test]
    fn generated_scenarios_build() {
        for seed in [1, 2] {
            for i in 0..500 {
                if let Err(e) = scenario(seed, &name(i, &[])) {
                    panic!("seed {seed}: {e}: {:?}", tree(seed, i).unwrap().current());
                }
            }
        }
    }

    #[test]
    fn walks_round_trip_through_names() {
        let walk = vec![true, true, true, false, true, false, false];
        assert_eq!(encode_walk(&walk), "s3c1s1c2");
        let n = name(17, &walk);
        assert_eq!(n, "gen/17@s3c1s1c2");
        assert_eq!(parse_name(&n), Some((17, walk)));
        assert_eq!(parse_name("gen/4"), Some((4, vec![])));
        assert_eq!(parse_name("gen/4@x1"), None);
        assert_eq!(parse_name("gen/4@s0"), None);
        assert_eq!(parse_name("gold/x"), None);
    }

    #[test]
    fn a_seed_rebuilds_the_same_scenarios() {
        let a = scenarios(42, 6).unwrap();
        let b = scenarios(42, 6).unwrap();
        let c = scenarios(43, 6).unwrap();
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.ipc, y.ipc, "{}", x.name);
        }
        assert!(a.iter().zip(&c).any(|(x, y)| x.ipc != y.ipc));
        // One scenario alone is the same as drawn among the others.
        assert_eq!(scenario(42, "gen/4").unwrap().ipc, a[4].ipc);
    }

    #[test]
    fn shrink_walks_replay_from_the_name() {
        let mut t = tree(9, 3).unwrap();
        let mut walk = Vec::new();
        for i in 0..12 {
            let step = i % 4 != 3;
            let moved = if step { t.simplify() } else { t.complicate() };
            if !moved {
                break;
            }
            walk.push(step);
        }
        let n = name(3, &walk);
        let direct = build(&n, &t.current()).unwrap();
        assert_eq!(scenario(9, &n).unwrap().ipc, direct.ipc);
    }

    /// The generator reaches every type family of Columnar.rst over a few
    /// hundred draws (a generator that silently lost one would go unseen).
    #[test]
    fn every_type_family_is_generated() {
        fn walk(dt: &DataType, seen: &mut BTreeSet<String>) {
            let name = format!("{dt:?}");
            let family = name.split('(').next().unwrap_or("").to_string();
            seen.insert(family);
            match dt {
                DataType::List(f)
                | DataType::LargeList(f)
                | DataType::ListView(f)
                | DataType::LargeListView(f)
                | DataType::FixedSizeList(f, _)
                | DataType::Map(f, _) => walk(f.data_type(), seen),
                DataType::Struct(fs) => fs.iter().for_each(|f| walk(f.data_type(), seen)),
                DataType::Union(fs, _) => fs.iter().for_each(|(_, f)| walk(f.data_type(), seen)),
                DataType::Dictionary(k, v) => {
                    walk(k, seen);
                    walk(v, seen);
                }
                DataType::RunEndEncoded(r, v) => {
                    walk(r.data_type(), seen);
                    walk(v.data_type(), seen);
                }
                _ => {}
            }
        }
        let mut seen = BTreeSet::new();
        for i in 0..400 {
            let spec = tree(1, i).unwrap().current();
            for f in &spec.fields {
                walk(&f.0, &mut seen);
            }
        }
        let want = [
            "Null",
            "Boolean",
            "Int8",
            "Int16",
            "Int32",
            "Int64",
            "UInt8",
            "UInt16",
            "UInt32",
            "UInt64",
            "Float16",
            "Float32",
            "Float64",
            "Decimal32",
            "Decimal64",
            "Decimal128",
            "Decimal256",
            "Binary",
            "LargeBinary",
            "BinaryView",
            "Utf8",
            "LargeUtf8",
            "Utf8View",
            "FixedSizeBinary",
            "Date32",
            "Date64",
            "Time32",
            "Time64",
            "Timestamp",
            "Duration",
            "Interval",
            "List",
            "LargeList",
            "ListView",
            "LargeListView",
            "FixedSizeList",
            "Struct",
            "Map",
            "Union",
            "Dictionary",
            "RunEndEncoded",
        ];
        let missing: Vec<_> = want.iter().filter(|w| !seen.contains(**w)).collect();
        assert!(missing.is_empty(), "never generated: {missing:?}");
    }
}
