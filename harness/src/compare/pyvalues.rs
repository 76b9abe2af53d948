//! An independent view of what a consumer read: the library's own values
//! (a py: adapter's `values(obj)`, through `arrowcert_consume_values`),
//! made without its Arrow exporter, compared with what the harness sent.
//!
//! The Arrow read-back goes through the library's importer and then its
//! exporter: a misreading the exporter undoes (rows reversed in and out, a
//! value flipped both ways) passes it. The library's conversion to its
//! native values does not share the exporter's code, so it shows what the
//! library holds.
//!
//! The view is JSON: `{"columns": [[v, ...], ...], "names": [...] | null}`
//! (or `{"error": "..."}`), each value null, a boolean, a string, a list,
//! or an object tagged by kind: `{"i": "digits"}` (integer), `{"f":
//! "repr"}` (float, `nan`/`inf` included), `{"b": "hex"}` (bytes), `{"d":
//! ["digits", exp]}` (decimal), `{"date": days}`, `{"ts": "n", "unit":
//! "us"|"ns", "tz": bool}`, `{"time": "n", "unit"}`, `{"dur": "n",
//! "unit"}`, `{"map": [[k, v], ...]}` (a dict), `{"?": "type"}` (anything
//! else). How the sent data maps to it ([`logical::Value`]: encodings
//! decoded, flavours set aside):
//! - integers, floats and decimals compare as numbers across the three
//!   (a float equal to the integer or decimal sent agrees; a float for a
//!   decimal that is not exactly it is not compared: the view's precision
//!   is not the data's); floats compare bit for bit, any NaN equals NaN;
//! - strings are text, bytes are bytes; neither equals the other;
//! - dates, timestamps, times and durations compare as nanoseconds at the
//!   view's precision (Python's datetime holds microseconds: a value cut
//!   toward zero or down to it agrees); a date and a timestamp are one
//!   instant axis; an interval of no months and no days is a duration;
//! - lists compare item by item; a struct compares its fields in order
//!   with a dict's values or a tuple's items; a map's entries compare with
//!   `(key, value)` pairs, `{"key", "value"}` dicts, a dict of key ->
//!   value, or DuckDB's `{"key": [...], "value": [...]}`; a union is the
//!   value of its child;
//! - a date or time the view gives as text (DuckDB's, out of Python's
//!   range), anything the view gives as `{"?": ...}`, intervals with months or
//!   days, and types [`logical::Value`] keeps exact are not compared, with
//!   the reason: never an agreement, never a disagreement.

#![forbid(unsafe_code)]

use arrow_array::RecordBatch;
use arrow_schema::Schema;
use serde_json::Value as J;

use super::logical::{self, Value};

/// At most this many disagreeing values are named.
const MAX_SHOWN: usize = 5;

/// What comparing the view with the data found.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ViewComparison {
    /// Values compared and equal.
    pub agreed: usize,
    /// Disagreements, as evidence (the first few).
    pub disagreements: Vec<String>,
    /// Values (or the whole view) not compared, with the reason (the
    /// first of each column, and a count).
    pub not_compared: Vec<String>,
}

impl ViewComparison {
    fn whole(reason: String) -> Self {
        ViewComparison {
            not_compared: vec![reason],
            ..Default::default()
        }
    }

    /// One line for the report: how many values agreed, what was not
    /// compared.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "the consumer's own values view agreed on {} value(s)",
            self.agreed
        );
        if !self.disagreements.is_empty() {
            s.push_str(&format!(", disagreed on {}", self.disagreements.join("; ")));
        }
        if !self.not_compared.is_empty() {
            s.push_str(&format!("; not compared: {}", self.not_compared.join("; ")));
        }
        s
    }
}

#[derive(Debug, PartialEq)]
enum Outcome {
    Agree,
    Disagree,
    NotCompared(String),
}

