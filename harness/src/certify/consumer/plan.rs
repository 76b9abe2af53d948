//! The consumer cases' plans: which scenarios, paths, devices and variations
//! a consumer is shown, and a case's spec from its ID.

use super::*;

/// Every consumer case for these scenarios, in a stable order. IDs are
/// `consumer/<kind>/<encoding or error>/<scenario>[/batch:<i>]`.
pub fn plan(scenarios: &[Scenario]) -> Vec<CaseSpec> {
    let mut out = Vec::new();
    let mut kinds = Vec::new();
    for e in [Enc::Plain, Enc::Varied] {
        kinds.extend([
            Kind::Array(e),
            Kind::DeviceArray(e),
            Kind::Stream(e),
            Kind::DeviceStream(e),
        ]);
    }
    kinds.extend(
        ERRORS
            .iter()
            .map(|&(device, at, code)| Kind::StreamError { device, at, code }),
    );
    for (si, s) in scenarios.iter().enumerate() {
        for &kind in &kinds {
            let base = format!("consumer/{}/{}", kind.words(), s.name);
            if kind.per_batch() {
                for bi in 0..s.batches.len() {
                    out.push(CaseSpec {
                        path: Path::Consumer(kind),
                        scenario: si,
                        batch: Some(bi),
                        slice: None,
                        id: format!("{base}/batch:{bi}"),
                        device: crate::device::Kind::Cpu,
                    });
                }
            } else {
                out.push(CaseSpec {
                    path: Path::Consumer(kind),
                    scenario: si,
                    batch: None,
                    slice: None,
                    id: base,
                    device: crate::device::Kind::Cpu,
                });
            }
        }
    }
    out.extend(variation_plan(scenarios, false));
    // Released inputs do not depend on the data: once per run, with the
    // first scenario's schema.
    if let Some(s) = scenarios.first() {
        for schema in [false, true] {
            let kind = Kind::Released { schema };
            out.push(CaseSpec {
                path: Path::Consumer(kind),
                scenario: 0,
                batch: None,
                slice: None,
                id: format!("consumer/{}/{}", kind.words(), s.name),
                device: crate::device::Kind::Cpu,
            });
        }
    }
    out
}

/// The device-array and device-stream consumer cases on `device` (not the
/// CPU): `consumer/device:<kind>/<kind words>/<scenario>[/batch:<i>]`.
pub fn device_plan(scenarios: &[Scenario], device: crate::device::Kind) -> Vec<CaseSpec> {
    let prefix = super::super::id_prefix("consumer", device);
    let mut out = Vec::new();
    for (si, s) in scenarios.iter().enumerate() {
        for e in [Enc::Plain, Enc::Varied] {
            for kind in [Kind::DeviceArray(e), Kind::DeviceStream(e)] {
                let base = format!("{prefix}{}/{}", kind.words(), s.name);
                let batches: Vec<Option<usize>> = if kind.per_batch() {
                    (0..s.batches.len()).map(Some).collect()
                } else {
                    vec![None]
                };
                for batch in batches {
                    out.push(CaseSpec {
                        path: Path::Consumer(kind),
                        scenario: si,
                        batch,
                        slice: None,
                        id: match batch {
                            Some(bi) => format!("{base}/batch:{bi}"),
                            None => base.clone(),
                        },
                        device,
                    });
                }
            }
        }
    }
    out
}

/// The four data paths single-variation cases run on.
pub(super) const DATA_PATHS: [fn(Enc) -> Kind; 4] = [
    Kind::Array,
    Kind::DeviceArray,
    Kind::Stream,
    Kind::DeviceStream,
];

