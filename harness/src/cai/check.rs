//! The checker of a `__cuda_array_interface__` dict: pure, no device. It
//! judges the entries' presence, Python types and formats (the `cai.*`
//! rules that need no memory), and reads the layout leniently (a list
//! where a tuple belongs still gives a shape) so that one broken entry is
//! reported under its own rule and does not hide the others.

use super::value::Py;

/// One broken rule, with where and what was seen.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    pub rule: &'static str,
    pub at: String,
    pub evidence: String,
}

/// The stream entry, as a consumer reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Stream {
    /// Absent or None: "When None, no synchronization is required."
    None,
    /// 1: "The legacy default stream."; 2: "The per-thread default stream."
    Default(u8),
    /// "Any other integer: a cudaStream_t represented as a Python integer."
    Handle(u64),
    /// Not an int, or 0: the consumer cannot synchronize on it.
    Unusable(String),
}

/// What the dict says of the memory, read leniently.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    pub ptr: u64,
    pub shape: Vec<u64>,
    /// In bytes, one per dimension (C-contiguous when the dict gives none).
    pub strides: Vec<i64>,
    /// The type code and size of `typestr` ("<f8": 'f', 8), when the
    /// harness can compare its bytes (little-endian or byte-order-free).
    pub element: Option<(char, usize)>,
    /// The size of one element, when typestr reads.
    pub itemsize: Option<usize>,
    /// typestr as [`parse_typestr`] reads it: (byte order, kind, size).
    pub typestr: Option<(char, char, usize)>,
    /// The read-only flag of data, when it is a bool.
    pub read_only: Option<bool>,
    pub stream: Stream,
}

impl Layout {
    pub fn elements(&self) -> u64 {
        self.shape.iter().product()
    }

    /// The byte range the elements reach: (lowest offset, length), or None
    /// for no elements.
    pub fn extent(&self, itemsize: usize) -> Option<(i64, u64)> {
        if self.elements() == 0 {
            return None;
        }
        let (mut lo, mut hi) = (0i64, 0i64);
        for (n, s) in self.shape.iter().zip(&self.strides) {
            let far = (*n as i64 - 1) * s;
            if far < 0 {
                lo += far;
            } else {
                hi += far;
            }
        }
        Some((lo, (hi - lo) as u64 + itemsize as u64))
    }
}

/// The verdicts of one dict: rules checked, rules broken, rules left
/// unjudged (with why), and the layout when it could be read.
#[derive(Debug, Clone, Default)]
pub struct Judged {
    pub checked: Vec<&'static str>,
    pub violations: Vec<Violation>,
    pub not_exercised: Vec<(&'static str, String)>,
    pub layout: Option<Layout>,
}

impl Judged {
    fn check(&mut self, rule: &'static str, broken: Option<(String, String)>) {
        self.checked.push(rule);
        if let Some((at, evidence)) = broken {
            self.violations.push(Violation { rule, at, evidence });
        }
    }

    fn skip(&mut self, rule: &'static str, why: impl Into<String>) {
        self.not_exercised.push((rule, why.into()));
    }

