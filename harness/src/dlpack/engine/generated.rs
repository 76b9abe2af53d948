//! Generated cases (proptest): drawn, replayed by ID, shrunk.

use super::*;

/// The prefix of a generated consumer case's ID; the rest of the ID is the
/// whole tensor (`<dtype>/<shape>/<layout>/v1.<minor>[/read-only]`), so the
/// ID alone reruns it.
pub const GENERATED: &str = "dlpack/consumer/gen/";

/// The ID of a generated consumer case for `spec`.
pub fn generated_id(spec: &Spec) -> String {
    format!(
        "{GENERATED}{}/{}/{}/v{}.{}{}",
        spec.dtype.name(),
        shape_name(&spec.shape),
        spec.layout.name(),
        spec.version.major,
        spec.version.minor,
        if spec.read_only { "/read-only" } else { "" }
    )
}

/// The case a generated ID names (a consumer's or a producer's).
pub fn parse_generated(id: &str) -> Option<DlCase> {
    if id.starts_with(GENERATED_PRODUCER) {
        return parse_generated_producer(id);
    }
    let rest = id.strip_prefix(GENERATED)?;
    let parts: Vec<&str> = rest.split('/').collect();
    let (dtype, shape, layout, version) =
        (parts.first()?, parts.get(1)?, parts.get(2)?, parts.get(3)?);
    let read_only = match parts.get(4) {
        None => false,
        Some(&"read-only") => true,
        _ => return None,
    };
    let shape = parse_shape(shape)?;
    let (major, minor) = version.strip_prefix('v')?.split_once('.')?;
    let spec = Spec {
        dtype: DType::parse(dtype)?,
        shape,
        layout: Layout::parse(layout)?,
        read_only,
        version: DLPackVersion {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
        },
        inaccessible: false,
    };
    Some(DlCase {
        id: id.to_string(),
        kind: Kind::Consumer {
            mode: if read_only { "versioned" } else { "negotiate" },
            spec,
        },
    })
}

/// `[4,0]` as a shape.
pub(super) fn parse_shape(s: &str) -> Option<Vec<i64>> {
    let inner = s.strip_prefix('[')?.strip_suffix(']')?;
    if inner.is_empty() {
        return Some(Vec::new());
    }
    inner.split(',').map(|d| d.parse().ok()).collect()
}

/// The prefix of a generated producer case's ID; the rest is the whole
/// case (`<dtype>/<shape>/<view>/<request>[/untaken]`).
pub const GENERATED_PRODUCER: &str = "dlpack/producer/gen/";

/// The ID of a generated producer case.
pub fn generated_producer_id(
    dtype: DType,
    shape: &[i64],
    view: View,
    request: Request,
    consume: bool,
) -> String {
    format!(
        "{GENERATED_PRODUCER}{}/{}/{}/{}{}",
        dtype.name(),
        shape_name(shape),
        view.name(),
        request.name(),
        if consume { "" } else { "/untaken" }
    )
}

pub(super) fn parse_generated_producer(id: &str) -> Option<DlCase> {
    let parts: Vec<&str> = id.strip_prefix(GENERATED_PRODUCER)?.split('/').collect();
    let consume = match parts.get(4) {
        None => true,
        Some(&"untaken") => false,
        _ => return None,
    };
    Some(DlCase {
        id: id.to_string(),
        kind: Kind::Producer {
            dtype: DType::parse(parts.first()?)?,
            shape: parse_shape(parts.get(1)?)?,
            view: View::parse(parts.get(2)?)?,
            request: Request::parse(parts.get(3)?)?,
            consume,
        },
    })
}