/// The single-variation cases (`consumer/<kind>/varied:<variation>/<scenario>[/batch:<i>]`),
/// each judged like the varied case.
///
/// `all`: the full product, every variation on every data path for every
/// scenario (`certify --all-variations`). Otherwise a covering choice, so
/// that the default run stays affordable (issue 38 item 11):
/// - every (variation, scenario) pair where the variation can show itself
///   ([`relevant`]: unused dictionary values need a dictionary, shared
///   union slots a dense union, several variadic buffers a view type, ...)
///   is run once, on the path picked by FNV-1a of the variation's and the
///   scenario's names (a pair gets the same path whatever other scenarios
///   the run has: a replay over one scenario plans it again);
/// - then every (variation, path) pair not yet covered is added, with the
///   relevant scenarios in the run's order (cycling; one with a batch for
///   the array paths), so every variation reaches every path.
///
/// A variation no scenario of the run can show is not planned.
pub fn variation_plan(scenarios: &[Scenario], all: bool) -> Vec<CaseSpec> {
    let mut chosen: Vec<(Variation, usize, usize)> = Vec::new();
    for v in Variation::ALL {
        let rel: Vec<usize> = (0..scenarios.len())
            .filter(|&si| all || relevant(v, &scenarios[si]))
            .collect();
        if rel.is_empty() {
            continue;
        }
        if all {
            for &si in &rel {
                chosen.extend((0..DATA_PATHS.len()).map(|p| (v, si, p)));
            }
            continue;
        }
        let mut covered = [false; 4];
        for &si in &rel {
            let key = format!("{}/{}", v.name(), scenarios[si].name);
            // The high half: FNV-1a's low bits depend only on the low bits of
            // each byte, and similar names would share a path.
            let mut p = ((fnv1a(key.as_bytes()) >> 32) % DATA_PATHS.len() as u64) as usize;
            // With no batch, the array paths have no case: its stream twin.
            if scenarios[si].batches.is_empty() && p < 2 {
                p += 2;
            }
            covered[p] = true;
            chosen.push((v, si, p));
        }
        let with_batches: Vec<usize> = rel
            .iter()
            .copied()
            .filter(|&si| !scenarios[si].batches.is_empty())
            .collect();
        let mut next = 0;
        for (p, &done) in covered.iter().enumerate() {
            let from = if p < 2 { &with_batches } else { &rel };
            if !done && !from.is_empty() {
                chosen.push((v, from[next % from.len()], p));
                next += 1;
            }
        }
    }
    // In scenario order, then path, then variation: like the other cases.
    chosen.sort_by_key(|&(v, si, p)| (si, p, v));
    chosen.dedup();
    let mut out = Vec::new();
    for (v, si, p) in chosen {
        let kind = DATA_PATHS[p](Enc::Only(v));
        out.extend(cases_of(kind, si, &scenarios[si]));
    }
    out
}

/// The consumer case(s) of one kind and scenario on the CPU: one per batch
/// on the array paths, one on the stream paths.
pub(super) fn cases_of(kind: Kind, si: usize, s: &Scenario) -> Vec<CaseSpec> {
    let base = format!("consumer/{}/{}", kind.words(), s.name);
    let spec = |batch: Option<usize>, id: String| CaseSpec {
        path: Path::Consumer(kind),
        scenario: si,
        batch,
        slice: None,
        id,
        device: crate::device::Kind::Cpu,
    };
    if kind.per_batch() {
        (0..s.batches.len())
            .map(|bi| spec(Some(bi), format!("{base}/batch:{bi}")))
            .collect()
    } else {
        vec![spec(None, base)]
    }
}

