//! Layout descriptors of the ABI structures and the C-compiler cross-check.
//!
//! Every struct in [`super`] is declared through `abi_struct!`, which records
//! the size, alignment and every field's offset and size as Rust computes
//! them. [`c_probe_source`] turns that list into a C program that prints the
//! same facts as the C compiler sees them through a header, and
//! [`compare_with_c`] reports every disagreement. The field lists are never
//! written twice: the macro derives them from the struct definition itself.

use std::fmt;

/// One field of a `#[repr(C)]` struct as Rust lays it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldLayout {
    pub name: &'static str,
    pub offset: usize,
    pub size: usize,
}

/// One `#[repr(C)]` struct as Rust lays it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StructLayout {
    /// The struct's tag in C (`struct <c_name>`).
    pub c_name: &'static str,
    pub size: usize,
    pub align: usize,
    pub fields: &'static [FieldLayout],
}

/// Implemented by every ABI struct through `abi_struct!`.
pub trait CLayout {
    const LAYOUT: StructLayout;
}

/// An integer constant that must have the same value in C and in Rust.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConstValue {
    pub c_name: &'static str,
    pub value: i64,
}

/// A disagreement between the Rust definitions and the C header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// `Struct`, `Struct.field` or a constant's name.
    pub item: String,
    /// `size`, `align`, `offset`, `value` or `missing`.
    pub property: &'static str,
    pub rust: String,
    pub c: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}: Rust says {}, C says {}",
            self.item, self.property, self.rust, self.c
        )
    }
}

/// C source that includes `header` and prints one line per fact:
/// `S <struct> <size> <align>`, `F <struct> <field> <offset> <size>`,
/// `C <constant> <value>`.
pub fn c_probe_source(header: &str, structs: &[StructLayout], consts: &[ConstValue]) -> String {
    c_probe_source_with(header, structs, consts, true)
}

/// [`c_probe_source`], naming each struct `struct <name>` when `tagged`,
/// else by its typedef name alone (DLPack's `typedef struct { ... } DLTensor;`
/// has no tag).
pub fn c_probe_source_with(
    header: &str,
    structs: &[StructLayout],
    consts: &[ConstValue],
    tagged: bool,
) -> String {
    let mut src = String::new();
    src.push_str("#include <stddef.h>\n#include <stdio.h>\n#include <stdalign.h>\n");
    src.push_str(&format!("#include \"{header}\"\n\nint main(void) {{\n"));
    for s in structs {
        let t = if tagged {
            format!("struct {}", s.c_name)
        } else {
            s.c_name.to_string()
        };
        src.push_str(&format!(
            "  printf(\"S {} %zu %zu\\n\", sizeof({t}), alignof({t}));\n",
            s.c_name
        ));
        for f in s.fields {
            src.push_str(&format!(
                "  printf(\"F {} {} %zu %zu\\n\", offsetof({t}, {}), sizeof((({t}*)0)->{}));\n",
                s.c_name, f.name, f.name, f.name
            ));
        }
    }
    for c in consts {
        src.push_str(&format!(
            "  printf(\"C {} %lld\\n\", (long long)({}));\n",
            c.c_name, c.c_name
        ));
    }
    src.push_str("  return 0;\n}\n");
    src
}

/// Compares what the C probe printed with the Rust layouts. An empty result
/// means the two agree on every struct, field and constant.
pub fn compare_with_c(
    structs: &[StructLayout],
    consts: &[ConstValue],
    probe_output: &str,
) -> Vec<Mismatch> {
    use std::collections::HashMap;
    let mut c_structs: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut c_fields: HashMap<(&str, &str), (usize, usize)> = HashMap::new();
    let mut c_consts: HashMap<&str, i64> = HashMap::new();
    for line in probe_output.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        match parts.as_slice() {
            ["S", name, size, align] => {
                if let (Ok(s), Ok(a)) = (size.parse(), align.parse()) {
                    c_structs.insert(name, (s, a));
                }
            }
            ["F", st, field, off, size] => {
                if let (Ok(o), Ok(s)) = (off.parse(), size.parse()) {
                    c_fields.insert((st, field), (o, s));
                }
            }
            ["C", name, value] => {
                if let Ok(v) = value.parse() {
                    c_consts.insert(name, v);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    let mut diff = |item: String, property: &'static str, rust: String, c: String| {
        if rust != c {
            out.push(Mismatch {
                item,
                property,
                rust,
                c,
            });
        }
    };
    for s in structs {
        match c_structs.get(s.c_name) {
            None => diff(
                s.c_name.to_string(),
                "missing",
                "defined".into(),
                "absent".into(),
            ),
            Some(&(size, align)) => {
                diff(
                    s.c_name.into(),
                    "size",
                    s.size.to_string(),
                    size.to_string(),
                );
                diff(
                    s.c_name.into(),
                    "align",
                    s.align.to_string(),
                    align.to_string(),
                );
            }
        }
        for f in s.fields {
            let item = format!("{}.{}", s.c_name, f.name);
            match c_fields.get(&(s.c_name, f.name)) {
                None => diff(item, "missing", "defined".into(), "absent".into()),
                Some(&(off, size)) => {
                    diff(
                        item.clone(),
                        "offset",
                        f.offset.to_string(),
                        off.to_string(),
                    );
                    diff(item, "size", f.size.to_string(), size.to_string());
                }
            }
        }
    }
    for c in consts {
        match c_consts.get(c.c_name) {
            None => diff(
                c.c_name.into(),
                "missing",
                "defined".into(),
                "absent".into(),
            ),
            Some(v) => diff(c.c_name.into(), "value", c.value.to_string(), v.to_string()),
        }
    }
    out
}

/// Compiles the C probe against `header` with the system C compiler (`$CC`,
/// else `cc`), runs it and compares. `Err` when the header does not compile
/// (a struct or field it lacks is a compile error) or no compiler runs.
pub fn check_header(header: &std::path::Path) -> Result<Vec<Mismatch>, String> {
    check_header_with(header, super::STRUCTS, super::CONSTANTS, true)
}

/// [`check_header`] for any set of structs and constants (`tagged`: as in
/// [`c_probe_source_with`]).
pub fn check_header_with(
    header: &std::path::Path,
    structs: &[StructLayout],
    consts: &[ConstValue],
    tagged: bool,
) -> Result<Vec<Mismatch>, String> {
    use std::process::Command;
    let header = header
        .canonicalize()
        .map_err(|e| format!("{}: {e}", header.display()))?;
    let dir = std::env::temp_dir().join(format!(
        "arrowcert-abi-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let src = dir.join("probe.c");
    let exe = dir.join("probe");
    let source = c_probe_source_with(&header.display().to_string(), structs, consts, tagged);
    std::fs::write(&src, source).map_err(|e| format!("{}: {e}", src.display()))?;
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .arg("-std=c11")
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .map_err(|e| format!("cannot run the C compiler `{cc}`: {e}"))?;
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(format!(
            "{} does not compile with the layout probe: {}",
            header.display(),
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .find(|l| l.contains("error"))
                .unwrap_or("")
        ));
    }
    let run = Command::new(&exe)
        .output()
        .map_err(|e| format!("cannot run the layout probe: {e}"))?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(compare_with_c(
        structs,
        consts,
        &String::from_utf8_lossy(&run.stdout),
    ))
}