/// Compares the view (`json`, as the plugin handed it) with the data sent.
pub fn compare(schema: &Schema, batches: &[RecordBatch], json: &str) -> ViewComparison {
    let view: J = match serde_json::from_str(json) {
        Ok(v) => v,
        Err(e) => return ViewComparison::whole(format!("the view is not JSON ({e})")),
    };
    if let Some(err) = view.get("error").and_then(J::as_str) {
        return ViewComparison::whole(format!("values(obj) raised {err}"));
    }
    let Some(columns) = view.get("columns").and_then(J::as_array) else {
        return ViewComparison::whole("the view has no \"columns\" list".into());
    };
    let fields = schema.fields();
    if view.get("names").is_some_and(J::is_array) {
        let mut names: Vec<&str> = fields.iter().map(|f| f.name().as_str()).collect();
        names.sort_unstable();
        if names.windows(2).any(|w| w[0] == w[1]) {
            return ViewComparison::whole(
                "the view is a dict keyed by column name and the data has duplicate column names"
                    .into(),
            );
        }
    }
    let mut out = ViewComparison::default();
    if columns.len() != fields.len() {
        out.disagreements.push(format!(
            "the view has {} column(s), the data {}",
            columns.len(),
            fields.len()
        ));
        return out;
    }
    for (col, (field, got)) in fields.iter().zip(columns).enumerate() {
        let expected = logical::column_values(batches, col);
        let at = format!("column {col} {:?}", field.name());
        let Some(got) = got.as_array() else {
            out.disagreements
                .push(format!("{at}: the view's column is not a list"));
            continue;
        };
        if got.len() != expected.len() {
            out.disagreements.push(format!(
                "{at}: {} value(s) in the view, {} sent",
                got.len(),
                expected.len()
            ));
            continue;
        }
        let bool8 = logical::canonical_extension(field);
        let (mut skipped, mut why) = (0usize, None);
        for (row, (x, y)) in expected.iter().zip(got).enumerate() {
            let mut o = same(x, y);
            if o == Outcome::Disagree {
                if let Some(read) = bool8 {
                    o = same(&read(x.clone()), y);
                }
            }
            match o {
                Outcome::Agree => out.agreed += 1,
                Outcome::Disagree => {
                    if out.disagreements.len() < MAX_SHOWN {
                        out.disagreements
                            .push(format!("{at} row {row}: the view has {y}, {x:?} was sent"));
                    }
                }
                Outcome::NotCompared(r) => {
                    skipped += 1;
                    why.get_or_insert(r);
                }
            }
        }
        if let Some(why) = why {
            out.not_compared
                .push(format!("{at}: {skipped} value(s), {why}"));
        }
    }
    out
}

fn all<'a>(pairs: impl Iterator<Item = (&'a Value, &'a J)>) -> Outcome {
    let mut first_skip = None;
    for (x, y) in pairs {
        match same(x, y) {
            Outcome::Agree => {}
            Outcome::Disagree => return Outcome::Disagree,
            Outcome::NotCompared(r) => {
                first_skip.get_or_insert(r);
            }
        }
    }
    first_skip.map_or(Outcome::Agree, Outcome::NotCompared)
}

fn agree(b: bool) -> Outcome {
    if b {
        Outcome::Agree
    } else {
        Outcome::Disagree
    }
}

/// A number of the view.
enum Num {
    Int(i128),
    Float(f64),
    /// Canonical decimal text (as [`logical::decimal`] writes it).
    Dec(String),
}

fn tag<'a>(y: &'a J, key: &str) -> Option<&'a J> {
    y.as_object().filter(|o| o.len() <= 3)?.get(key)
}

fn num(y: &J) -> Option<Num> {
    if let Some(s) = tag(y, "i").and_then(J::as_str) {
        return match s.parse::<i128>() {
            Ok(i) => Some(Num::Int(i)),
            Err(_) => Some(Num::Dec(canonical(&dec_text(s, 0)?))),
        };
    }
    if let Some(s) = tag(y, "f").and_then(J::as_str) {
        let f = match s {
            "nan" => f64::NAN,
            "inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            s => s.parse().ok()?,
        };
        return Some(Num::Float(f));
    }
    if let Some(d) = tag(y, "d").and_then(J::as_array) {
        let digits = d.first()?.as_str()?;
        let exp = d.get(1)?.as_i64()?;
        return Some(Num::Dec(canonical(&dec_text(digits, exp)?)));
    }
    None
}