/// Whether variation `v` can change what a scenario's data is handed over
/// as. Offsets, children longer than their parent (a batch is a struct),
/// null_count -1 (the batch's struct has a validity bitmap), unaligned
/// buffers and NULL names (the batch's schema has an empty name) reach
/// every scenario with a column; the others need the types or data they
/// vary.
pub fn relevant(v: Variation, s: &Scenario) -> bool {
    use arrow_schema::{DataType::*, UnionMode};
    let mut types = Vec::new();
    for f in s.schema.fields() {
        crate::generate::types::walk_types(f.data_type(), true, &mut |t| types.push(t));
    }
    if types.is_empty() {
        return false;
    }
    let any = |f: &dyn Fn(&arrow_schema::DataType) -> bool| types.iter().any(|t| f(t));
    let variable = |t: &arrow_schema::DataType| {
        matches!(
            t,
            Utf8 | Binary
                | LargeUtf8
                | LargeBinary
                | Utf8View
                | BinaryView
                | List(_)
                | LargeList(_)
                | ListView(_)
                | LargeListView(_)
                | Map(..)
        )
    };
    let nulls = s
        .batches
        .iter()
        .any(|b| b.columns().iter().any(|c| c.logical_null_count() > 0));
    let empty = s.batches.iter().any(|b| b.num_rows() == 0);
    match v {
        Variation::Offset
        | Variation::LongChildren
        | Variation::NullCountUnknown
        | Variation::Unaligned
        | Variation::NullNames => true,
        Variation::NullEmptyBuffers => empty || any(&variable),
        Variation::Garbage => nulls || any(&|t| variable(t) || matches!(t, Boolean)),
        Variation::SpareBits => nulls || any(&|t| matches!(t, Boolean)),
        Variation::VariadicBuffers => any(&|t| matches!(t, Utf8View | BinaryView)),
        Variation::SharedUnionSlots => any(&|t| matches!(t, Union(_, UnionMode::Dense))),
        Variation::UnusedDictionaryValues => any(&|t| matches!(t, Dictionary(..))),
    }
}

/// The single-variation case an ID names, on the CPU, whether or not the
/// plan chose it (a case of `--all-variations` replayed, or asked for by
/// its exact ID).
pub fn spec_from_id(scenarios: &[Scenario], id: &str) -> Option<CaseSpec> {
    let rest = id.strip_prefix("consumer/")?;
    let (kind_word, rest) = rest.split_once('/')?;
    let rest = rest.strip_prefix("varied:")?;
    let (v, rest) = rest.split_once('/')?;
    let v = Variation::from_name(v)?;
    let make = match kind_word {
        "array" => Kind::Array,
        "device_array" => Kind::DeviceArray,
        "stream" => Kind::Stream,
        "device_stream" => Kind::DeviceStream,
        _ => return None,
    };
    let kind = make(Enc::Only(v));
    let (name, batch) = if kind.per_batch() {
        let (name, b) = rest.rsplit_once("/batch:")?;
        (name, Some(b.parse::<usize>().ok()?))
    } else {
        (rest, None)
    };
    let si = scenarios.iter().position(|s| s.name == name)?;
    if batch.is_some_and(|b| b >= scenarios[si].batches.len()) {
        return None;
    }
    cases_of(kind, si, &scenarios[si])
        .into_iter()
        .find(|c| c.id == id)
}

/// A stable seed for a case's varied encoding (FNV-1a of its ID).
pub(crate) fn seed_of(id: &str) -> u64 {
    fnv1a(id.as_bytes())
}

/// FNV-1a of some bytes (case seeds, fuzz input tags).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .copied()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
        })
}

pub(super) fn encoding(e: Enc, id: &str) -> Encoding {
    match e {
        Enc::Plain => Encoding::Plain,
        Enc::Varied => Encoding::Varied(seed_of(id)),
        Enc::Only(v) => Encoding::Only(v, seed_of(id)),
    }
}

/// The plan a stream case hands over.
pub(super) fn stream_plan(
    scenario: &Scenario,
    enc: Encoding,
    fail: Option<Failure>,
) -> Result<StreamPlan, String> {
    Ok(StreamPlan {
        schema: encode::schema(&scenario.schema, enc)?,
        chunks: scenario
            .batches
            .iter()
            .enumerate()
            .map(|(i, b)| encode::batch(b, enc, i as u64 + 1))
            .collect::<Result<_, _>>()?,
        fail,
    })
}
