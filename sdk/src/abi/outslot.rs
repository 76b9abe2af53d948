//! Out-structures handed to plugins live in memory of their own.
//!
//! A producer fills the `ArrowSchema`, `ArrowArray`, stream or device
//! structure the harness passes it, and returns. A thread the producer left
//! running could still write into that structure later: into the harness's
//! stack or heap, by then in use for something else (often the next case's
//! structures). The spec gives the consumer the structure once the call
//! returned: "The consumer is free to move the structure around (see
//! "Moving an array")."
//!
//! So the structure a plugin call fills is a slot of this arena, not the
//! caller's memory: the caller's structure is copied in before the call,
//! moved out right after it (a bitwise move, which the spec allows), and the
//! slot is filled with a poison pattern. Slots are never handed out again
//! while a worker lives. At the end of each case the slots of the last
//! [`WINDOW`] cases are checked: a slot whose poison changed was written
//! after its call returned (`array.out.untouched`), and the write landed in
//! memory no one uses, whatever case is running when it comes.
//!
//! The arena grows in [`CHUNK`]-byte mappings; a worker whose arena passed
//! [`WORKER_BUDGET`] ends after its case (a new one starts with an empty
//! arena), so slots are never reused and a late write is never charged to
//! the wrong case.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

/// The byte every free slot holds.
pub const POISON: u8 = crate::abi::POISON_BYTE;
/// Each mapping of the arena.
pub const CHUNK: usize = 1 << 20;
/// Cases whose slots are checked at the end of every case.
pub const WINDOW: usize = 8;
/// Arena bytes after which a worker ends after its case.
pub const WORKER_BUDGET: usize = 8 << 20;
/// Slots are aligned (and sized) in multiples of this.
const ALIGN: usize = 16;

/// A slot written after the call that used it had returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The case whose call used the slot.
    pub case: String,
    /// The plugin entry point (or stream callback) the slot was handed to.
    pub entry: &'static str,
    /// Bytes of the slot that no longer hold the poison.
    pub changed: usize,
    /// Size of the slot (the structure's size).
    pub size: usize,
    /// The first bytes of the slot as found (hex).
    pub found: String,
}

impl Damage {
    /// What a report says about it.
    pub fn evidence(&self) -> String {
        format!(
            "{} of the {} bytes of the structure `{}` filled were written after the call had returned \
             (the harness had moved the structure out and poisoned its old place with 0x{POISON:02x}; \
             found {}): a thread of the library still writes into memory the consumer owns",
            self.changed, self.size, self.entry, self.found
        )
    }
}

struct Used {
    addr: usize,
    size: usize,
    entry: &'static str,
    case: u64,
}

/// The slots handed out and the cases watching them. Slots are shared by
/// the whole process; cases are per thread (a thread that runs cases says
/// when each begins and ends; tests run cases on several threads at once).
struct Arena {
    /// The current chunk: where the next slot goes and where it ends.
    next: usize,
    end: usize,
    /// Bytes mapped so far.
    mapped: usize,
    /// Slots of watched cases, in the order they were used. A fixed table,
    /// not a `Vec`: the harness must not grow its malloc'd memory while a
    /// case's leak accounting runs (the allocation tracker counts every
    /// byte of the process). When it is full, further slots go unwatched.
    watched: Watched,
}

static ARENA: Mutex<Arena> = Mutex::new(Arena {
    next: 0,
    end: 0,
    mapped: 0,
    watched: Watched {
        used: [const { None }; WATCHED],
        len: 0,
    },
});

/// Slots watched at once (over the last [`WINDOW`] cases of every thread).
const WATCHED: usize = 16 * 1024;

struct Watched {
    used: [Option<Used>; WATCHED],
    len: usize,
}

impl Watched {
    fn iter(&self) -> impl Iterator<Item = &Used> {
        self.used[..self.len].iter().flatten()
    }
    fn push(&mut self, u: Used) {
        if self.len < WATCHED {
            self.used[self.len] = Some(u);
            self.len += 1;
        }
    }
    /// Keeps the slots `keep` says yes to, in order.
    fn retain(&mut self, keep: impl Fn(&Used) -> bool) {
        let mut to = 0;
        for from in 0..self.len {
            if let Some(u) = self.used[from].take() {
                if keep(&u) {
                    self.used[to] = Some(u);
                    to += 1;
                }
            }
        }
        self.len = to;
    }
}

static CASES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// This thread's cases: the running one (0: none), the IDs of its last
/// [`WINDOW`] cases (oldest first), and damage found in earlier ones.
#[derive(Default)]
struct Cases {
    running: u64,
    recent: VecDeque<(u64, String)>,
    earlier: Vec<Damage>,
}

thread_local! {
    static THREAD: std::cell::RefCell<Cases> = std::cell::RefCell::new(Cases::default());
    /// The case a thread's slots belong to: its own running case, or the
    /// case of the thread that started it for one call ([`adopt`]).
    static RUNNING: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn arena() -> MutexGuard<'static, Arena> {
    // A panic while holding the lock leaves consistent data (every update
    // is a single assignment or push).
    ARENA.lock().unwrap_or_else(|e| e.into_inner())
}