/// `digits` (with an optional `-`) times ten to `exp`, as decimal text.
fn dec_text(digits: &str, exp: i64) -> Option<String> {
    if !(-400..=400).contains(&exp) {
        return None;
    }
    let (neg, d) = match digits.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, digits),
    };
    if d.is_empty() || !d.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let d = d.trim_start_matches('0');
    let d = if d.is_empty() { "0" } else { d };
    let body = if exp >= 0 {
        if d == "0" {
            "0".to_string()
        } else {
            format!("{d}{}", "0".repeat(exp as usize))
        }
    } else {
        let k = (-exp) as usize;
        if d.len() > k {
            format!("{}.{}", &d[..d.len() - k], &d[d.len() - k..])
        } else {
            format!("0.{}{d}", "0".repeat(k - d.len()))
        }
    };
    Some(if neg { format!("-{body}") } else { body })
}

fn canonical(s: &str) -> String {
    match logical::decimal(s.to_string()) {
        Value::Decimal(d) => d,
        _ => s.to_string(),
    }
}

/// The float as exact decimal text, when finite.
fn float_text(f: f64) -> Option<String> {
    f.is_finite().then(|| canonical(&format!("{f:.1100}")))
}

fn int_of_float(f: f64) -> Option<i128> {
    (f.is_finite() && f.fract() == 0.0 && f.abs() < 1e38).then_some(f as i128)
}

/// Nanoseconds per unit of a tagged temporal value.
fn unit_ns(y: &J) -> Option<i128> {
    match y.get("unit").and_then(J::as_str)? {
        "ns" => Some(1),
        "us" => Some(1_000),
        "ms" => Some(1_000_000),
        "s" => Some(1_000_000_000),
        _ => None,
    }
}

fn tagged_int(y: &J, key: &str) -> Option<i128> {
    match tag(y, key)? {
        J::String(s) => s.parse().ok(),
        J::Number(n) => n.as_i64().map(i128::from),
        _ => None,
    }
}

/// The view's temporal value: (what it counts, nanoseconds, unit in ns).
fn temporal(y: &J) -> Option<(&'static str, i128, i128)> {
    if let Some(days) = tagged_int(y, "date") {
        let u = 86_400_000_000_000;
        return Some(("timestamp", days * u, u));
    }
    for (key, kind) in [("ts", "timestamp"), ("time", "time"), ("dur", "duration")] {
        if let Some(n) = tagged_int(y, key) {
            let u = unit_ns(y)?;
            return Some((kind, n.checked_mul(u)?, u));
        }
    }
    None
}

/// `e` (ns) as a view holding units of `u` ns may show it: exactly, or
/// cut toward zero or down.
fn at_precision(e: i128, a: i128, u: i128) -> bool {
    a == e || a == e - e % u || a == e.div_euclid(u) * u
}

fn same_temporal(kind: &str, e: i128, y: &J) -> Outcome {
    let Some((k, a, u)) = temporal(y) else {
        return Outcome::Disagree;
    };
    let kinds_match = match kind {
        // A date is the wall clock time of its midnight; an instant is a
        // timestamp in UTC (an aware datetime is encoded so).
        "timestamp" | "instant" => k == "timestamp",
        other => other == k,
    };
    agree(kinds_match && at_precision(e, a, u))
}

fn not_mapped(what: String) -> Outcome {
    Outcome::NotCompared(what)
}