    pub fn failed(&self, rule: &str) -> bool {
        self.violations.iter().any(|v| v.rule == rule)
    }
}

/// The type codes of NumPy's array-interface typestr.
const TYPE_CODES: &str = "biufcmMOSUVt";

/// NumPy's typestr: byte order, type code, size in bytes (a datetime or
/// timedelta with its `[unit]`). None when `s` is not one.
pub fn parse_typestr(s: &str) -> Option<(char, char, usize)> {
    let mut chars = s.chars();
    let order = chars.next().filter(|c| "<>|".contains(*c))?;
    let kind = chars.next().filter(|c| TYPE_CODES.contains(*c))?;
    let rest = chars.as_str();
    let (digits, unit) = match rest.find('[') {
        Some(at) if "mM".contains(kind) => (&rest[..at], Some(&rest[at..])),
        _ => (rest, None),
    };
    if let Some(u) = unit {
        let inner = u.strip_prefix('[')?.strip_suffix(']')?;
        if inner.is_empty() || !inner.chars().all(|c| c.is_ascii_alphanumeric()) {
            return None;
        }
    }
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    Some((order, kind, digits.parse().ok()?))
}

fn ints(v: &Py) -> Option<Vec<i128>> {
    v.items()?.iter().map(Py::int).collect()
}

fn is_int_tuple(v: &Py) -> bool {
    matches!(v, Py::Tuple(items) if items.iter().all(|x| x.int().is_some()))
}

const REQUIRED: [&str; 4] = ["shape", "typestr", "data", "version"];

/// A descr as NumPy's array interface defines it: a list of (name, type)
/// or (name, type, shape) tuples; name a str or a (title, name) tuple;
/// type a typestr or a nested descr.
fn descr_problem(v: &Py, depth: usize) -> Option<String> {
    let Py::List(fields) = v else {
        return Some(format!(
            "a {} ({}), not a list of tuples",
            v.type_name(),
            v.show()
        ));
    };
    if fields.is_empty() {
        return Some("an empty list".into());
    }
    for f in fields {
        let Py::Tuple(parts) = f else {
            return Some(format!("a field {} that is not a tuple", f.show()));
        };
        if !(2..=3).contains(&parts.len()) {
            return Some(format!("a field {} of {} elements", f.show(), parts.len()));
        }
        let name_ok = match &parts[0] {
            Py::Str(_) => true,
            Py::Tuple(t) => t.len() == 2 && t.iter().all(|x| matches!(x, Py::Str(_))),
            _ => false,
        };
        if !name_ok {
            return Some(format!("a field name {}", parts[0].show()));
        }
        match &parts[1] {
            Py::Str(s) if parse_typestr(s).is_some() => {}
            Py::List(_) if depth < 4 => {
                if let Some(p) = descr_problem(&parts[1], depth + 1) {
                    return Some(p);
                }
            }
            other => return Some(format!("a field type {}", other.show())),
        }
        if let Some(shape) = parts.get(2) {
            if !is_int_tuple(shape) {
                return Some(format!("a field shape {}", shape.show()));
            }
        }
    }
    None
}

/// Judges `top`, the value of `__cuda_array_interface__`.
pub fn check(top: &Py) -> Judged {
    let mut j = Judged::default();
    // "The __cuda_array_interface__ attribute returns a dictionary (dict)
    // that must contain the following entries:"
    let Py::Dict(_, d) = top else {
        j.check(
            crate::rule!("cai.dict"),
            Some((
                "__cuda_array_interface__".into(),
                format!("a {} ({}), not a dict", top.type_name(), top.show()),
            )),
        );
        for rule in RULE_ENTRIES {
            j.skip(rule, "__cuda_array_interface__ is not a dict (cai.dict)");
        }
        return j;
    };
    j.check(crate::rule!("cai.dict"), None);
    let (shape, typestr, data) = required_entries(&mut j, d);
    let parsed = typestr_entry(&mut j, typestr);
    optional_entries(&mut j, d, shape);
    let stream = stream_entry(&mut j, d);
    j.layout = layout(&mut j, shape, data, d.get("strides"), parsed, stream);
    j
}

/// `cai.typestr.format`: the typestr, when it is a str, parsed as NumPy's
/// array interface defines it (`None` when it is not one).
fn typestr_entry(j: &mut Judged, typestr: Option<&Py>) -> Option<(char, char, usize)> {
    let at = |k: &str| format!("__cuda_array_interface__[{k:?}]");
    // typestr: "This has the same definition as typestr in the numpy array
    // interface."
    match typestr {
        Some(Py::Str(s)) => {
            let p = parse_typestr(s);
            j.check(
                crate::rule!("cai.typestr.format"),
                p.is_none().then(|| {
                    (
                        at("typestr"),
                        format!("{s:?} is not a NumPy type string (byte order <, > or |, a type code of {TYPE_CODES}, a size in bytes)"),
                    )
                }),
            );
            p
        }
        _ => {
            j.skip(
                crate::rule!("cai.typestr.format"),
                "typestr is not a str (cai.typestr)",
            );
            None
        }
    }
}

/// The entries the dict may hold besides the required ones: `descr`,
/// `strides` (of `shape`'s length) and `mask`, each judged by its rule.
fn optional_entries(
    j: &mut Judged,
    d: &std::collections::BTreeMap<String, Py>,
    shape: Option<&Py>,
) {
    let at = |k: &str| format!("__cuda_array_interface__[{k:?}]");
    // descr: "This follows the same specification as in the numpy array
    // interface."
    match d.get("descr") {
        None => j.check(crate::rule!("cai.descr"), None),
        Some(v) => j.check(
            crate::rule!("cai.descr"),
            descr_problem(v, 0).map(|p| (at("descr"), p)),
        ),
    }
    // strides: "If strides is not given, or it is None, the array is in
    // C-contiguous layout. Otherwise, a tuple of int (or long) ..."
    let ndim = shape.and_then(Py::items).map(<[Py]>::len);
    let strides = d.get("strides");
    j.check(
        crate::rule!("cai.strides"),
        match strides {
            None | Some(Py::None) => None,
            Some(v)
                if is_int_tuple(v)
                    && ndim.is_none_or(|n| v.items().map(<[Py]>::len) == Some(n)) =>
            {
                None
            }
            Some(v) => Some((
                at("strides"),
                format!(
                    "{}, not None or a tuple of {} ints",
                    v.show(),
                    ndim.map_or("ndim".to_string(), |n| n.to_string())
                ),
            )),
        },
    );
    // mask: None or object exposing the __cuda_array_interface__
    j.check(
        crate::rule!("cai.mask"),
        match d.get("mask") {
            None | Some(Py::None) => None,
            Some(Py::Object { cai: Some(Ok(inner)), .. })
                if matches!(&**inner, Py::Dict(_, m) if REQUIRED.iter().all(|k| m.contains_key(*k))) =>
            {
                None
            }
            Some(Py::Object { cai: Some(Err(e)), type_name }) => Some((
                at("mask"),
                format!("a {type_name} whose __cuda_array_interface__ raised: {e}"),
            )),
            Some(v) => Some((
                at("mask"),
                format!(
                    "{}, not None or an object exposing a __cuda_array_interface__ dict with shape, typestr, data and version",
                    v.show()
                ),
            )),
        },
    );
}

/// The array's memory as the dict lays it out, read leniently (list or
/// tuple alike), for the checks that read it; on the way, the data
/// pointer's rules (`cai.data.zero-size`, `cai.data.accessible`). `None`
/// when the shape, the data pointer or the strides cannot be read.
fn layout(
    j: &mut Judged,
    shape: Option<&Py>,
    data: Option<&Py>,
    strides: Option<&Py>,
    parsed: Option<(char, char, usize)>,
    stream: Stream,
) -> Option<Layout> {
    let at = |k: &str| format!("__cuda_array_interface__[{k:?}]");
    let shape_v = shape.and_then(ints).filter(|s| s.iter().all(|n| *n >= 0));
    let ptr = data
        .and_then(Py::items)
        .and_then(|t| t.first())
        .and_then(Py::int)
        .and_then(|p| u64::try_from(p).ok());
    let (Some(shape_v), Some(ptr)) = (shape_v, ptr) else {
        for rule in [
            crate::rule!("cai.data.zero-size"),
            crate::rule!("cai.data.accessible"),
        ] {
            j.skip(rule, "the shape or the data pointer cannot be read");
        }
        return None;
    };
    let shape_v: Vec<u64> = shape_v.iter().map(|n| *n as u64).collect();
    let empty = shape_v.contains(&0);
    // "For zero-size arrays, use 0 here."
    if empty {
        j.check(
            crate::rule!("cai.data.zero-size"),
            (ptr != 0).then(|| {
                (
                    at("data"),
                    format!("pointer {ptr:#x} for shape {shape_v:?}, not 0"),
                )
            }),
        );
        j.skip(
            crate::rule!("cai.data.accessible"),
            "a zero-size array has no data to access",
        );
    } else {
        j.skip(crate::rule!("cai.data.zero-size"), "the array has elements");
        if ptr == 0 {
            // "The data must be device-accessible."
            j.check(
                crate::rule!("cai.data.accessible"),
                Some((at("data"), format!("pointer 0 for shape {shape_v:?}"))),
            );
        }
    }
    let itemsize = parsed.map(|(_, _, n)| n);
    let strides_v = match strides {
        None | Some(Py::None) => itemsize.map(|n| c_strides(&shape_v, n)),
        Some(v) => ints(v)
            .filter(|s| s.len() == shape_v.len())
            .map(|s| s.iter().map(|x| *x as i64).collect()),
    };
    let strides_v = strides_v?;
    let element = parsed.and_then(|(order, kind, size)| {
        let comparable = match kind {
            'b' => size == 1,
            'i' | 'u' => matches!(size, 1 | 2 | 4 | 8),
            'f' => matches!(size, 4 | 8),
            _ => false,
        };
        (comparable && (order == '<' || order == '|') && cfg!(target_endian = "little"))
            .then_some((kind, size))
    });
    let read_only = match data.and_then(Py::items).and_then(|t| t.get(1)) {
        Some(Py::Bool(b)) => Some(*b),
        _ => None,
    };
    Some(Layout {
        ptr,
        shape: shape_v,
        strides: strides_v,
        element,
        itemsize,
        typestr: parsed,
        read_only,
        stream,
    })
}

/// The entries the dict "must contain" (`cai.shape`, `cai.typestr`,
/// `cai.data`, `cai.version`, `cai.version.current`): their values, as
/// found, for the checks that read them.
fn required_entries<'a>(
    j: &mut Judged,
    d: &'a std::collections::BTreeMap<String, Py>,
) -> (Option<&'a Py>, Option<&'a Py>, Option<&'a Py>) {
    let at = |k: &str| format!("__cuda_array_interface__[{k:?}]");
    let missing = |k: &str| Some((at(k), "missing".to_string()));

    // shape: (integer, ...) "A tuple of int (or long) representing the
    // size of each dimension."
    let shape = d.get("shape");
    j.check(
        crate::rule!("cai.shape"),
        match shape {
            None => missing("shape"),
            Some(v) if is_int_tuple(v) => None,
            Some(v) => Some((at("shape"), format!("{}, not a tuple of ints", v.show()))),
        },
    );
    // typestr: str
    let typestr = d.get("typestr");
    j.check(
        crate::rule!("cai.typestr"),
        match typestr {
            None => missing("typestr"),
            Some(Py::Str(_)) => None,
            Some(v) => Some((
                at("typestr"),
                format!("a {} ({}), not a str", v.type_name(), v.show()),
            )),
        },
    );
    // data: (integer, boolean) "The data is a 2-tuple."
    let data = d.get("data");
    j.check(
        crate::rule!("cai.data"),
        match data {
            None => missing("data"),
            Some(Py::Tuple(t))
                if t.len() == 2
                    && t[0].int().is_some_and(|p| p >= 0)
                    && matches!(t[1], Py::Bool(_)) =>
            {
                None
            }
            Some(v) => Some((
                at("data"),
                format!(
                    "{}, not a 2-tuple (int pointer, bool read-only flag)",
                    v.show()
                ),
            )),
        },
    );
    // version: integer. "The current version is 3."
    let version = d.get("version");
    j.check(
        crate::rule!("cai.version"),
        match version {
            None => missing("version"),
            Some(Py::Int(_)) => None,
            Some(v) => Some((
                at("version"),
                format!("a {} ({}), not an int", v.type_name(), v.show()),
            )),
        },
    );
    match version.and_then(Py::int) {
        Some(3) => j.check(crate::rule!("cai.version.current"), None),
        Some(v) => j.check(
            crate::rule!("cai.version.current"),
            Some((at("version"), format!("{v}, not 3"))),
        ),
        None => j.skip(
            crate::rule!("cai.version.current"),
            "version is not an int (cai.version)",
        ),
    }
    (shape, typestr, data)
}