impl Arena {
    /// A fresh, poisoned slot of `size` bytes, or `None` when no memory
    /// could be mapped (the caller then uses its own structure).
    fn take(&mut self, size: usize) -> Option<usize> {
        let size = size.div_ceil(ALIGN) * ALIGN;
        if self.end - self.next < size {
            // SAFETY: an anonymous private mapping with no address hint
            // touches no existing memory; the result is checked.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    CHUNK,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return None;
            }
            // SAFETY: the CHUNK bytes just mapped, writable.
            unsafe { std::ptr::write_bytes(p.cast::<u8>(), POISON, CHUNK) };
            self.next = p as usize;
            self.end = self.next + CHUNK;
            self.mapped += CHUNK;
        }
        let at = self.next;
        self.next += size;
        Some(at)
    }

    /// Damage in the watched slots of `cases` (each reported once: the
    /// slot is poisoned again).
    fn sweep(&mut self, cases: &VecDeque<(u64, String)>) -> Vec<(u64, Damage)> {
        let mut found = Vec::new();
        for u in self.watched.iter() {
            let Some((_, id)) = cases.iter().find(|(n, _)| *n == u.case) else {
                continue;
            };
            // SAFETY: the slot is in a chunk that stays mapped for the
            // process's life; a racing write from a plugin thread is the
            // thing looked for, and only changes which bytes are seen.
            let bytes = unsafe { std::slice::from_raw_parts(u.addr as *const u8, u.size) };
            let changed = bytes.iter().filter(|&&b| b != POISON).count();
            if changed == 0 {
                continue;
            }
            let found_hex: String = bytes.iter().take(32).map(|b| format!("{b:02x}")).collect();
            found.push((
                u.case,
                Damage {
                    case: id.clone(),
                    entry: u.entry,
                    changed,
                    size: u.size,
                    found: found_hex,
                },
            ));
            // SAFETY: as above; poisoned again so it is reported once.
            unsafe { std::ptr::write_bytes(u.addr as *mut u8, POISON, u.size) };
        }
        found
    }
}

/// Calls `f` with a slot holding a copy of `*out` instead of `out` itself,
/// then moves the slot's content back into `*out` and poisons the slot.
/// `entry` names the plugin entry point or callback, for the evidence.
///
/// `T` must be one of the C ABI's plain structures (no drop glue: the copy
/// is bitwise, exactly as the spec's moves are).
pub fn call<T, R>(entry: &'static str, out: &mut T, f: impl FnOnce(&mut T) -> R) -> R {
    let size = std::mem::size_of::<T>();
    const {
        assert!(std::mem::align_of::<T>() <= ALIGN);
    }
    let slot = arena().take(size);
    let Some(slot) = slot else {
        return f(out);
    };
    let p = slot as *mut T;
    // SAFETY: `p` is a fresh, aligned slot of at least size_of::<T>()
    // bytes that nothing else uses; `out` is a valid T. The copy is a move
    // of a plain C structure (no drop glue), and `*out` is overwritten with
    // the result below before anyone reads it again.
    let r = unsafe {
        std::ptr::copy_nonoverlapping(out as *const T, p, 1);
        f(&mut *p)
    };
    // SAFETY: the call has returned; `p` still points into the slot, whose
    // bytes (whatever the plugin wrote) are moved back into `*out`.
    unsafe { std::ptr::copy_nonoverlapping(p as *const T, out as *mut T, 1) };
    let at = (out as *const T).addr();
    let word = std::mem::size_of::<usize>();
    let points_into_slot = (0..size / word).any(|i| {
        // SAFETY: `out` is a valid T of `size` bytes; words are read
        // unaligned, as plain integers.
        let w = unsafe { ((out as *const T).cast::<usize>()).add(i).read_unaligned() };
        w.wrapping_sub(slot) < size
    });
    let mut selfish = self_refs();
    for f in selfish.filled.iter_mut() {
        if f.as_ref().is_some_and(|f| f.at == at) {
            *f = None;
        }
    }
    if points_into_slot {
        // A structure that points into itself (which *.release.relocatable
        // reports): the slot keeps its content, so that what the pointers
        // reach is what the producer wrote, and the checks that look for
        // pointers into the structure look at both places ([`inside`]).
        // Such a slot is not watched.
        let next = selfish.next;
        selfish.filled[next % SELF_REFS] = Some(Filled { at, slot, size });
        selfish.next = next.wrapping_add(1);
        return r;
    }
    drop(selfish);
    // SAFETY: the slot is ours (never handed out again); poisoned.
    unsafe { std::ptr::write_bytes(slot as *mut u8, POISON, size) };
    let case = RUNNING.with(|c| c.get());
    if case != 0 {
        arena().watched.push(Used {
            addr: slot,
            size,
            entry,
            case,
        });
    }
    r
}