/// Whether the view's value `y` is the sent value `x`.
fn same(x: &Value, y: &J) -> Outcome {
    if let Some(t) = tag(y, "?").and_then(J::as_str) {
        return not_mapped(format!(
            "the view gives a {t}, which the comparison cannot map"
        ));
    }
    match (x, y) {
        (Value::Exact(e), _) => not_mapped(format!(
            "{} has no mapping to Python values here",
            e.0.data_type()
        )),
        (Value::Union(_, v), y) => same(v, y),
        (Value::Interval(0, 0, n), y) => same_temporal("duration", *n, y),
        (Value::Interval(..), _) => {
            not_mapped("an interval of months or days has no one Python form".into())
        }
        (Value::Null, J::Null) => Outcome::Agree,
        (Value::Null, _) | (_, J::Null) => Outcome::Disagree,
        (Value::Bool(b), J::Bool(c)) => agree(b == c),
        (Value::Int(i), y) => match num(y) {
            Some(Num::Int(j)) => agree(*i == j),
            Some(Num::Float(f)) => agree(int_of_float(f) == Some(*i) && f == *i as f64),
            Some(Num::Dec(d)) => agree(d == i.to_string()),
            None => Outcome::Disagree,
        },
        (Value::Float(bits), y) => {
            let f = f64::from_bits(*bits);
            match num(y) {
                Some(Num::Float(g)) => {
                    agree((f.is_nan() && g.is_nan()) || f.to_bits() == g.to_bits())
                }
                Some(Num::Int(j)) => agree(int_of_float(f) == Some(j) && f == j as f64),
                Some(Num::Dec(d)) => agree(float_text(f) == Some(d)),
                None => Outcome::Disagree,
            }
        }
        (Value::Decimal(s), y) => match num(y) {
            Some(Num::Dec(d)) => agree(*s == d),
            Some(Num::Int(j)) => agree(*s == j.to_string()),
            Some(Num::Float(g)) => {
                if float_text(g).as_deref() == Some(s.as_str()) {
                    Outcome::Agree
                } else {
                    not_mapped(
                        "the view gives a float for a decimal: its precision is not the data's"
                            .into(),
                    )
                }
            }
            None => Outcome::Disagree,
        },
        (Value::Text(t), J::String(s)) => agree(t == s.as_bytes()),
        (Value::Bytes(b), y) => match tag(y, "b").and_then(J::as_str) {
            Some(hex) => agree(hex_of(b) == hex),
            None => Outcome::Disagree,
        },
        // DuckDB's fetchall gives a date or time outside Python's range
        // as text.
        (Value::Temporal(..), J::String(_)) => not_mapped(
            "the view gives text for a date or time (outside what its Python type holds)".into(),
        ),
        (Value::Temporal(kind, e), y) => same_temporal(kind, *e, y),
        (Value::List(items), J::Array(ys)) => {
            if items.len() != ys.len() {
                return Outcome::Disagree;
            }
            all(items.iter().zip(ys))
        }
        (Value::List(items), y) => match tag(y, "map").and_then(J::as_array) {
            Some(entries) => map_entries(items, entries),
            None => Outcome::Disagree,
        },
        (Value::Struct(fields), J::Array(ys)) => {
            if fields.len() != ys.len() {
                return Outcome::Disagree;
            }
            all(fields.iter().zip(ys))
        }
        (Value::Struct(fields), y) => match tag(y, "map").and_then(J::as_array) {
            Some(entries) if entries.len() == fields.len() => {
                let values: Vec<&J> = entries
                    .iter()
                    .filter_map(|e| e.as_array().and_then(|p| p.get(1)))
                    .collect();
                if values.len() != fields.len() {
                    return Outcome::Disagree;
                }
                all(fields.iter().zip(values))
            }
            _ => Outcome::Disagree,
        },
        _ => Outcome::Disagree,
    }
}

