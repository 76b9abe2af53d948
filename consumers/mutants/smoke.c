/* Smoke test of mutant_consumer.c: cc -Wall -Wextra -I harness/include -o /tmp/smoke consumers/mutants/smoke.c -ldl -lpthread && /tmp/smoke ./libarrowcert_mutant_consumer.so target/debug/libarrowcert_consumer_reference.so */
/*
 * Not the real test (that is the harness's): a tiny exporter with
 * instrumented release callbacks in the harness's manner (count calls,
 * release live children, poison buffers, mark released; a second call and a
 * child released outside its parent's release are recorded), a batch
 * {a: int32, s: utf8} of 3 rows, and a stream of one such batch that can fail
 * its second get_next. Each mutation runs in a forked process (the library
 * reads ARROWCERT_MUTANT once) on the plain and the device entry points,
 * and its observable effect is checked; output bytes are compared with what
 * the base itself writes for the same input.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "arrowcert_plugin.h"

/* ---- an instrumented exporter ---- */

struct rec {
  int calls, violations, direct, released, is_child, modified;
  int n;
  unsigned char* bufs[3];
  size_t sizes[3];
  uint64_t hash;
};

static __thread int parent_depth;

static uint64_t hash_rec(const struct rec* r) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < r->n; i++)
    for (size_t k = 0; r->bufs[i] && k < r->sizes[i]; k++) h = (h ^ r->bufs[i][k]) * 1099511628211ull;
  return h;
}

static void array_release(struct ArrowArray* a) {
  struct rec* r = a->private_data;
  r->calls++;
  if (r->is_child && parent_depth == 0) r->direct++;
  if (r->released) {
    r->violations++;
    a->release = NULL;
    return;
  }
  parent_depth++;
  for (int64_t i = 0; i < a->n_children; i++)
    if (a->children[i]->release) a->children[i]->release(a->children[i]);
  parent_depth--;
  if (hash_rec(r) != r->hash) r->modified = 1;
  for (int i = 0; i < r->n; i++)
    if (r->bufs[i]) memset(r->bufs[i], 0xA5, r->sizes[i]); /* poison */
  r->released = 1;
  a->release = NULL;
}

static void schema_release(struct ArrowSchema* s) {
  struct rec* r = s->private_data;
  r->calls++;
  if (r->is_child && parent_depth == 0) r->direct++;
  if (r->released) {
    r->violations++;
    s->release = NULL;
    return;
  }
  parent_depth++;
  for (int64_t i = 0; i < s->n_children; i++)
    if (s->children[i]->release) s->children[i]->release(s->children[i]);
  parent_depth--;
  r->released = 1;
  s->release = NULL;
}

enum shape { PLAIN, SLICED, EMPTY_NULL_BUFFERS, WITH_METADATA, INT_ONLY };

struct batch {
  struct ArrowSchema schema, sa, ss;
  struct ArrowSchema* schildren[2];
  struct ArrowDeviceArray dev; /* dev.array is the root */
  struct ArrowArray a, s;
  struct ArrowArray* children[2];
  const void *rbufs[1], *abufs[2], *sbufs[3];
  struct rec rschema, rsa, rss, rroot, ra, rs;
};

static unsigned char* dup_bytes(const void* p, size_t n) {
  unsigned char* q = malloc(n);
  memcpy(q, p, n);
  return q;
}

static const char METADATA[] = {1, 0, 0, 0, 1, 0, 0, 0, 'k', 1, 0, 0, 0, 'v'};

static struct batch* make_batch(enum shape shape) {
  struct batch* b = calloc(1, sizeof *b);
  static const int32_t avals[] = {1, 2, 3, 4};
  static const int32_t soffs[] = {0, 1, 3, 6, 10};
  static const char sdata[] = "xyyzzzwwww";
  int64_t off = shape == SLICED ? 1 : 0, len = shape == EMPTY_NULL_BUFFERS ? 0 : 3;

  b->sa = (struct ArrowSchema){.format = "i", .name = "a", .flags = ARROW_FLAG_NULLABLE,
                               .metadata = shape == WITH_METADATA ? METADATA : NULL,
                               .release = schema_release, .private_data = &b->rsa};
  b->ss = (struct ArrowSchema){.format = "u", .name = "s", .flags = ARROW_FLAG_NULLABLE,
                               .release = schema_release, .private_data = &b->rss};
  b->schildren[0] = &b->sa;
  b->schildren[1] = &b->ss;
  b->schema = (struct ArrowSchema){.format = "+s", .name = "", .n_children = 2,
                                   .children = b->schildren, .release = schema_release,
                                   .private_data = &b->rschema};
  b->rsa.is_child = b->rss.is_child = 1;

