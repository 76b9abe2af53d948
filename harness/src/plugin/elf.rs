//! A look at a file's ELF header before `dlopen`, so that "not a shared
//! object" and "wrong architecture" get a clear message instead of the
//! dynamic loader's.

use std::io::Read;
use std::path::Path;

/// What is wrong with a file that cannot be a plugin for this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElfProblem {
    NotElf,
    NotSharedObject { elf_type: &'static str },
    WrongClass { found_bits: u32, expected_bits: u32 },
    WrongArchitecture { found: String, expected: String },
}

impl std::fmt::Display for ElfProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ElfProblem::NotElf => write!(f, "not a shared library (no ELF header)"),
            ElfProblem::NotSharedObject { elf_type } => {
                write!(f, "not a shared library (ELF type {elf_type})")
            }
            ElfProblem::WrongClass {
                found_bits,
                expected_bits,
            } => write!(
                f,
                "wrong architecture: a {found_bits}-bit library, this harness is {expected_bits}-bit"
            ),
            ElfProblem::WrongArchitecture { found, expected } => write!(
                f,
                "wrong architecture: built for {found}, this harness runs on {expected}"
            ),
        }
    }
}

const EM_X86_64: u16 = 62;
const EM_AARCH64: u16 = 183;

fn machine_name(m: u16) -> String {
    match m {
        3 => "x86 (i386)".into(),
        8 => "mips".into(),
        20 => "powerpc".into(),
        21 => "powerpc64".into(),
        22 => "s390".into(),
        40 => "arm".into(),
        EM_X86_64 => "x86_64".into(),
        EM_AARCH64 => "aarch64".into(),
        243 => "riscv".into(),
        258 => "loongarch".into(),
        other => format!("ELF machine {other}"),
    }
}

fn host_machine() -> Option<u16> {
    if cfg!(target_arch = "x86_64") {
        Some(EM_X86_64)
    } else if cfg!(target_arch = "aarch64") {
        Some(EM_AARCH64)
    } else {
        None
    }
}

/// Checks the ELF header of `path`. `Ok(())` when it is a shared object for
/// this machine (or the header cannot tell, in which case dlopen decides).
pub fn check(path: &Path) -> std::io::Result<Result<(), ElfProblem>> {
    let mut header = [0u8; 64];
    let mut file = std::fs::File::open(path)?;
    let mut read = 0;
    while read < header.len() {
        let n = file.read(&mut header[read..])?;
        if n == 0 {
            break;
        }
        read += n;
    }
    Ok(check_header(&header[..read]))
}

/// [`check`] on the first bytes of a file.
pub fn check_header(h: &[u8]) -> Result<(), ElfProblem> {
    if h.len() < 20 || &h[..4] != b"\x7fELF" {
        return Err(ElfProblem::NotElf);
    }
    let bits = match h[4] {
        1 => 32,
        2 => 64,
        _ => return Err(ElfProblem::NotElf),
    };
    let expected_bits = (std::mem::size_of::<usize>() * 8) as u32;
    let little = match h[5] {
        1 => true,
        2 => false,
        _ => return Err(ElfProblem::NotElf),
    };
    let u16_at = |i: usize| {
        let b = [h[i], h[i + 1]];
        if little {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        }
    };
    let elf_type = u16_at(16);
    let machine = u16_at(18);
    if let Some(host) = host_machine() {
        if machine != host {
            return Err(ElfProblem::WrongArchitecture {
                found: machine_name(machine),
                expected: machine_name(host),
            });
        }
    }
    if bits != expected_bits {
        return Err(ElfProblem::WrongClass {
            found_bits: bits,
            expected_bits,
        });
    }
    match elf_type {
        3 => Ok(()),
        1 => Err(ElfProblem::NotSharedObject {
            elf_type: "REL, an object file",
        }),
        2 => Err(ElfProblem::NotSharedObject {
            elf_type: "EXEC, an executable",
        }),
        4 => Err(ElfProblem::NotSharedObject {
            elf_type: "CORE, a core dump",
        }),
        _ => Err(ElfProblem::NotSharedObject {
            elf_type: "unknown",
        }),
    }
}
