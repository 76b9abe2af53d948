//! The allocation tracker preloaded into worker processes: it counts every
//! allocation function across threads and poisons freed memory; leak
//! verdicts built on it catch a leak every time and never flag a library
//! for caches, lazy statics or amortised buffers; it works wherever the
//! arrowcert binary is moved, and can be switched off.

mod support;

use std::path::PathBuf;
use std::process::Command;

use arrowcert::report::{Report, Verdict};
use support::*;

/// The tracker library as embedded in the binary, written out once.
fn tracker_lib() -> PathBuf {
    arrowcert::plugin::tracker::install(&scratch("tracker-lib")).unwrap()
}

const PROBE: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t (*live)(void);
static void* from_thread;

static void* worker(void* arg) {
  (void)arg;
  from_thread = malloc(5000);   /* freed by the main thread */
  void* p = malloc(300);        /* allocated and freed here */
  free(p);
  return NULL;
}

static void* keeper(void* arg) {
  *(void**)arg = malloc(1000);  /* still allocated when the thread ends */
  return NULL;
}

#define CHECK(cond, ...) do { if (!(cond)) { printf(__VA_ARGS__); printf("\n"); return 1; } } while (0)

int main(void) {
  live = (int64_t (*)(void))dlsym(RTLD_DEFAULT, "arrowcert_tracker_live_bytes");
  CHECK(live, "no tracker");
  setvbuf(stdout, NULL, _IONBF, 0);
  int64_t base = live();

  char* m = malloc(100);
  CHECK(live() - base == (int64_t)malloc_usable_size(m), "malloc: %ld", (long)(live() - base));
  m = realloc(m, 10000);
  CHECK(live() - base == (int64_t)malloc_usable_size(m), "realloc: %ld", (long)(live() - base));
  void* c = calloc(7, 9);
  void* a = NULL;
  CHECK(posix_memalign(&a, 64, 300) == 0, "posix_memalign");
  void* al = aligned_alloc(128, 256);
  void* me = memalign(32, 50);
  void* v = valloc(10);
  void* ra = reallocarray(NULL, 3, 40);
  char* s = strdup("a string copied by libc");
  int64_t want = 0;
  void* all[] = {m, c, a, al, me, v, ra, s};
  for (int i = 0; i < 8; i++) want += (int64_t)malloc_usable_size(all[i]);
  CHECK(live() - base == want, "every function: %ld, want %ld", (long)(live() - base), (long)want);
  for (int i = 0; i < 8; i++) free(all[i]);
  CHECK(live() == base, "after free: %ld", (long)(live() - base));

  /* Across threads: allocated on one, freed on another. */
  pthread_t t;
  pthread_create(&t, NULL, worker, NULL);
  pthread_join(t, NULL);
  int64_t held = live() - base;
  int64_t block = (int64_t)malloc_usable_size(from_thread);
  CHECK(held >= block, "thread: %ld", (long)held);
  free(from_thread);
  CHECK(live() - base == held - block, "freed on another thread: %ld", (long)(live() - base));

  /* Many threads, sixteen at a time, each ending with a block allocated
     that this thread frees: what an ended thread allocated stays counted,
     and nothing is counted twice (a tracker with per-thread counters must
     fold an ending thread's count exactly once). */
  enum { N = 2100, AT_ONCE = 16 };
  static void* kept[N];
  int64_t before = live();
  for (int i = 0; i < N; i += AT_ONCE) {
    pthread_t ts[AT_ONCE];
    for (int k = 0; k < AT_ONCE && i + k < N; k++) pthread_create(&ts[k], NULL, keeper, &kept[i + k]);
    for (int k = 0; k < AT_ONCE && i + k < N; k++) pthread_join(ts[k], NULL);
  }
  int64_t sum = 0;
  for (int i = 0; i < N; i++) sum += (int64_t)malloc_usable_size(kept[i]);
  int64_t after_threads = live() - before;
  CHECK(after_threads >= sum, "%d ended threads: %ld counted, their blocks %ld", N, (long)after_threads, (long)sum);
  for (int i = 0; i < N; i++) free(kept[i]);
  int64_t after_free = live() - before;
  CHECK(after_threads - after_free == sum, "freeing the threads' blocks: %ld, want %ld", (long)(after_threads - after_free), (long)sum);
  CHECK(after_free < sum / 4, "left after the threads: %ld (their blocks were %ld)", (long)after_free, (long)sum);

  /* Freed memory is poisoned (glibc keeps its free-list links in the first
     16 bytes; the rest shows the pattern). */
  unsigned char* p = malloc(256);
  memset(p, 0x11, 256);
  free(p);
  int poisoned = 1;
  for (int i = 32; i < 240; i++) poisoned &= p[i] == 0xA5;
  CHECK(poisoned, "freed memory still holds its old bytes");
  printf("ok\n");
  return 0;
}
"#;

#[test]
fn the_tracker_counts_every_allocation_function_and_poisons_freed_memory() {
    let dir = scratch("tracker-probe");
    let src = dir.join("probe.c");
    let exe = dir.join("probe");
    std::fs::write(&src, PROBE).unwrap();
    // -O0 -fno-builtin: keep the compiler from folding the allocations away.
    cc(&["-O0", "-fno-builtin", "-pthread"], &src, &exe);
    let out = Command::new(&exe)
        .env("LD_PRELOAD", tracker_lib())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim_end().ends_with("ok"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Without the preload the probe finds no tracker.
    let out = Command::new(&exe).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("no tracker"));
}

fn cache_producer() -> &'static PathBuf {
    static LIB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    LIB.get_or_init(|| {
        let src = harness_dir().join("tests/fixtures/cache_producer.c");
        let lib = scratch("tracker").join("libcache_producer.so");
        cc(&["-shared", "-fPIC", "-ldl"], &src, &lib);
        lib
    })
}

