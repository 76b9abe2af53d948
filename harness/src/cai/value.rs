//! A Python value as the bridge describes it (`_cai_enc` in
//! `plugins/python/bridge.py`): typed JSON, so that the checker judges the
//! Python types the CUDA Array Interface names (a tuple, not a list; an int,
//! not a bool), not only the values.

use std::collections::BTreeMap;

/// One Python value of a `__cuda_array_interface__` dict.
#[derive(Debug, Clone, PartialEq)]
pub enum Py {
    None,
    Bool(bool),
    Int(i128),
    /// An int beyond 128 bits, as Python printed it.
    BigInt(String),
    Float(String),
    Str(String),
    Bytes(String),
    Tuple(Vec<Py>),
    List(Vec<Py>),
    /// A dict (or subclass, named) with its str keys.
    Dict(String, BTreeMap<String, Py>),
    /// Any other object: its type, and its own `__cuda_array_interface__`
    /// when it has one (`Err` when reading it raised).
    Object {
        type_name: String,
        cai: Option<Result<Box<Py>, String>>,
    },
}

impl Py {
    /// Decodes the bridge's JSON; `Err` says what was not understood.
    pub fn from_json(v: &serde_json::Value) -> Result<Py, String> {
        let t = v["t"]
            .as_str()
            .ok_or_else(|| format!("no type tag in {v}"))?;
        let text = || v["v"].as_str().unwrap_or("").to_string();
        let items = || -> Result<Vec<Py>, String> {
            v["v"]
                .as_array()
                .ok_or_else(|| format!("{t} without items"))?
                .iter()
                .map(Py::from_json)
                .collect()
        };
        Ok(match t {
            "none" => Py::None,
            "bool" => Py::Bool(v["v"].as_bool().ok_or("bool without a value")?),
            "int" => match &v["v"] {
                serde_json::Value::Number(n) => n
                    .as_i64()
                    .map(i128::from)
                    .or_else(|| n.as_u64().map(i128::from))
                    .map(Py::Int)
                    .ok_or_else(|| format!("int {n}"))?,
                serde_json::Value::String(s) => Py::BigInt(s.clone()),
                other => return Err(format!("int {other}")),
            },
            "float" => Py::Float(text()),
            "str" => Py::Str(text()),
            "bytes" => Py::Bytes(text()),
            "tuple" => Py::Tuple(items()?),
            "list" => Py::List(items()?),
            "dict" => Py::Dict(
                v["type"].as_str().unwrap_or("dict").to_string(),
                v["v"]
                    .as_object()
                    .ok_or("dict without entries")?
                    .iter()
                    .map(|(k, x)| Ok((k.clone(), Py::from_json(x)?)))
                    .collect::<Result<_, String>>()?,
            ),
            "object" => Py::Object {
                type_name: v["type"].as_str().unwrap_or("?").to_string(),
                cai: if let Some(c) = v.get("cai") {
                    Some(Ok(Box::new(Py::from_json(c)?)))
                } else {
                    v.get("cai_error")
                        .map(|e| Err(e["message"].as_str().unwrap_or("").to_string()))
                },
            },
            other => return Err(format!("unknown type tag {other}")),
        })
    }

    /// Python's name for the value's type.
    pub fn type_name(&self) -> &str {
        match self {
            Py::None => "NoneType",
            Py::Bool(_) => "bool",
            Py::Int(_) | Py::BigInt(_) => "int",
            Py::Float(_) => "float",
            Py::Str(_) => "str",
            Py::Bytes(_) => "bytes",
            Py::Tuple(_) => "tuple",
            Py::List(_) => "list",
            Py::Dict(name, _) => name,
            Py::Object { type_name, .. } => type_name,
        }
    }

    /// A short rendering for evidence.
    pub fn show(&self) -> String {
        let seq = |items: &[Py], open: &str, close: &str| {
            let inner: Vec<String> = items.iter().map(Py::show).collect();
            let comma = if open == "(" && items.len() == 1 {
                ","
            } else {
                ""
            };
            format!("{open}{}{comma}{close}", inner.join(", "))
        };
        let s = match self {
            Py::None => "None".into(),
            Py::Bool(b) => if *b { "True" } else { "False" }.into(),
            Py::Int(i) => i.to_string(),
            Py::BigInt(s) | Py::Float(s) | Py::Bytes(s) => s.clone(),
            Py::Str(s) => format!("{s:?}"),
            Py::Tuple(v) => seq(v, "(", ")"),
            Py::List(v) => seq(v, "[", "]"),
            Py::Dict(name, _) => format!("<{name}>"),
            Py::Object { type_name, .. } => format!("<{type_name} object>"),
        };
        if s.len() > 120 {
            format!("{}...", s.chars().take(117).collect::<String>())
        } else {
            s
        }
    }

    /// An int (a bool is not one), if it fits in i128.
    pub fn int(&self) -> Option<i128> {
        match self {
            Py::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The items of a tuple or a list (the harness reads either; the
    /// rules judge which it is).
    pub fn items(&self) -> Option<&[Py]> {
        match self {
            Py::Tuple(v) | Py::List(v) => Some(v),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_the_bridges_encoding() {
        let v = json!({"t": "dict", "type": "dict", "v": {
            "shape": {"t": "tuple", "v": [{"t": "int", "v": 3}]},
            "data": {"t": "tuple", "v": [{"t": "int", "v": 18446744073709551615u64}, {"t": "bool", "v": false}]},
            "big": {"t": "int", "v": "340282366920938463463374607431768211456"},
            "mask": {"t": "object", "type": "M", "cai": {"t": "none"}},
        }});
        let Py::Dict(_, d) = Py::from_json(&v).unwrap() else {
            panic!()
        };
        assert_eq!(d["shape"].show(), "(3,)");
        assert_eq!(d["data"].items().unwrap()[0].int(), Some(u64::MAX as i128));
        assert_eq!(d["data"].items().unwrap()[1], Py::Bool(false));
        assert!(matches!(d["big"], Py::BigInt(_)));
        assert!(matches!(
            &d["mask"],
            Py::Object {
                cai: Some(Ok(_)),
                ..
            }
        ));
        assert!(Py::from_json(&json!({"t": "nope"})).is_err());
        assert!(Py::from_json(&json!({})).is_err());
    }
}