/// `cai.stream.type` and `cai.stream.zero`: the dict's stream entry, and
/// the stream it names. "stream: None or integer"; 0 "is disallowed".
fn stream_entry(j: &mut Judged, d: &std::collections::BTreeMap<String, Py>) -> Stream {
    let at = |k: &str| format!("__cuda_array_interface__[{k:?}]");
    match d.get("stream") {
        None | Some(Py::None) => {
            j.check(crate::rule!("cai.stream.type"), None);
            j.check(crate::rule!("cai.stream.zero"), None);
            Stream::None
        }
        Some(Py::Int(0)) => {
            j.check(crate::rule!("cai.stream.type"), None);
            j.check(
                crate::rule!("cai.stream.zero"),
                Some((
                    at("stream"),
                    "0, which the text disallows (None, 1 or 2 instead)".into(),
                )),
            );
            Stream::Unusable("stream is 0 (cai.stream.zero)".into())
        }
        Some(Py::Int(n)) => {
            j.check(crate::rule!("cai.stream.type"), None);
            j.check(crate::rule!("cai.stream.zero"), None);
            match u64::try_from(*n) {
                Ok(1) => Stream::Default(1),
                Ok(2) => Stream::Default(2),
                Ok(h) => Stream::Handle(h),
                Err(_) => Stream::Unusable(format!("stream {n} is no cudaStream_t")),
            }
        }
        Some(v) => {
            j.check(
                crate::rule!("cai.stream.type"),
                Some((
                    at("stream"),
                    format!("a {} ({}), not None or an int", v.type_name(), v.show()),
                )),
            );
            j.skip(
                crate::rule!("cai.stream.zero"),
                "stream is not an int (cai.stream.type)",
            );
            Stream::Unusable(format!("stream is a {} (cai.stream.type)", v.type_name()))
        }
    }
}

