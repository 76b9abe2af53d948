//! Running workers under a checker: `arrowcert replay --under valgrind`.
//!
//! A crash that comes and goes (a read past a buffer that lands on mapped
//! memory one run and not the next) is traced by replaying its case in a
//! worker under valgrind's memcheck, which stops nothing but reports every
//! invalid access with its stack. The worker writes the log into a folder of
//! its own; [`first_error`] reads the first error back for the user.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

/// The checkers `--under` knows.
pub const CHECKERS: &[&str] = &["valgrind"];

/// The wrapper command (program and arguments, the worker's command line
/// goes after them) that runs a worker under `checker`, its logs written
/// into `logs`. One line on why not when the checker is unknown or not
/// installed.
pub fn wrapper(checker: &str, logs: &Path) -> Result<Vec<String>, String> {
    if checker != "valgrind" {
        return Err(format!(
            "--under {checker}: unknown checker (known: {})",
            CHECKERS.join(", ")
        ));
    }
    let program = find_on_path("valgrind").ok_or_else(|| {
        "--under valgrind: valgrind is not installed (not found on PATH; Debian: apt-get install valgrind)"
            .to_string()
    })?;
    Ok(vec![
        program.display().to_string(),
        "--tool=memcheck".into(),
        "--error-limit=no".into(),
        "--num-callers=16".into(),
        // The worker's own threads and the plugin's are one process; a
        // Python adapter's interpreter is loaded, not run as a child.
        "--trace-children=no".into(),
        format!("--log-file={}", logs.join("worker.%p.log").display()),
    ])
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

/// A folder of its own for the checker's logs, removed when dropped.
pub struct Logs(PathBuf);

impl Logs {
    pub fn new() -> std::io::Result<Logs> {
        let dir = std::env::temp_dir().join(format!("arrowcert-under-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        Ok(Logs(dir))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Logs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The kinds of memcheck error that begin a report block.
const ERROR_STARTS: &[&str] = &[
    "Invalid read",
    "Invalid write",
    "Invalid free",
    "Mismatched free",
    "Conditional jump or move depends on uninitialised value",
    "Use of uninitialised value",
    "Syscall param",
    "Source and destination overlap",
    "Process terminating with default action of signal",
];

/// The first error memcheck reported in any log in `logs` (its message and
/// stack, without the `==pid==` prefixes), or `None` when it saw none.
pub fn first_error(logs: &Path) -> Option<String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(logs)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    files
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .find_map(|text| first_error_in(&text))
}

/// [`first_error`] of one log's text.
pub fn first_error_in(log: &str) -> Option<String> {
    let body = |line: &str| -> String {
        // "==1234== text" -> "text"
        match line.strip_prefix("==").and_then(|r| r.split_once("== ")) {
            Some((pid, rest)) if pid.chars().all(|c| c.is_ascii_digit()) => rest.to_string(),
            _ => match line.strip_prefix("==").and_then(|r| r.split_once("==")) {
                Some((pid, rest)) if pid.chars().all(|c| c.is_ascii_digit()) => {
                    rest.trim().to_string()
                }
                _ => line.to_string(),
            },
        }
    };
    let mut lines = log.lines().map(body);
    loop {
        let first = lines.find(|l| ERROR_STARTS.iter().any(|s| l.starts_with(s)))?;
        let mut block = vec![first];
        for l in lines.by_ref() {
            if l.trim().is_empty() {
                break;
            }
            block.push(l);
        }
        if !in_the_dynamic_loader(&block) {
            return Some(block.join("\n"));
        }
    }
}

/// Whether every frame of an error's own stack (before its "Address" or
/// origin lines) is the dynamic loader's or the string routine it called:
/// memcheck flags glibc's word-at-a-time `strncmp` over `dlopen`'s own
/// `strdup`ed RPATH strings (seen on Debian's glibc for every library with
/// an RPATH). Those reads are not the library's nor the harness's, so the
/// first error worth printing is the next one.
fn in_the_dynamic_loader(block: &[String]) -> bool {
    let frames: Vec<&str> = block[1..]
        .iter()
        .map(|l| l.trim())
        .take_while(|l| l.starts_with("at ") || l.starts_with("by "))
        .collect();
    let loader_file = |frame: &str| {
        let Some(file) = frame
            .rsplit_once('(')
            .and_then(|(_, f)| f.split(':').next())
            .map(|f| f.trim_end_matches(')'))
        else {
            return false;
        };
        file.starts_with("dl-")
            || file.starts_with("rtld")
            || matches!(file, "dlopen.c" | "dlerror.c" | "strdup.c")
            || (file.starts_with("str") && file.ends_with(".S"))
    };
    !frames.is_empty() && frames.iter().all(|f| loader_file(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "==4242== Memcheck, a memory error detector
==4242== Command: arrowcert worker --socket /tmp/x.sock
==4242== 
==4242== Invalid read of size 8
==4242==    at 0x4C2F1A0: read_values (consumer.c:42)
==4242==    by 0x4C2F2B1: consume (consumer.c:90)
==4242==  Address 0x5a1b040 is 0 bytes after a block of size 64 alloc'd
==4242== 
==4242== Invalid write of size 4
==4242==    at 0x1: elsewhere (x.c:1)
==4242== 
";

    #[test]
    fn the_first_error_block_comes_back_without_prefixes() {
        let e = first_error_in(LOG).unwrap();
        assert!(e.starts_with("Invalid read of size 8"), "{e}");
        assert!(
            e.contains("at 0x4C2F1A0: read_values (consumer.c:42)"),
            "{e}"
        );
        assert!(e.contains("0 bytes after a block of size 64"), "{e}");
        assert!(!e.contains("Invalid write"), "{e}");
        assert!(!e.contains("==4242=="), "{e}");
    }

    #[test]
    fn errors_inside_the_dynamic_loader_are_passed_over() {
        let log = "==7== Invalid read of size 8
==7==    at 0x4023C6C: strncmp (strcmp-sse2.S:160)
==7==    by 0x4004BEE: is_dst (dl-load.c:216)
==7==    by 0x49004B7: dlopen_doit (dlopen.c:56)
==7==  Address 0x4adaa61 is 1 bytes inside a block of size 8 alloc'd
==7==    at 0x48417B4: malloc (in /usr/libexec/valgrind/vgpreload_memcheck-amd64-linux.so)
==7== 
==7== Invalid read of size 8
==7==    at 0x51: on_next_task (handler.rs:10)
==7==    by 0x52: cancel (producer.cc:20)
==7== 
";
        let e = first_error_in(log).unwrap();
        assert!(e.contains("on_next_task (handler.rs:10)"), "{e}");
        assert!(!e.contains("strncmp"), "{e}");
        // Only loader errors: nothing worth printing.
        let only = log.split("==7== \n").next().unwrap();
        assert_eq!(first_error_in(only), None);
    }

    #[test]
    fn a_clean_log_has_no_error() {
        assert_eq!(
            first_error_in("==1== Memcheck\n==1== ERROR SUMMARY: 0 errors from 0 contexts\n"),
            None
        );
    }

    #[test]
    fn an_unknown_checker_is_one_line() {
        let e = wrapper("asan", Path::new("/tmp")).unwrap_err();
        assert!(e.contains("unknown checker") && !e.contains('\n'), "{e}");
    }
}