/// The strategy generated producer cases are drawn from: any dtype, 0 to 3
/// dimensions of 0 to 5, a view the shape allows, every request but the
/// CUDA one (the fixed plan has it) with each `max_version` (none, 1.0,
/// 1.3, a later minor, a later major), `copy=True` and `copy=False`, the
/// capsule taken
/// or not. Shrinks toward int8, fewer and smaller dimensions, the whole
/// array, the legacy request, taken. Values are case IDs.
pub fn producer_strategy() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let requests = [
        Request::Legacy,
        Request::V10,
        Request::V1,
        Request::HigherMinor,
        Request::HigherMajor,
        Request::Copy,
        Request::NoCopy,
    ];
    (
        0..DType::ALL.len(),
        proptest::collection::vec(0i64..=5, 0..=3),
        0usize..4,
        0..requests.len(),
        any::<bool>(),
    )
        .prop_map(move |(d, shape, v, r, untaken)| {
            let view = match v {
                1 if !shape.is_empty() => View::Step,
                2 if !shape.is_empty() => View::Offset,
                3 if shape.len() >= 2 => View::Transpose,
                _ => View::Whole,
            };
            generated_producer_id(DType::ALL[d], &shape, view, requests[r], !untaken)
        })
}

/// Which side's generated cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GenSide {
    Consumer,
    Producer,
}

impl GenSide {
    /// The side of a generated ID, if it is one.
    pub fn of(id: &str) -> Option<GenSide> {
        if id.starts_with(GENERATED) {
            Some(GenSide::Consumer)
        } else if id.starts_with(GENERATED_PRODUCER) {
            Some(GenSide::Producer)
        } else {
            None
        }
    }
}

/// The strategy generated consumer tensors are drawn from: any dtype,
/// 0 to 3 dimensions of 0 to 5, any layout the shape allows, read-only or
/// not, version 1.0 to 1.3 (NULL strides only before 1.2). Shrinks toward
/// int8, fewer and smaller dimensions, compact, writable, 1.0.
pub fn spec_strategy() -> impl proptest::strategy::Strategy<Value = Spec> {
    use proptest::prelude::*;
    (
        0..DType::ALL.len(),
        proptest::collection::vec(0i64..=5, 0..=3),
        0..Layout::GENERATED.len(),
        any::<bool>(),
        0u32..=3,
    )
        .prop_map(|(d, shape, l, read_only, minor)| {
            let mut layout = Layout::GENERATED[l];
            if (layout == Layout::Transposed && shape.len() < 2)
                || (matches!(layout, Layout::Gaps | Layout::Broadcast) && shape.is_empty())
            {
                layout = Layout::Contiguous;
            }
            let minor = if layout == Layout::NullStrides {
                minor.min(1)
            } else {
                minor
            };
            Spec {
                dtype: DType::ALL[d],
                shape,
                layout,
                read_only,
                version: DLPackVersion { major: 1, minor },
                inaccessible: false,
            }
        })
}

/// The value tree (of case IDs) of generated case `index` of `side` in a
/// run seeded `seed`.
pub fn generated_tree(
    seed: u64,
    index: u64,
    side: GenSide,
) -> Box<dyn proptest::strategy::ValueTree<Value = String>> {
    use proptest::strategy::Strategy;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let mut bytes = [0u8; 32];
    // The producer side's draws are their own (another stream of seeds).
    let salt = match side {
        GenSide::Consumer => 0,
        GenSide::Producer => 0x5052_4f44_5543_4552, // "PRODUCER"
    };
    let mut x = seed ^ salt ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for chunk in bytes.chunks_mut(8) {
        // splitmix64
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        chunk.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    );
    match side {
        GenSide::Consumer => Box::new(
            spec_strategy()
                .prop_map(|s| generated_id(&s))
                .new_tree(&mut runner)
                .expect("the strategy has no filter"),
        ),
        GenSide::Producer => Box::new(
            producer_strategy()
                .new_tree(&mut runner)
                .expect("the strategy has no filter"),
        ),
    }
}

/// `count` generated cases of `side` of `seed` (distinct IDs), each with
/// its index.
pub fn generated(seed: u64, count: u64, side: GenSide) -> Vec<(u64, DlCase)> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for i in 0..count {
        let id = generated_tree(seed, i, side).current();
        if seen.insert(id.clone()) {
            out.push((i, parse_generated(&id).expect("a generated ID parses")));
        }
    }
    out
}