  if (shape != EMPTY_NULL_BUFFERS) {
    b->ra.n = 2;
    b->ra.bufs[1] = dup_bytes(avals, sizeof avals), b->ra.sizes[1] = sizeof avals;
    b->rs.n = 3;
    b->rs.bufs[1] = dup_bytes(soffs, sizeof soffs), b->rs.sizes[1] = sizeof soffs;
    b->rs.bufs[2] = dup_bytes(sdata, 10), b->rs.sizes[2] = 10;
  }
  b->abufs[0] = NULL, b->abufs[1] = b->ra.bufs[1];
  b->sbufs[0] = NULL, b->sbufs[1] = b->rs.bufs[1], b->sbufs[2] = b->rs.bufs[2];
  b->a = (struct ArrowArray){.length = len, .offset = off, .n_buffers = 2, .buffers = b->abufs,
                             .release = array_release, .private_data = &b->ra};
  b->s = (struct ArrowArray){.length = len, .offset = off, .n_buffers = 3, .buffers = b->sbufs,
                             .release = array_release, .private_data = &b->rs};
  b->children[0] = &b->a;
  b->children[1] = &b->s;
  b->rbufs[0] = NULL;
  b->dev.array = (struct ArrowArray){.length = len, .n_buffers = 1, .n_children = 2,
                                     .buffers = b->rbufs, .children = b->children,
                                     .release = array_release, .private_data = &b->rroot};
  b->dev.device_id = -1;
  b->dev.device_type = ARROW_DEVICE_CPU;
  b->ra.is_child = b->rs.is_child = 1;
  b->ra.hash = hash_rec(&b->ra);
  b->rs.hash = hash_rec(&b->rs);
  b->rroot.hash = hash_rec(&b->rroot);
  if (shape == INT_ONLY) b->schema.n_children = b->dev.array.n_children = 1;
  return b;
}

/* Every array and schema record released exactly once, nothing else wrong. */
static int all_once(const struct batch* b) {
  const struct rec* rs[] = {&b->rschema, &b->rroot, &b->rsa, &b->ra, &b->rss, &b->rs};
  int n = b->schema.n_children == 1 ? 4 : 6;
  for (int i = 0; i < n; i++)
    if (rs[i]->calls != 1 || rs[i]->violations || rs[i]->direct || rs[i]->modified) {
      printf("    record %d: calls=%d violations=%d direct=%d modified=%d\n", i, rs[i]->calls,
             rs[i]->violations, rs[i]->direct, rs[i]->modified);
      return 0;
    }
  return 1;
}

/* A stream of one batch; with `fail`, the second get_next fails with EIO. */
struct sstate {
  int fail, device, next_calls, releases, in_flight, overlaps, after_release;
  char err[64];
  struct batch* chunks[8];
  int n_chunks;
  struct batch* schemas[8];
  int n_schemas;
};
static const char HARNESS_MESSAGE[] = "harness: get_next failed on purpose";

static void enter(struct sstate* st) {
  if (st->releases) st->after_release++;
  memset(st->err, '#', sizeof st->err - 1); /* the last message is overwritten */
  st->err[sizeof st->err - 1] = 0;
  if (__atomic_add_fetch(&st->in_flight, 1, __ATOMIC_SEQ_CST) > 1)
    __atomic_add_fetch(&st->overlaps, 1, __ATOMIC_SEQ_CST);
  usleep(2000); /* hold, to widen the window */
}
static void leave(struct sstate* st) { __atomic_sub_fetch(&st->in_flight, 1, __ATOMIC_SEQ_CST); }

static int st_get_schema(struct sstate* st, struct ArrowSchema* out) {
  enter(st);
  struct batch* b = make_batch(PLAIN);
  st->schemas[st->n_schemas++] = b;
  *out = b->schema;
  b->schema.release = NULL;
  leave(st);
  return 0;
}
static int st_get_next(struct sstate* st, struct ArrowArray* out, struct ArrowDeviceArray* dout) {
  enter(st);
  int call = ++st->next_calls, rc = 0;
  if (call == 1) {
    struct batch* b = make_batch(PLAIN);
    st->chunks[st->n_chunks++] = b;
    if (dout) {
      *dout = b->dev;
    } else {
      *out = b->dev.array;
    }
    b->dev.array.release = NULL;
  } else if (call == 2 && st->fail) {
    strcpy(st->err, HARNESS_MESSAGE);
    rc = EIO;
  } else {
    if (dout) memset(dout, 0, sizeof *dout), dout->device_type = ARROW_DEVICE_CPU;
    else memset(out, 0, sizeof *out);
  }
  leave(st);
  return rc;
}