/// The rules [`check`] judges (each skipped when the attribute is no dict).
const RULE_ENTRIES: [&str; 13] = [
    crate::rule!("cai.shape"),
    crate::rule!("cai.typestr"),
    crate::rule!("cai.data"),
    crate::rule!("cai.version"),
    crate::rule!("cai.version.current"),
    crate::rule!("cai.typestr.format"),
    crate::rule!("cai.descr"),
    crate::rule!("cai.data.zero-size"),
    crate::rule!("cai.data.accessible"),
    crate::rule!("cai.strides"),
    crate::rule!("cai.mask"),
    crate::rule!("cai.stream.type"),
    crate::rule!("cai.stream.zero"),
];

/// C-contiguous strides in bytes.
pub fn c_strides(shape: &[u64], itemsize: usize) -> Vec<i64> {
    let mut out = vec![0i64; shape.len()];
    let mut step = itemsize as i64;
    for (i, n) in shape.iter().enumerate().rev() {
        out[i] = step;
        step *= (*n).max(1) as i64;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn int(i: i128) -> Py {
        Py::Int(i)
    }

    fn good() -> BTreeMap<String, Py> {
        let mut d = BTreeMap::new();
        d.insert("shape".into(), Py::Tuple(vec![int(4), int(3)]));
        d.insert("typestr".into(), Py::Str("<f8".into()));
        d.insert("data".into(), Py::Tuple(vec![int(0x1000), Py::Bool(false)]));
        d.insert("version".into(), int(3));
        d
    }

    fn judged(edit: impl FnOnce(&mut BTreeMap<String, Py>)) -> Judged {
        let mut d = good();
        edit(&mut d);
        check(&Py::Dict("dict".into(), d))
    }

    fn failed(j: &Judged) -> Vec<&'static str> {
        j.violations.iter().map(|v| v.rule).collect()
    }

    #[test]
    fn a_minimal_dict_passes_and_reads_as_c_contiguous() {
        let j = judged(|_| {});
        assert!(j.violations.is_empty(), "{:?}", j.violations);
        let l = j.layout.unwrap();
        assert_eq!(l.strides, vec![24, 8]);
        assert_eq!(l.stream, Stream::None);
        assert_eq!(l.element, Some(('f', 8)));
        assert_eq!(l.extent(8), Some((0, 96)));
    }

    type Edit = Box<dyn FnOnce(&mut BTreeMap<String, Py>)>;

    #[test]
    fn each_broken_entry_is_reported_under_its_own_rule_alone() {
        let cases: Vec<(&str, Edit)> = vec![
            (
                crate::rule!("cai.shape"),
                Box::new(|d| {
                    d.insert("shape".into(), Py::List(vec![int(4), int(3)]));
                }),
            ),
            (
                crate::rule!("cai.shape"),
                Box::new(|d| {
                    d.remove("shape");
                }),
            ),
            (
                crate::rule!("cai.typestr"),
                Box::new(|d| {
                    d.insert("typestr".into(), Py::Bytes("b'<f8'".into()));
                }),
            ),
            (
                crate::rule!("cai.data"),
                Box::new(|d| {
                    d.insert("data".into(), Py::Tuple(vec![int(0x1000), int(0)]));
                }),
            ),
            (
                crate::rule!("cai.version"),
                Box::new(|d| {
                    d.insert("version".into(), Py::Str("3".into()));
                }),
            ),
            (
                crate::rule!("cai.version.current"),
                Box::new(|d| {
                    d.insert("version".into(), int(2));
                }),
            ),
            (
                crate::rule!("cai.typestr.format"),
                Box::new(|d| {
                    d.insert("typestr".into(), Py::Str("float64".into()));
                }),
            ),
            (
                crate::rule!("cai.descr"),
                Box::new(|d| {
                    d.insert("descr".into(), Py::Str("<f8".into()));
                }),
            ),
            (
                crate::rule!("cai.strides"),
                Box::new(|d| {
                    d.insert("strides".into(), Py::Tuple(vec![int(8)]));
                }),
            ),
            (
                crate::rule!("cai.mask"),
                Box::new(|d| {
                    d.insert("mask".into(), int(0));
                }),
            ),
            (
                crate::rule!("cai.stream.type"),
                Box::new(|d| {
                    d.insert("stream".into(), Py::Bool(true));
                }),
            ),
            (
                crate::rule!("cai.stream.zero"),
                Box::new(|d| {
                    d.insert("stream".into(), int(0));
                }),
            ),
            (
                crate::rule!("cai.data.accessible"),
                Box::new(|d| {
                    d.insert("data".into(), Py::Tuple(vec![int(0), Py::Bool(true)]));
                }),
            ),
            (
                crate::rule!("cai.data.zero-size"),
                Box::new(|d| {
                    d.insert("shape".into(), Py::Tuple(vec![int(0), int(3)]));
                }),
            ),
        ];
        for (rule, edit) in cases {
            let j = judged(edit);
            assert_eq!(failed(&j), vec![rule], "{:?}", j.violations);
        }
        let j = check(&Py::List(vec![]));
        assert_eq!(failed(&j), vec![crate::rule!("cai.dict")]);
        assert!(j.not_exercised.len() >= 10);
    }

    #[test]
    fn optional_entries_that_are_right_pass() {
        let j = judged(|d| {
            d.insert("strides".into(), Py::Tuple(vec![int(48), int(8)]));
            d.insert("stream".into(), int(2));
            d.insert(
                "descr".into(),
                Py::List(vec![Py::Tuple(vec![
                    Py::Str(String::new()),
                    Py::Str("<f8".into()),
                ])]),
            );
            d.insert(
                "mask".into(),
                Py::Object {
                    type_name: "M".into(),
                    cai: Some(Ok(Box::new(Py::Dict("dict".into(), good())))),
                },
            );
        });
        assert!(j.violations.is_empty(), "{:?}", j.violations);
        let l = j.layout.unwrap();
        assert_eq!(l.strides, vec![48, 8]);
        assert_eq!(l.stream, Stream::Default(2));
        // A list where the tuple belongs is a violation, yet still read.
        let j = judged(|d| {
            d.insert("data".into(), Py::List(vec![int(0x2000), Py::Bool(false)]));
        });
        assert_eq!(failed(&j), vec![crate::rule!("cai.data")]);
        assert_eq!(j.layout.unwrap().ptr, 0x2000);
    }

    #[test]
    fn typestrs_read_as_numpy_writes_them() {
        for ok in [
            "<f8", "|u1", "|b1", ">i4", "<M8[ns]", "<m8[D]", "|V16", "<c16", "|S5",
        ] {
            assert!(parse_typestr(ok).is_some(), "{ok}");
        }
        for bad in ["f8", "float64", "<x4", "<f", "<f8[ns]", "<M8[]", "=f8", ""] {
            assert!(parse_typestr(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn negative_strides_reach_below_the_pointer() {
        let l = Layout {
            ptr: 0x1000,
            shape: vec![3],
            strides: vec![-8],
            element: Some(('f', 8)),
            itemsize: Some(8),
            typestr: Some(('<', 'f', 8)),
            read_only: Some(false),
            stream: Stream::None,
        };
        assert_eq!(l.extent(8), Some((-16, 24)));
        assert_eq!(c_strides(&[2, 0, 3], 4), vec![12, 12, 4]);
    }
}