fn certify(
    exe: &std::path::Path,
    env: &[(&str, &str)],
    name: &str,
) -> (Option<i32>, Report, String) {
    run(exe, cache_producer(), &["--jobs", "1"], env, name)
}

fn run(
    exe: &std::path::Path,
    producer: &std::path::Path,
    how: &[&str],
    env: &[(&str, &str)],
    name: &str,
) -> (Option<i32>, Report, String) {
    let (reference, _) = bundled();
    let report = scratch("tracker-reports").join(format!("{name}.json"));
    let mut cmd = Command::new(exe);
    cmd.arg("certify")
        .args(how)
        .args(["--cases", "0"])
        .arg("--producer")
        .arg(producer)
        .arg("--report")
        .arg(&report)
        .env("ARROWCERT_FIXTURE_BASE", reference);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("arrowcert runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let r = arrowcert::report::read(&report)
        .unwrap_or_else(|e| panic!("{e}\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), r, stdout)
}

fn rule<'a>(r: &'a Report, id: &str) -> &'a arrowcert::report::RuleSummary {
    r.rules.iter().find(|s| s.rule == id).expect(id)
}

const FREES: [&str; 3] = [
    "schema.release.frees",
    "array.release.frees",
    "stream.release.frees",
];

#[test]
fn caches_lazy_statics_and_amortised_buffers_are_not_leaks() {
    // Twice: a leak verdict must be the same every time.
    for run in 0..2 {
        let (code, r, out) = certify(&arrowcert_exe(), &[], &format!("cache-{run}"));
        assert_eq!(code, Some(0), "{out}");
        for id in FREES {
            let s = rule(&r, id);
            assert_eq!(s.verdict, Verdict::Pass, "{id}: {out}");
            assert!(s.checked > 0, "{id}");
        }
    }
}

#[test]
fn a_leak_of_one_byte_per_export_is_caught_with_the_bytes_as_evidence() {
    let (code, r, out) = certify(&arrowcert_exe(), &[("ARROWCERT_FIXTURE_LEAK", "1")], "leak");
    assert_eq!(code, Some(1), "{out}");
    let s = rule(&r, "schema.release.frees");
    assert_eq!(s.verdict, Verdict::Fail, "{out}");
    assert_eq!(s.failed, s.checked, "every scenario leaks");
    let evidence = s.evidence.as_deref().unwrap_or_default();
    // The fixture's cache fills during the short round, so the tracker's
    // count (malloc(1) is a block of 24 usable bytes on glibc, plus a
    // 1000-byte cache entry) does not grow at that rate over the long
    // rounds; the plugin's own count of what it leaked does, and settles it.
    assert!(
        evidence.contains(
            "arrowcert_bytes_allocated: 1, 1, 1 bytes per repetition, then 16, 32, 64 bytes"
        ),
        "{evidence}"
    );
    let failing: Vec<&str> = r
        .rules
        .iter()
        .filter(|s| s.verdict == Verdict::Fail)
        .map(|s| s.rule.as_str())
        .collect();
    assert_eq!(failing, ["schema.release.frees"]);
}

#[test]
fn a_moved_binary_still_preloads_its_tracker() {
    // The tracker travels inside the binary: a copy elsewhere, with the
    // build directory out of reach, judges leaks the same.
    let dir = scratch("moved-binary");
    let exe = dir.join("arrowcert-moved");
    std::fs::copy(arrowcert_exe(), &exe).unwrap();
    let (code, r, out) = certify(&exe, &[], "moved");
    assert_eq!(code, Some(0), "{out}");
    for id in FREES {
        assert_eq!(rule(&r, id).verdict, Verdict::Pass, "{id}: {out}");
    }
}

#[test]
fn in_process_the_plugins_own_count_is_the_second_opinion() {
    // No tracker in this process; the fixture counts what it leaks.
    let in_process = &["--in-process"];
    let exe = arrowcert_exe();
    let (code, r, out) = run(&exe, cache_producer(), in_process, &[], "plugin-count");
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(rule(&r, "schema.release.frees").verdict, Verdict::Pass);
    let leak = &[("ARROWCERT_FIXTURE_LEAK", "1")];
    let (code, r, out) = run(&exe, cache_producer(), in_process, leak, "plugin-leak");
    assert_eq!(code, Some(1), "{out}");
    let s = rule(&r, "schema.release.frees");
    assert_eq!(s.verdict, Verdict::Fail, "{out}");
    let evidence = s.evidence.as_deref().unwrap_or_default();
    assert!(
        evidence.contains(
            "arrowcert_bytes_allocated: 1, 1, 1 bytes per repetition, then 16, 32, 64 bytes"
        ),
        "{evidence}"
    );
}

#[test]
fn switched_off_the_leak_rules_are_not_exercised() {
    // The reference producer has no arrowcert_bytes_allocated of its own.
    let (reference, _) = bundled();
    let off = &[("ARROWCERT_TRACKER", "off")];
    // On the CPU: the emulated device's own byte count would measure the
    // device cases.
    let (code, r, out) = run(
        &arrowcert_exe(),
        reference,
        &["--jobs", "1", "--device", "cpu"],
        off,
        "off",
    );
    assert_eq!(code, Some(0), "{out}");
    for id in FREES {
        let s = rule(&r, id);
        assert_eq!(s.verdict, Verdict::Skip, "{id}");
        assert!(
            s.reason
                .as_deref()
                .is_some_and(|r| r.contains("ARROWCERT_TRACKER")),
            "{s:?}"
        );
    }
}