static int s_get_schema(struct ArrowArrayStream* s, struct ArrowSchema* out) {
  return st_get_schema(s->private_data, out);
}
static int s_get_next(struct ArrowArrayStream* s, struct ArrowArray* out) {
  return st_get_next(s->private_data, out, NULL);
}
static const char* s_last_error(struct ArrowArrayStream* s) {
  struct sstate* st = s->private_data;
  return st->err; /* overwritten at the next callback */
}
static void s_release(struct ArrowArrayStream* s) {
  struct sstate* st = s->private_data;
  enter(st);
  st->releases++;
  leave(st);
  s->release = NULL;
}
static int d_get_schema(struct ArrowDeviceArrayStream* s, struct ArrowSchema* out) {
  return st_get_schema(s->private_data, out);
}
static int d_get_next(struct ArrowDeviceArrayStream* s, struct ArrowDeviceArray* out) {
  return st_get_next(s->private_data, NULL, out);
}
static const char* d_last_error(struct ArrowDeviceArrayStream* s) {
  struct sstate* st = s->private_data;
  return st->err;
}
static void d_release(struct ArrowDeviceArrayStream* s) {
  struct sstate* st = s->private_data;
  enter(st);
  st->releases++;
  leave(st);
  s->release = NULL;
}

/* ---- the plugin under test ---- */

struct plugin {
  const char* (*last_error)(void);
  void (*free)(void*);
  int (*array)(struct ArrowSchema*, struct ArrowArray*, uint8_t**, int64_t*);
  int (*device_array)(struct ArrowSchema*, struct ArrowDeviceArray*, uint8_t**, int64_t*);
  int (*stream)(struct ArrowArrayStream*, uint8_t**, int64_t*);
  int (*device_stream)(struct ArrowDeviceArrayStream*, uint8_t**, int64_t*);
};

static int load(const char* path, struct plugin* p) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    printf("cannot load %s: %s\n", path, dlerror());
    return -1;
  }
  *(void**)&p->last_error = dlsym(h, "arrowcert_last_error");
  *(void**)&p->free = dlsym(h, "arrowcert_free");
  *(void**)&p->array = dlsym(h, "arrowcert_consume_array");
  *(void**)&p->device_array = dlsym(h, "arrowcert_consume_device_array");
  *(void**)&p->stream = dlsym(h, "arrowcert_consume_stream");
  *(void**)&p->device_stream = dlsym(h, "arrowcert_consume_device_stream");
  return 0;
}

struct result {
  int rc;
  uint8_t* out;
  int64_t len;
  char error[256];
};

static void keep_error(const struct plugin* p, struct result* r) {
  const char* e = r->rc ? p->last_error() : NULL;
  snprintf(r->error, sizeof r->error, "%s", e ? e : "(null)");
}

static struct result consume_batch(const struct plugin* p, int device, struct batch* b) {
  struct result r = {0};
  r.rc = device ? p->device_array(&b->schema, &b->dev, &r.out, &r.len)
                : p->array(&b->schema, &b->dev.array, &r.out, &r.len);
  keep_error(p, &r);
  return r;
}

static struct result consume_stream(const struct plugin* p, int device, struct sstate* st) {
  struct result r = {0};
  st->device = device;
  if (device) {
    struct ArrowDeviceArrayStream s = {ARROW_DEVICE_CPU, d_get_schema, d_get_next, d_last_error,
                                       d_release, st};
    r.rc = p->device_stream(&s, &r.out, &r.len);
  } else {
    struct ArrowArrayStream s = {s_get_schema, s_get_next, s_last_error, s_release, st};
    r.rc = p->stream(&s, &r.out, &r.len);
  }
  keep_error(p, &r);
  return r;
}

static int same(const struct result* a, const struct result* b) {
  return a->rc == b->rc && a->len == b->len && (a->len == 0 || memcmp(a->out, b->out, (size_t)a->len) == 0);
}

/* ---- the checks ---- */

static int failures;
static const char* MUTANT;
static const char* VARIANT;

