/* The set-up every mutant wrapper plugin shares (producers/mutants/,
 * consumers/mutants/): which mutation ARROWCERT_MUTANT names, and the base
 * plugin ARROWCERT_MUTANT_BASE names, loaded. Header-only: each wrapper is
 * one C file built on its own. */
#ifndef ARROWCERT_MUTANT_H
#define ARROWCERT_MUTANT_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The environment variables read; a build may rename them (arrowcert embeds
 * the mutant producer for `certify --malformed` with its own names, so that
 * a consumer mutant under test keeps ARROWCERT_MUTANT for itself). */
#ifndef ARROWCERT_MUTANT_ENV
#define ARROWCERT_MUTANT_ENV "ARROWCERT_MUTANT"
#endif
#ifndef ARROWCERT_MUTANT_BASE_ENV
#define ARROWCERT_MUTANT_BASE_ENV "ARROWCERT_MUTANT_BASE"
#endif

/* The base's entry point `name` (declared in arrowcert_plugin.h), NULL if
 * the base lacks it; `base` is the wrapper's handle of the base. */
#define BASE(name) ((__typeof__(&name))dlsym(base, #name))

/* The mutation ARROWCERT_MUTANT names ("none" when unset or empty). */
static inline const char* arrowcert_mutant_wanted(void) {
  const char* want = getenv(ARROWCERT_MUTANT_ENV);
  return want && *want ? want : "none";
}

/* Looks the wanted mutation up in names[0..n) and loads the base into
 * *base_out. Returns the mutation's index, -1 when no name matches. On any
 * failure, `error` (of `len` bytes) holds one line that begins with `what`
 * ("mutant consumer") and says why; it is empty on success. */
static inline int arrowcert_mutant_setup(const char* what, const char* const* names, size_t n,
                                         void** base_out, char* error, size_t len) {
  const char* want = arrowcert_mutant_wanted();
  const char* path = getenv(ARROWCERT_MUTANT_BASE_ENV);
  error[0] = 0;
  size_t i = 0;
  while (i < n && strcmp(names[i], want) != 0) i++;
  if (i == n) {
    int at = snprintf(error, len, "%s: unknown " ARROWCERT_MUTANT_ENV "=%.200s (known:", what, want);
    for (size_t k = 0; k < n && at > 0 && (size_t)at < len; k++)
      at += snprintf(error + at, len - (size_t)at, " %s", names[k]);
    if (at > 0 && (size_t)at < len) snprintf(error + at, len - (size_t)at, ")");
    return -1;
  }
  if (!path || !*path) {
    snprintf(error, len, "%s: " ARROWCERT_MUTANT_BASE_ENV " is not set (the path of the base plugin)",
             what);
  } else if (!(*base_out = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
    const char* why = dlerror();
    snprintf(error, len, "%s: cannot load " ARROWCERT_MUTANT_BASE_ENV "=%.200s: %.200s", what, path,
             why ? why : "dlopen failed");
  }
  return (int)i;
}

/* For wrappers that set up in a constructor: the set-up, and on failure the
 * reason on stderr and abort (a plugin that cannot be what it claims). */
static inline int arrowcert_mutant_setup_or_abort(const char* what, const char* const* names,
                                                  size_t n, void** base_out) {
  char error[1024];
  int i = arrowcert_mutant_setup(what, names, n, base_out, error, sizeof error);
  if (error[0]) {
    fprintf(stderr, "%s\n", error);
    abort();
  }
  return i;
}


/* ---- memory kept per call: the leak rules' two mutants ----
 *
 * small-leak: every call keeps 8 bytes it never frees (a leak of a few
 * bytes per export): every *.release.frees rule (and the async ones) must
 * fail. periodic-cache: every call keeps a 96-byte entry in a cache that is
 * emptied every ARROWCERT_MUTANT_CACHE_PERIOD calls (default 64, at most
 * 1024): no leak, so every frees rule must pass, and array.release.cache
 * (INFO) reports it. */
static inline void arrowcert_mutant_small_leak(void) {
  static void* volatile kept; /* a chain: reachable, never freed */
  void** p = malloc(8);
  if (p) {
    *p = kept;
    kept = p;
  }
}

static inline void arrowcert_mutant_periodic_cache(void) {
  static void* entries[1024];
  static int n;
  static int period;
  if (!period) {
    const char* v = getenv("ARROWCERT_MUTANT_CACHE_PERIOD");
    period = v && atoi(v) > 0 ? atoi(v) : 64;
    if (period > 1024) period = 1024;
  }
  if (n + 1 >= period) {
    for (int i = 0; i < n; i++) free(entries[i]);
    n = 0;
    return;
  }
  entries[n] = malloc(96);
  if (entries[n]) n++;
}

#endif /* ARROWCERT_MUTANT_H */
