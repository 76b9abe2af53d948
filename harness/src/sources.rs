//! Where a run's scenarios come from: the built-in ones, Arrow's gold
//! files, generated ones, or a list of names. Above both `scenario` (the
//! data and its fixed sources) and `generate` (the generator), which it
//! chooses between, so that neither depends on the other's way back.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use crate::scenario::Scenario;

/// Where a run's scenarios come from. Workers rebuild the same list from
/// `to_args`, so plan indexes agree across processes.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Sources {
    /// The built-in scenarios.
    pub builtin: bool,
    /// Every `*.stream` file of this directory, as `gold/<stem>`.
    pub gold: Option<PathBuf>,
    /// Generated scenarios `gen/0` .. `gen/<generated-1>`.
    pub generated: u64,
    /// With generated scenarios, also one single-type scenario per type
    /// family the generator knows (`gen/type:<family>`): a library that
    /// refuses one column of a mixed scenario refuses the whole scenario,
    /// so the types it does take need scenarios of their own; and the
    /// data shapes draws do not make (`gen/shape:<name>`).
    #[serde(default)]
    pub single_types: bool,
    /// The seed generated scenarios are drawn with.
    pub seed: u64,
    /// Only these scenarios, by name (a replay, a shrink candidate), in
    /// this order; `gen/...` names are rebuilt from `seed`, `gold/...`
    /// names need `gold`.
    pub only: Option<Vec<String>>,
}

impl Sources {
    /// The built-in scenarios, or (given a directory) the gold files alone.
    pub fn builtin_or_gold(gold: Option<PathBuf>) -> Sources {
        Sources {
            builtin: gold.is_none(),
            gold,
            ..Default::default()
        }
    }

    /// Loads the scenarios, in a stable order: built-in, gold, generated.
    pub fn load(&self) -> Result<Vec<Scenario>, String> {
        self.load_cached(None)
    }

    /// [`load`](Self::load), with the generated and single-type scenarios
    /// kept in `cache` (a directory only this run writes: the workers'
    /// scratch directory) as their IPC bytes: a worker starts again after
    /// every crash, and drawing and encoding them again was most of its
    /// start-up's own time. A scenario read back is decoded from the very
    /// bytes its drawing encoded ([`crate::generate::build`] decodes them
    /// too), so it is the same scenario; a cache file that is missing,
    /// partial or unreadable is drawn again.
    pub fn load_cached(&self, cache: Option<&Path>) -> Result<Vec<Scenario>, String> {
        if let Some(names) = &self.only {
            let gold = match &self.gold {
                Some(dir) if names.iter().any(|n| n.starts_with("gold/")) => {
                    crate::scenario::gold_dir(dir)?
                }
                _ => Vec::new(),
            };
            return names
                .iter()
                .map(|n| {
                    if n.starts_with(crate::generate::PREFIX) {
                        return crate::generate::scenario(self.seed, n);
                    }
                    let pool: Box<dyn Iterator<Item = Scenario>> = if n.starts_with("gold/") {
                        if self.gold.is_none() {
                            return Err(format!("{n}: a gold scenario needs --gold DIR"));
                        }
                        Box::new(gold.iter().cloned())
                    } else {
                        Box::new(crate::scenario::builtin().into_iter())
                    };
                    let mut pool = pool;
                    pool.find(|s| &s.name == n)
                        .ok_or_else(|| format!("{n}: no such scenario"))
                })
                .collect();
        }
        let mut out = Vec::new();
        if self.builtin {
            out.extend(crate::scenario::builtin());
        }
        if let Some(dir) = &self.gold {
            out.extend(crate::scenario::gold_dir(dir)?);
        }
        if self.generated > 0 {
            let file = format!("scenarios-gen-{}-{}", self.seed, self.generated);
            out.extend(cache::through(cache, &file, || {
                crate::generate::scenarios(self.seed, self.generated)
            })?);
        }
        if self.single_types {
            let file = format!("scenarios-type-{}", self.seed);
            out.extend(cache::through(cache, &file, || {
                crate::generate::type_scenarios(self.seed)
            })?);
            out.extend(crate::generate::shapes::scenarios(self.seed)?);
        }
        Ok(out)
    }

    /// For reports and headers: `built-in + 100 generated (seed 7) + DIR`.
    pub fn describe(&self) -> String {
        if let Some(names) = &self.only {
            return names.join(", ");
        }
        let mut parts = Vec::new();
        if self.builtin {
            parts.push("built-in".to_string());
        }
        if let Some(dir) = &self.gold {
            parts.push(dir.display().to_string());
        }
        if self.generated > 0 {
            parts.push(format!("{} generated (seed {})", self.generated, self.seed));
        }
        if self.single_types {
            parts.push(format!(
                "{} single-type and {} shapes (seed {})",
                crate::generate::types::family_names().len(),
                crate::generate::shapes::NAMES.len(),
                self.seed
            ));
        }
        parts.join(" + ")
    }

    /// Worker command-line arguments that rebuild these sources.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if !self.builtin {
            args.push("--no-builtin".to_string());
        }
        if let Some(dir) = &self.gold {
            args.push("--gold".into());
            args.push(
                std::fs::canonicalize(dir)
                    .unwrap_or_else(|_| dir.clone())
                    .display()
                    .to_string(),
            );
        }
        args.extend(["--seed".to_string(), self.seed.to_string()]);
        args.extend(["--generated".to_string(), self.generated.to_string()]);
        if self.single_types {
            args.push("--single-types".into());
        }
        for n in self.only.iter().flatten() {
            args.push("--scenario".into());
            args.push(n.clone());
        }
        args
    }
}

/// The generated scenarios of a run, kept as files of their IPC bytes
/// ([`Sources::load_cached`]).
mod cache {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    use std::path::Path;