#define CHECK(cond, ...)                                    \
  do {                                                      \
    if (!(cond)) {                                          \
      failures++;                                           \
      printf("  FAIL %s [%s]: ", MUTANT, VARIANT);          \
      printf(__VA_ARGS__);                                  \
      printf("  (%s)\n", #cond);                            \
    }                                                       \
  } while (0)

static void check_arrays(const struct plugin* mut, const struct plugin* ref, int device) {
  const char* m = MUTANT;
  enum shape shape = PLAIN;
  if (!strcmp(m, "ignore-offset") || !strcmp(m, "string-length-from-first-offset")) shape = SLICED;
  if (!strcmp(m, "drop-metadata")) shape = WITH_METADATA;
  if (!strcmp(m, "null-buffers-of-empty")) shape = EMPTY_NULL_BUFFERS;
  /* Poisoned string offsets crash arrow-rs (see the report): ints only. */
  if (!strcmp(m, "read-after-release")) shape = INT_ONLY;

  struct batch* eb = make_batch(shape);
  struct result expected = consume_batch(ref, device, eb);
  struct batch* b = make_batch(shape);
  if (!strcmp(m, "accepts-released")) b->dev.array.release = NULL;
  struct result got = consume_batch(mut, device, b);
  int src_marked = b->dev.array.release == NULL && b->schema.release == NULL;
  printf("  %-32s %-6s array : rc=%d len=%lld same-as-base=%d root-calls=%d a-calls=%d "
         "s-calls=%d schema-calls=%d violations=%d direct=%d modified=%d source-marked=%d%s%s\n",
         m, VARIANT, got.rc, (long long)got.len, same(&got, &expected), b->rroot.calls,
         b->ra.calls, b->rs.calls, b->rschema.calls, b->rroot.violations, b->ra.direct,
         b->ra.modified, src_marked, got.rc ? " error=" : "", got.rc ? got.error : "");
  CHECK(expected.rc == 0 || shape == EMPTY_NULL_BUFFERS, "the base failed: %s", expected.error);

  if (!strcmp(m, "none")) {
    CHECK(got.rc == 0 && same(&got, &expected) && all_once(b) && src_marked, "pass-through");
  } else if (!strcmp(m, "leak")) {
    CHECK(got.rc == 0 && same(&got, &expected), "output");
    CHECK(b->rroot.calls == 0 && b->rschema.calls == 0 && src_marked, "never released");
  } else if (!strcmp(m, "double-release")) {
    CHECK(got.rc == 0 && b->rroot.calls == 2 && b->rroot.violations == 1, "released twice");
  } else if (!strcmp(m, "release-child")) {
    CHECK(got.rc == 0 && b->ra.direct == 1 && b->ra.calls == 1 && b->rroot.calls == 1,
          "child released directly");
  } else if (!strcmp(m, "read-after-release")) {
    CHECK(b->rroot.calls == 1 && (got.rc != 0 || !same(&got, &expected)),
          "released before the read");
  } else if (!strcmp(m, "copy-without-marking")) {
    CHECK(got.rc == 0 && b->dev.array.release != NULL && b->rroot.calls == 1,
          "source left live");
  } else if (!strcmp(m, "ignore-offset") || !strcmp(m, "string-length-from-first-offset") ||
             !strcmp(m, "drop-metadata")) {
    CHECK(got.rc == 0 && !same(&got, &expected) && all_once(b), "values differ");
  } else if (!strcmp(m, "null-buffers-of-empty")) {
    CHECK(got.rc == EINVAL && !strcmp(got.error, "NULL buffer in an empty array") && all_once(b),
          "refused");
    printf("  %-32s %-6s (the base itself on that input: rc=%d %s)\n", m, VARIANT, expected.rc,
           expected.rc ? expected.error : "");
    struct batch* e2 = make_batch(PLAIN);
    struct result ok2 = consume_batch(mut, device, e2);
    CHECK(ok2.rc == 0 && all_once(e2), "a non-empty batch passes");
    if (ok2.out) mut->free(ok2.out);
  } else if (!strcmp(m, "accepts-released")) {
    CHECK(got.rc == 0 && got.out == NULL && got.len == 0 && b->rschema.calls == 1,
          "released array accepted");
  } else if (!strcmp(m, "write-buffer")) {
    CHECK(got.rc == 0 && b->ra.modified == 1, "buffer written");
  } else if (!strcmp(m, "bogus")) {
    CHECK(got.rc == EINVAL && strstr(got.error, "unknown ARROWCERT_MUTANT") && all_once(b),
          "unknown mutation refused");
  } else {
    /* array behaviour untouched */
    CHECK(got.rc == 0 && same(&got, &expected) && all_once(b) && src_marked, "pass-through");
  }
  if (got.out) mut->free(got.out);
  if (expected.out) ref->free(expected.out);
}

static void check_streams(const struct plugin* mut, const struct plugin* ref, int device) {
  const char* m = MUTANT;
  int fail = !strcmp(m, "keep-last-error") || !strcmp(m, "get-next-after-error") ||
             !strcmp(m, "none");
  struct sstate est = {.fail = fail}, st = {.fail = fail};
  struct result expected = consume_stream(ref, device, &est);
  struct result got = consume_stream(mut, device, &st);
  int chunk_calls = st.n_chunks ? st.chunks[0]->rroot.calls : -1;
  int schema_calls = st.n_schemas ? st.schemas[0]->rschema.calls : -1;
  printf("  %-32s %-6s stream: rc=%d len=%lld same-as-base=%d stream-releases=%d "
         "after-release=%d overlaps=%d get_schema=%d chunk-calls=%d schema-calls=%d%s%s\n",
         m, VARIANT, got.rc, (long long)got.len, same(&got, &expected), st.releases,
         st.after_release, st.overlaps, st.n_schemas, chunk_calls, schema_calls,
         got.rc ? " error=" : "", got.rc ? got.error : "");
  CHECK(expected.rc == (fail ? EIO : 0), "the base: rc=%d", expected.rc);

  if (!strcmp(m, "none")) {
    CHECK(got.rc == EIO && strstr(got.error, HARNESS_MESSAGE) && st.releases == 1 &&
              chunk_calls == 1 && schema_calls == 1 && !st.overlaps,
          "error passed through");
  } else if (!strcmp(m, "leak")) {
    CHECK(got.rc == 0 && same(&got, &expected) && st.releases == 1 && chunk_calls == 0 &&
              schema_calls == 0,
          "chunk and schema never released");
  } else if (!strcmp(m, "keep-last-error")) {
    CHECK(got.rc == EIO && !strstr(got.error, HARNESS_MESSAGE) && st.releases == 1,
          "message read after release");
  } else if (!strcmp(m, "get-next-after-error")) {
    CHECK(got.rc == 0 && st.releases == 1 && st.next_calls == 3, "error lost");
  } else if (!strcmp(m, "stream-never-released")) {
    CHECK(got.rc == 0 && same(&got, &expected) && st.releases == 0 && chunk_calls == 1,
          "stream not released");
  } else if (!strcmp(m, "concurrent-get-next")) {
    /* A get_schema from a second thread on every get_next (one batch and
       the end: 3 get_schema calls in all); whether they overlap in time
       depends on scheduling, so only the calls are checked here (the
       harness's test judges the overlap). */
    CHECK(got.rc == 0 && same(&got, &expected) && st.releases == 1 && st.n_schemas == 3 &&
              st.schemas[1]->rschema.calls == 1 && st.schemas[2]->rschema.calls == 1,
          "get_schema from a second thread");
  } else if (!strcmp(m, "bogus")) {
    CHECK(got.rc == EINVAL && st.releases == 1, "unknown mutation refused");
  } else {
    CHECK(got.rc == 0 && same(&got, &expected) && st.releases == 1 && chunk_calls == 1 &&
              schema_calls == 1 && !st.overlaps,
          "pass-through");
  }
  if (got.out) mut->free(got.out);
  if (expected.out) ref->free(expected.out);
}

static const char* const MUTATIONS[] = {
    "none", "leak", "double-release", "release-child", "read-after-release",
    "copy-without-marking", "ignore-offset", "string-length-from-first-offset",
    "null-buffers-of-empty", "drop-metadata", "ignore-flags", "keep-last-error",
    "get-next-after-error", "stream-never-released", "concurrent-get-next",
    "accepts-released", "write-buffer", "all-columns-nullable", "bogus"};

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s MUTANT_LIB BASE_LIB\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  int failed = 0;
  for (size_t i = 0; i < sizeof MUTATIONS / sizeof *MUTATIONS; i++) {
    pid_t pid = fork();
    if (pid == 0) {
      MUTANT = MUTATIONS[i];
      setenv("ARROWCERT_MUTANT", MUTANT, 1);
      setenv("ARROWCERT_MUTANT_BASE", argv[2], 1);
      struct plugin mut, ref;
      if (load(argv[1], &mut) || load(argv[2], &ref)) _exit(1);
      for (int device = 0; device < 2; device++) {
        VARIANT = device ? "device" : "plain";
        check_arrays(&mut, &ref, device);
        check_streams(&mut, &ref, device);
      }
      _exit(failures ? 1 : 0);
    }
    int status;
    waitpid(pid, &status, 0);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok) failed++;
    printf("%s %s%s\n", ok ? "ok  " : "FAIL", MUTATIONS[i],
           WIFSIGNALED(status) ? " (killed by a signal)" : "");
  }
  printf("%d of %zu mutations failed their smoke checks\n", failed,
         sizeof MUTATIONS / sizeof *MUTATIONS);
  return failed != 0;
}