/// A map's entries (a list of key-value structs) against a dict of the
/// view: DuckDB's `{"key": [...], "value": [...]}`, else key -> value.
fn map_entries(items: &[Value], entries: &[J]) -> Outcome {
    let pair = |e: &J| -> Option<(J, J)> {
        let p = e.as_array()?;
        Some((p.first()?.clone(), p.get(1)?.clone()))
    };
    let pairs: Option<Vec<(J, J)>> = entries.iter().map(pair).collect();
    let Some(pairs) = pairs else {
        return Outcome::Disagree;
    };
    let as_rows = |pairs: &[(J, J)]| -> Vec<J> {
        pairs
            .iter()
            .map(|(k, v)| J::Array(vec![k.clone(), v.clone()]))
            .collect()
    };
    let columnar = match pairs.as_slice() {
        [(J::String(k), J::Array(keys)), (J::String(v), J::Array(values))]
            if k == "key" && v == "value" && keys.len() == values.len() =>
        {
            Some(
                keys.iter()
                    .zip(values)
                    .map(|(k, v)| J::Array(vec![k.clone(), v.clone()]))
                    .collect::<Vec<J>>(),
            )
        }
        _ => None,
    };
    let direct = as_rows(&pairs);
    let try_rows = |rows: &[J]| -> Outcome {
        if rows.len() != items.len() {
            return Outcome::Disagree;
        }
        all(items.iter().zip(rows))
    };
    if let Some(rows) = columnar {
        let o = try_rows(&rows);
        if o != Outcome::Disagree {
            return o;
        }
    }
    try_rows(&direct)
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{
        ArrayRef, Decimal128Array, Float64Array, Int64Array, ListArray, StringArray,
        TimestampNanosecondArray,
    };
    use arrow_schema::{DataType, Field};

    use super::*;

    fn batch(cols: Vec<(&str, ArrayRef)>) -> (Schema, Vec<RecordBatch>) {
        let b = RecordBatch::try_from_iter(cols).unwrap();
        ((*b.schema()).clone(), vec![b])
    }

    #[test]
    fn the_same_values_agree_and_a_reversed_column_disagrees() {
        let (s, b) = batch(vec![
            (
                "x",
                Arc::new(Int64Array::from(vec![Some(1), None, Some(3)])) as ArrayRef,
            ),
            ("s", Arc::new(StringArray::from(vec!["a", "b", "c"]))),
        ]);
        let good = r#"{"columns": [[{"i": "1"}, null, {"i": "3"}], ["a", "b", "c"]], "names": ["x", "s"]}"#;
        let c = compare(&s, &b, good);
        assert_eq!((c.agreed, c.disagreements.len()), (6, 0), "{c:?}");
        let reversed =
            r#"{"columns": [[{"i": "3"}, null, {"i": "1"}], ["c", "b", "a"]], "names": null}"#;
        let c = compare(&s, &b, reversed);
        assert_eq!(c.disagreements.len(), 4, "{c:?}");
        assert!(c.disagreements[0].contains("column 0 \"x\" row 0"), "{c:?}");
    }

    #[test]
    fn numbers_compare_across_kinds_and_nan_equals_nan() {
        let (s, b) = batch(vec![
            (
                "f",
                Arc::new(Float64Array::from(vec![f64::NAN, 1.5, 2.0])) as ArrayRef,
            ),
            (
                "d",
                Arc::new(
                    Decimal128Array::from(vec![150, -5, 0])
                        .with_precision_and_scale(5, 2)
                        .unwrap(),
                ),
            ),
        ]);
        let view = r#"{"columns": [[{"f": "nan"}, {"f": "1.5"}, {"i": "2"}],
            [{"d": ["15", -1]}, {"d": ["-5", -2]}, {"d": ["0", -2]}]], "names": null}"#;
        let c = compare(&s, &b, view);
        assert_eq!((c.agreed, c.disagreements.len()), (6, 0), "{c:?}");
        let wrong = r#"{"columns": [[{"f": "1.0"}, {"f": "1.5"}, {"i": "2"}],
            [{"d": ["15", -1]}, {"d": ["5", -2]}, {"d": ["0", -2]}]], "names": null}"#;
        assert_eq!(compare(&s, &b, wrong).disagreements.len(), 2);
    }

    #[test]
    fn timestamps_compare_at_the_views_precision() {
        let (s, b) = batch(vec![(
            "t",
            Arc::new(TimestampNanosecondArray::from(vec![1_500, -1_500])) as ArrayRef,
        )]);
        // Microseconds: 1500 ns cut to 1 us; -1500 ns down to -2 us or
        // toward zero to -1 us.
        for v in [
            r#"[{"ts": "1", "unit": "us", "tz": false}, {"ts": "-2", "unit": "us", "tz": false}]"#,
            r#"[{"ts": "1500", "unit": "ns", "tz": false}, {"ts": "-1", "unit": "us", "tz": false}]"#,
        ] {
            let c = compare(&s, &b, &format!(r#"{{"columns": [{v}]}}"#));
            assert_eq!((c.agreed, c.disagreements.len()), (2, 0), "{v}: {c:?}");
        }
        let c = compare(
            &s,
            &b,
            r#"{"columns": [[{"ts": "2", "unit": "us"}, {"ts": "-1", "unit": "us"}]]}"#,
        );
        assert_eq!(c.disagreements.len(), 1, "{c:?}");
    }

    #[test]
    fn what_cannot_be_mapped_is_not_compared_never_agreed() {
        let (s, b) = batch(vec![(
            "x",
            Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef,
        )]);
        let c = compare(&s, &b, r#"{"columns": [[{"?": "uuid.UUID"}, {"i": "2"}]]}"#);
        assert_eq!((c.agreed, c.disagreements.len()), (1, 0), "{c:?}");
        assert!(
            c.not_compared[0].contains("1 value(s), the view gives a uuid.UUID"),
            "{c:?}"
        );
        let c = compare(&s, &b, r#"{"error": "builtins.ValueError: no"}"#);
        assert_eq!(c.agreed, 0);
        assert!(c.not_compared[0].contains("values(obj) raised"), "{c:?}");
        // Duplicate column names and a dict view: not compared.
        let dup = Schema::new(vec![
            Field::new("a", DataType::Int64, false),
            Field::new("a", DataType::Int64, false),
        ]);
        let bb = RecordBatch::try_new(
            Arc::new(dup.clone()),
            vec![
                Arc::new(Int64Array::from(vec![1])) as ArrayRef,
                Arc::new(Int64Array::from(vec![2])),
            ],
        )
        .unwrap();
        let c = compare(
            &dup,
            &[bb],
            r#"{"columns": [[{"i": "2"}]], "names": ["a"]}"#,
        );
        assert!(
            c.disagreements.is_empty() && c.not_compared.len() == 1,
            "{c:?}"
        );
    }

    #[test]
    fn lists_and_maps_compare_in_each_form_a_library_gives() {
        let list = ListArray::from_iter_primitive::<arrow_array::types::Int32Type, _, _>(vec![
            Some(vec![Some(1), None]),
            None,
        ]);
        let (s, b) = batch(vec![("l", Arc::new(list) as ArrayRef)]);
        let c = compare(&s, &b, r#"{"columns": [[[{"i": "1"}, null], null]]}"#);
        assert_eq!((c.agreed, c.disagreements.len()), (2, 0), "{c:?}");
        let c = compare(&s, &b, r#"{"columns": [[[{"i": "1"}], null]]}"#);
        assert_eq!(c.disagreements.len(), 1, "{c:?}");
        // A map: pairs, DuckDB's columnar dict, a plain dict.
        let mut m = arrow_array::builder::MapBuilder::new(
            None,
            arrow_array::builder::StringBuilder::new(),
            arrow_array::builder::Int64Builder::new(),
        );
        m.keys().append_value("k");
        m.values().append_value(7);
        m.append(true).unwrap();
        let (s, b) = batch(vec![("m", Arc::new(m.finish()) as ArrayRef)]);
        for v in [
            r#"[[["k", {"i": "7"}]]]"#,
            r#"[{"map": [["key", ["k"]], ["value", [{"i": "7"}]]]}]"#,
            r#"[{"map": [["k", {"i": "7"}]]}]"#,
            r#"[[{"map": [["key", "k"], ["value", {"i": "7"}]]}]]"#,
        ] {
            let c = compare(&s, &b, &format!(r#"{{"columns": [{v}]}}"#));
            assert_eq!((c.agreed, c.disagreements.len()), (1, 0), "{v}: {c:?}");
        }
        let c = compare(&s, &b, r#"{"columns": [[{"map": [["k", {"i": "8"}]]}]]}"#);
        assert_eq!(c.disagreements.len(), 1, "{c:?}");
    }

    #[test]
    fn decimal_text_is_placed_by_its_exponent() {
        assert_eq!(dec_text("123", -2).as_deref(), Some("1.23"));
        assert_eq!(dec_text("-5", -3).as_deref(), Some("-0.005"));
        assert_eq!(dec_text("12", 2).as_deref(), Some("1200"));
        assert_eq!(canonical(&dec_text("-000", -2).unwrap()), "0");
    }
}