/// A structure now at `at` that was filled in `slot` and points into it.
struct Filled {
    at: usize,
    slot: usize,
    size: usize,
}

/// Structures remembered by [`inside`].
const SELF_REFS: usize = 64;

/// The last [`SELF_REFS`] of them, in a ring (no heap: see `Arena`).
struct Fills {
    filled: [Option<Filled>; SELF_REFS],
    next: usize,
}

static FILLED: Mutex<Fills> = Mutex::new(Fills {
    filled: [const { None }; SELF_REFS],
    next: 0,
});

fn self_refs() -> MutexGuard<'static, Fills> {
    FILLED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where `p` lies inside the `size`-byte structure at `start`, as an
/// offset: inside the structure itself or, when the structure was filled in
/// a slot and moved to `start` (see [`call`]), inside the place the producer
/// filled it in. "Pointer members inside the ArrowArray structure
/// (including private_data) MUST not point inside the structure itself."
pub fn inside(start: usize, size: usize, p: usize) -> Option<usize> {
    if let Some(d) = p.checked_sub(start).filter(|&d| d < size) {
        return Some(d);
    }
    // The structure may be a member of the one moved (the array of a
    // device array): the same offset into the slot.
    self_refs()
        .filled
        .iter()
        .flatten()
        .find(|f| start.wrapping_sub(f.at) < f.size)
        .and_then(|f| p.checked_sub(f.slot + (start - f.at)).filter(|&d| d < size))
}

/// The case running on this thread (0: none), for [`adopt`] on a thread
/// that makes one call for it.
pub fn running() -> u64 {
    RUNNING.with(|c| c.get())
}

/// Slots this thread uses from now on belong to `case` (from [`running`]
/// on the thread that runs the case).
pub fn adopt(case: u64) {
    RUNNING.with(|c| c.set(case));
}

/// A case starts on this thread: slots used from now on are its own.
pub fn begin_case(id: &str) {
    let n = CASES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    RUNNING.with(|c| c.set(n));
    let dropped = THREAD.with(|t| {
        let mut t = t.borrow_mut();
        t.running = n;
        t.recent.push_back((n, id.to_string()));
        let mut dropped = Vec::new();
        while t.recent.len() > WINDOW {
            dropped.extend(t.recent.pop_front().map(|(n, _)| n));
        }
        dropped
    });
    if !dropped.is_empty() {
        arena().watched.retain(|u| !dropped.contains(&u.case));
    }
}

/// The case ends: damage found in slots of this case is returned; damage in
/// slots of this thread's earlier cases is kept for [`take_earlier`].
pub fn end_case() -> Vec<Damage> {
    RUNNING.with(|c| c.set(0));
    THREAD.with(|t| {
        let mut t = t.borrow_mut();
        let now = t.running;
        t.running = 0;
        let found = arena().sweep(&t.recent);
        let mut own = Vec::new();
        for (case, d) in found {
            if case == now {
                own.push(d);
            } else {
                t.earlier.push(d);
            }
        }
        own
    })
}

/// Damage found in slots of this thread's cases before the one that just
/// ended (their results were already given; whoever keeps them amends
/// them).
pub fn take_earlier() -> Vec<Damage> {
    THREAD.with(|t| std::mem::take(&mut t.borrow_mut().earlier))
}

/// Whether this process's arena passed [`WORKER_BUDGET`] (a worker then
/// ends after its case; the next starts with an empty arena).
pub fn spent() -> bool {
    arena().mapped >= WORKER_BUDGET
}

/// Whether the case running on this thread has used a slot so far (the
/// rule was exercised).
pub fn used() -> bool {
    let now = running();
    now != 0 && arena().watched.iter().any(|u| u.case == now)
}

/// The rule a late write breaks.
pub const RULE: &str = "array.out.untouched";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_after_the_call_is_found_and_charged_to_the_case_whose_call_it_was() {
        // Tests share the arena: run under one lock-free sequence of our
        // own case IDs, unique to this test.
        begin_case("outslot-test/first");
        let mut out = [0u64; 4];
        let mut kept = 0usize;
        call("test_entry", &mut out, |slot| {
            slot[1] = 7;
            kept = slot.as_ptr() as usize;
        });
        assert_eq!(out, [0, 7, 0, 0], "the slot's content is moved out");
        assert!(end_case().iter().all(|d| d.case != "outslot-test/first"));
        begin_case("outslot-test/second");
        // The late write: into the slot the first case's call was given.
        // SAFETY: the slot stays mapped for the process's life.
        unsafe { (kept as *mut u64).add(2).write_volatile(u64::MAX) };
        let own = end_case();
        assert!(own.iter().all(|d| d.case != "outslot-test/first"));
        let earlier = take_earlier();
        let d = earlier
            .iter()
            .find(|d| d.case == "outslot-test/first")
            .expect("the late write is found and named after the first case");
        assert_eq!((d.entry, d.changed, d.size), ("test_entry", 8, 32));
        assert_eq!(out, [0, 7, 0, 0], "the caller's structure is untouched");
    }
}
