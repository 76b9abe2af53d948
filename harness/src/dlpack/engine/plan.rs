//! The case plans: which DLPack cases a run holds, for a producer, a consumer,
//! a device and a pair.

use super::*;

pub(in crate::dlpack) fn shape_name(shape: &[i64]) -> String {
    format!(
        "[{}]",
        shape
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(",")
    )
}

/// The case plan: producer cases when `producer`, consumer cases when
/// `consumer`, in a fixed order (IDs are stable).
pub fn plan(producer: bool, consumer: bool) -> Vec<DlCase> {
    let mut out = Vec::new();
    let shapes: [&[i64]; 5] = [&[], &[0], &[7], &[4, 3], &[2, 3, 2]];
    if producer {
        let mut add = |dtype: DType, shape: &[i64], view: View, request: Request, consume: bool| {
            out.push(DlCase {
                id: format!(
                    "dlpack/producer/{}/{}/{}/{}{}",
                    dtype.name(),
                    shape_name(shape),
                    view.name(),
                    request.name(),
                    if consume { "" } else { "/untaken" }
                ),
                kind: Kind::Producer {
                    dtype,
                    shape: shape.to_vec(),
                    view,
                    request,
                    consume,
                },
            })
        };
        for dtype in DType::ALL {
            for shape in shapes {
                add(dtype, shape, View::Whole, Request::V1, true);
            }
        }
        for dtype in [DType::I32, DType::F64] {
            for shape in [&[7i64][..], &[4, 3], &[2, 3, 2]] {
                for view in [View::Step, View::Offset, View::Transpose] {
                    if view != View::Transpose || shape.len() == 2 {
                        add(dtype, shape, view, Request::V1, true);
                    }
                }
            }
        }
        // The strides dlpack.h's signed int64_t allows and compact exports
        // never show: negative (`x[::-1]`), zero (a broadcast) and gapped
        // along an inner axis (`x[:, ::2]`).
        for dtype in [DType::I32, DType::F64] {
            for shape in [&[7i64][..], &[4, 3], &[2, 3, 2]] {
                for view in [View::Reverse, View::Broadcast, View::ColumnStep] {
                    if view.applies(shape.len()) {
                        add(dtype, shape, view, Request::V1, true);
                    }
                }
            }
        }
        for shape in [&[7i64][..], &[4, 3]] {
            for request in [
                Request::Legacy,
                Request::Copy,
                Request::NoCopy,
                Request::Cuda,
                Request::CudaNoCopy,
                Request::V10,
                Request::HigherMinor,
                Request::HigherMajor,
            ] {
                add(DType::F32, shape, View::Whole, request, true);
            }
            for request in [Request::Legacy, Request::V1] {
                add(DType::F32, shape, View::Whole, request, false);
            }
        }
        out.push(DlCase {
            id: "dlpack/producer/float64/[1024]/whole/v1/frees".into(),
            kind: Kind::Frees {
                dtype: DType::F64,
                shape: vec![1024],
            },
        });
        for request in [Request::V1, Request::Legacy] {
            out.push(DlCase {
                id: format!(
                    "dlpack/producer/float64/[7]/whole/{}/deleter-thread",
                    request.name()
                ),
                kind: Kind::DeleterThread {
                    dtype: DType::F64,
                    shape: vec![7],
                    request,
                },
            });
        }
    }
    if consumer {
        let mut add = |spec: Spec, mode: &'static str, variant: &str| {
            out.push(DlCase {
                id: format!(
                    "dlpack/consumer/{}/{}/{}{}",
                    spec.dtype.name(),
                    shape_name(&spec.shape),
                    spec.layout.name(),
                    variant
                ),
                kind: Kind::Consumer { spec, mode },
            })
        };
        let spec = Spec::plain;
        for dtype in DType::ALL {
            for shape in &shapes[..4] {
                add(spec(dtype, shape, Layout::Contiguous), "negotiate", "");
            }
        }
        for layout in [
            Layout::Gaps,
            Layout::Transposed,
            Layout::Broadcast,
            Layout::ByteOffset,
            Layout::NullStrides,
            Layout::NegativeStrides,
        ] {
            for dtype in [DType::I32, DType::F64] {
                for shape in [&[7i64][..], &[4, 3], &[2, 3, 2]] {
                    if layout == Layout::Transposed && shape.len() < 2 {
                        continue;
                    }
                    add(spec(dtype, shape, layout), "negotiate", "");
                }
            }
        }
        // 0-d tensors as NumPy exports them: NULL shape and strides.
        for dtype in [DType::I32, DType::F64] {
            add(spec(dtype, &[], Layout::NullStrides), "negotiate", "");
        }
        let mut ro = spec(DType::I32, &[4, 3], Layout::Contiguous);
        ro.read_only = true;
        add(ro, "versioned", "/read-only");
        let mut major2 = spec(DType::I32, &[5], Layout::Contiguous);
        major2.version = DLPackVersion { major: 2, minor: 0 };
        major2.inaccessible = true;
        add(major2, "versioned", "/major-2");
        add(
            spec(DType::I32, &[4, 3], Layout::Contiguous),
            "legacy",
            "/legacy",
        );
    }
    if consumer {
        out.extend(plan_to_arrow());
    }
    if producer {
        out.extend(plan_from_arrow());
    }
    out
}

