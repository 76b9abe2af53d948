/*
 * arrowcert allocation tracker: preloaded (LD_PRELOAD) into the worker
 * processes that run plugin code. It interposes glibc's allocator entry
 * points, keeps the net number of bytes live in malloc'd blocks across all
 * threads, and fills every block it frees with a poison pattern first, so
 * that a use after free reads wrong values instead of the old ones.
 *
 * The worker finds it with dlsym(RTLD_DEFAULT, "arrowcert_tracker_live_bytes")
 * and reads the counter around repeated export-and-release sequences
 * (the *.release.frees rules; see harness/src/certify/leaks.rs).
 *
 * Design constraints:
 *  - no recursion into the allocator: the real functions are glibc's
 *    exported __libc_* entry points (no dlsym, which itself allocates);
 *  - no locks, no stdio, no errno games beyond what the real functions do:
 *    relaxed atomics only, so the hooks are as signal-safe as glibc's own;
 *  - bytes are counted with malloc_usable_size, which is stable for a block
 *    between its allocation and its free, so the counter nets to zero for
 *    any balanced sequence, whatever the request sizes were.
 *
 * Built by harness/build.rs and embedded in the arrowcert binary.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

extern void* __libc_malloc(size_t);
extern void __libc_free(void*);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);
extern void* __libc_valloc(size_t);
extern void* __libc_pvalloc(size_t);

#define EXPORT __attribute__((visibility("default")))

/* The byte freed blocks are filled with: the harness's own poison byte
 * (abi::POISON_BYTE), so a pointer read from freed memory is recognised as
 * never written instead of being followed. */
#define POISON 0xA5
/* Blocks larger than this are poisoned only up to it: glibc unmaps large
 * blocks anyway, and a memset of megabytes per free would dominate. */
#define POISON_LIMIT ((size_t)1 << 20)

/* Net bytes in live blocks: the one counter the harness reads. One atomic
 * operation per allocation and per free: a locked instruction costs about
 * as much as a small malloc, and with counters of blocks and of all
 * allocations besides (nothing read them) the hooks were a fifth of an
 * allocation-heavy library's time (DuckDB's, measured with perf). */
static int64_t live_bytes;

static inline void counted(void* p) {
  if (p) __atomic_fetch_add(&live_bytes, (int64_t)malloc_usable_size(p), __ATOMIC_RELAXED);
}

static inline void uncounted(size_t usable) {
  __atomic_fetch_sub(&live_bytes, (int64_t)usable, __ATOMIC_RELAXED);
}

EXPORT int64_t arrowcert_tracker_live_bytes(void) {
  return __atomic_load_n(&live_bytes, __ATOMIC_RELAXED);
}
/* The fill byte of freed blocks, for tests. */
EXPORT int arrowcert_tracker_poison_byte(void) { return POISON; }

EXPORT void* malloc(size_t n) {
  void* p = __libc_malloc(n);
  counted(p);
  return p;
}

EXPORT void free(void* p) {
  if (!p) return;
  size_t usable = malloc_usable_size(p);
  uncounted(usable);
  memset(p, POISON, usable < POISON_LIMIT ? usable : POISON_LIMIT);
  __libc_free(p);
}

EXPORT void* calloc(size_t n, size_t size) {
  void* p = __libc_calloc(n, size);
  counted(p);
  return p;
}

EXPORT void* realloc(void* old, size_t n) {
  if (!old) return malloc(n);
  size_t before = malloc_usable_size(old);
  void* p = __libc_realloc(old, n);
  if (p) {
    /* Moved or resized: the old block is gone, the new one is live. */
    uncounted(before);
    counted(p);
  } else if (n == 0) {
    uncounted(before); /* realloc(p, 0) freed p */
  }
  return p;
}

EXPORT void* reallocarray(void* old, size_t n, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(n, size, &bytes)) {
    errno = ENOMEM;
    return NULL;
  }
  return realloc(old, bytes);
}

EXPORT void* memalign(size_t alignment, size_t n) {
  void* p = __libc_memalign(alignment, n);
  counted(p);
  return p;
}

EXPORT void* aligned_alloc(size_t alignment, size_t n) {
  /* C17: any power of two is a valid alignment (glibc >= 2.38 checks it). */
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    errno = EINVAL;
    return NULL;
  }
  return memalign(alignment, n);
}

EXPORT int posix_memalign(void** out, size_t alignment, size_t n) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 ||
      alignment % sizeof(void*) != 0)
    return EINVAL;
  int saved = errno;
  void* p = __libc_memalign(alignment, n);
  if (!p) {
    errno = saved;
    return ENOMEM;
  }
  counted(p);
  *out = p;
  return 0;
}

EXPORT void* valloc(size_t n) {
  void* p = __libc_valloc(n);
  counted(p);
  return p;
}

EXPORT void* pvalloc(size_t n) {
  void* p = __libc_pvalloc(n);
  counted(p);
  return p;
}