    use crate::scenario::Scenario;

    const MAGIC: &[u8] = b"arrowcert scenarios 1\n";

    /// The scenarios kept in `dir/file`, else those `make` makes (then
    /// kept there for the next process).
    pub(super) fn through(
        dir: Option<&Path>,
        file: &str,
        make: impl FnOnce() -> Result<Vec<Scenario>, String>,
    ) -> Result<Vec<Scenario>, String> {
        let Some(dir) = dir else { return make() };
        let path = dir.join(file);
        if let Some(kept) = std::fs::read(&path).ok().and_then(|b| decode(&b)) {
            return Ok(kept);
        }
        let made = make()?;
        // Written whole under another name, then renamed: a reader sees a
        // complete file or none. Failing to keep it costs time only.
        let tmp = dir.join(format!("{file}.{}.tmp", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o400)
            .open(&tmp)
            .and_then(|mut f| f.write_all(&encode(&made)))
            .and_then(|_| std::fs::rename(&tmp, &path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        Ok(made)
    }

    fn encode(scenarios: &[Scenario]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        let u64s = |out: &mut Vec<u8>, v: u64| out.extend_from_slice(&v.to_le_bytes());
        u64s(&mut out, scenarios.len() as u64);
        for s in scenarios {
            u64s(&mut out, s.name.len() as u64);
            out.extend_from_slice(s.name.as_bytes());
            match &s.slices {
                None => u64s(&mut out, u64::MAX),
                Some(slices) => {
                    u64s(&mut out, slices.len() as u64);
                    for &(offset, length) in slices {
                        u64s(&mut out, offset as u64);
                        u64s(&mut out, length as u64);
                    }
                }
            }
            u64s(&mut out, s.ipc.len() as u64);
            out.extend_from_slice(&s.ipc);
        }
        out
    }

    /// `None` for anything but a whole file [`encode`] wrote.
    fn decode(bytes: &[u8]) -> Option<Vec<Scenario>> {
        let mut rest = bytes.strip_prefix(MAGIC)?;
        let mut next = |n: usize| -> Option<&[u8]> {
            (rest.len() >= n).then(|| {
                let (head, tail) = rest.split_at(n);
                rest = tail;
                head
            })
        };
        fn u64_of(b: &[u8]) -> u64 {
            u64::from_le_bytes(b.try_into().expect("8 bytes"))
        }
        let count = u64_of(next(8)?);
        let mut out = Vec::new();
        for _ in 0..count {
            let len = usize::try_from(u64_of(next(8)?)).ok()?;
            let name = std::str::from_utf8(next(len)?).ok()?.to_string();
            let slices = match u64_of(next(8)?) {
                u64::MAX => None,
                n => {
                    let mut v = Vec::new();
                    for _ in 0..n {
                        let offset = usize::try_from(u64_of(next(8)?)).ok()?;
                        let length = usize::try_from(u64_of(next(8)?)).ok()?;
                        v.push((offset, length));
                    }
                    Some(v)
                }
            };
            let len = usize::try_from(u64_of(next(8)?)).ok()?;
            let ipc = next(len)?.to_vec();
            let mut s = Scenario::from_ipc(&name, ipc).ok()?;
            s.slices = slices;
            out.push(s);
        }
        next(1).is_none().then_some(out)
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::sources::Sources;

        fn sources() -> Sources {
            Sources {
                generated: 12,
                single_types: true,
                seed: 20261122,
                ..Default::default()
            }
        }

        /// A fresh directory of this test's own.
        fn dir(test: &str) -> std::path::PathBuf {
            let d = std::env::temp_dir().join(format!(
                "arrowcert-scenario-cache-{test}-{}",
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            d
        }

        fn same(a: &[Scenario], b: &[Scenario]) {
            assert_eq!(a.len(), b.len());
            for (x, y) in a.iter().zip(b) {
                assert_eq!(x.name, y.name);
                assert_eq!(x.ipc, y.ipc, "{}", x.name);
                assert_eq!(x.slices, y.slices, "{}", x.name);
                assert_eq!(x.schema, y.schema, "{}", x.name);
                assert_eq!(x.batches, y.batches, "{}", x.name);
            }
        }

        #[test]
        fn scenarios_read_back_from_the_cache_are_the_drawn_ones() {
            let dir = dir("same");
            let drawn = sources().load().unwrap();
            // The first load draws and keeps them, the second reads them.
            same(&sources().load_cached(Some(dir.as_path())).unwrap(), &drawn);
            let kept: Vec<_> = std::fs::read_dir(dir.as_path()).unwrap().collect();
            assert_eq!(kept.len(), 2, "one file per drawn family: {kept:?}");
            same(&sources().load_cached(Some(dir.as_path())).unwrap(), &drawn);
            assert!(drawn.iter().any(|s| s.slices.is_some()));
            let _ = std::fs::remove_dir_all(&dir);
        }

        #[test]
        fn a_damaged_cache_file_is_drawn_again() {
            let dir = dir("damaged");
            let drawn = sources().load().unwrap();
            sources().load_cached(Some(dir.as_path())).unwrap();
            let file = dir.as_path().join("scenarios-gen-20261122-12");
            let whole = std::fs::read(&file).unwrap();
            assert!(decode(&whole).is_some());
            for cut in [whole.len() - 1, whole.len() / 2, MAGIC.len() + 3, 0] {
                assert!(decode(&whole[..cut]).is_none(), "cut at {cut}");
            }
            let mut longer = whole.clone();
            longer.push(0);
            assert!(decode(&longer).is_none());
            std::fs::remove_file(&file).unwrap();
            std::fs::write(&file, &whole[..whole.len() / 2]).unwrap();
            same(&sources().load_cached(Some(dir.as_path())).unwrap(), &drawn);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