/// DLPack in, Arrow out (`dlpack_to_arrow`): every dtype as a vector, and
/// the layouts, sizes and flags of two.
pub(super) fn plan_to_arrow() -> Vec<DlCase> {
    let mut out = Vec::new();
    let mut add = |dtype: DType, shape: &[i64], layout: Layout, read_only: bool| {
        let spec = Spec {
            read_only,
            ..Spec::plain(dtype, shape, layout)
        };
        out.push(DlCase {
            id: format!(
                "dlpack/to-arrow/{}/{}/{}{}",
                dtype.name(),
                shape_name(shape),
                layout.name(),
                if read_only { "/read-only" } else { "" }
            ),
            kind: Kind::ToArrow { spec },
        });
    };
    for dtype in DType::ALL {
        add(dtype, &[7], Layout::Contiguous, false);
    }
    for dtype in [DType::I32, DType::F64] {
        add(dtype, &[0], Layout::Contiguous, false);
        add(dtype, &[4, 3], Layout::Contiguous, false);
        add(dtype, &[4, 3], Layout::Transposed, false);
        add(dtype, &[7], Layout::Gaps, false);
        add(dtype, &[7], Layout::ByteOffset, false);
        add(dtype, &[], Layout::NullStrides, false);
    }
    add(DType::I32, &[7], Layout::Contiguous, true);
    out
}

/// Arrow in, DLPack out (`arrow_to_dlpack`): every type Arrow shares with
/// DLPack, then one with an offset, a null, no values, and each request.
pub(super) fn plan_from_arrow() -> Vec<DlCase> {
    let mut out = Vec::new();
    let mut add = |array: crossing::ArrowInput, request: Request, consume: bool| {
        out.push(DlCase {
            id: format!(
                "dlpack/from-arrow/{}/{}{}",
                array.name(),
                request.name(),
                if consume { "" } else { "/untaken" }
            ),
            kind: Kind::FromArrow {
                array,
                request,
                consume,
            },
        });
    };
    let input = |dtype, length, offset, nulls| crossing::ArrowInput {
        dtype,
        length,
        offset,
        nulls,
    };
    for dtype in DType::ALL {
        if crossing::arrow_format(dtype).is_some() {
            add(input(dtype, 7, 0, false), Request::V1, true);
        }
    }
    add(input(DType::I32, 0, 0, false), Request::V1, true);
    add(input(DType::I32, 7, 2, false), Request::V1, true);
    add(input(DType::I32, 7, 0, true), Request::V1, true);
    add(input(DType::I32, 7, 0, false), Request::V1, false);
    for request in [Request::Legacy, Request::Copy, Request::Cuda] {
        add(input(DType::I32, 7, 0, false), request, true);
    }
    out
}

/// The device consumer cases (`dlpack/consumer/<device>/...`): vectors of
/// four dtypes, then int32 in the layouts a device tensor may have.
pub fn plan_device(device: crate::device::Kind) -> Vec<DlCase> {
    let mut out = Vec::new();
    let mut add = |dtype: DType, shape: &[i64], layout: Layout| {
        out.push(DlCase {
            id: format!(
                "dlpack/consumer/{}/{}/{}/{}",
                device.name(),
                dtype.name(),
                shape_name(shape),
                layout.name()
            ),
            kind: Kind::OnDevice {
                spec: Spec::plain(dtype, shape, layout),
                device,
            },
        })
    };
    for dtype in [DType::I32, DType::F64, DType::U8, DType::F16] {
        add(dtype, &[7], Layout::Contiguous);
    }
    add(DType::I32, &[0], Layout::Contiguous);
    add(DType::I32, &[4, 3], Layout::Contiguous);
    add(DType::I32, &[4, 3], Layout::Transposed);
    add(DType::I32, &[7], Layout::Gaps);
    add(DType::I32, &[7], Layout::ByteOffset);
    out
}

/// The pair plan: every dtype and shape whole, and the views of two dtypes.
pub fn plan_pairs() -> Vec<DlCase> {
    plan(true, false)
        .into_iter()
        .filter_map(|c| match c.kind {
            Kind::Producer {
                dtype,
                shape,
                view,
                request: Request::V1,
                consume: true,
            } => Some(DlCase {
                id: format!(
                    "dlpack/pair/{}/{}/{}",
                    dtype.name(),
                    shape_name(&shape),
                    view.name()
                ),
                kind: Kind::Pair { dtype, shape, view },
            }),
            _ => None,
        })
        .collect()
}
