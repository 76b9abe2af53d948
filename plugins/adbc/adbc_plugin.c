/*
 * arrowcert's ADBC adapter: certifies an ADBC (Arrow Database Connectivity)
 * driver through the C interfaces it already speaks, with no code of the
 * driver's author (`--producer adbc:DRIVER.so[:ENTRYPOINT]`).
 *
 * The harness copies this library for each driver, next to a `<copy>.adbc`
 * file of KEY=VALUE lines (driver=PATH, entrypoint=NAME, name=TEXT,
 * preload=PATH for a driver that needs a library loaded first, and
 * option=K=V for each --adbc-option, set on the database), and loads the
 * copy. It speaks the contract's stream variants (docs/PLUGIN_ABI.md):
 *
 *   producer: the scenario (a stream the harness exports) goes into a new
 *             table through the driver's own bulk ingestion
 *             (AdbcStatementBindStream + adbc.ingest.target_table); the
 *             ArrowArrayStream the driver returns for `SELECT * FROM` that
 *             table is what is certified, moved to the harness unchanged
 *             (its schema: that stream's get_schema);
 *   consumer: the harness's stream (or one batch, AdbcStatementBind) goes
 *             to the driver's bulk ingestion, which imports it; what the
 *             database stored is read back with a query and handed back.
 *
 * One database and one connection per process; a statement per call, kept
 * until two calls later (a driver's result stream may need its statement),
 * then released and its table dropped, so the database does not grow from
 * call to call. Tables are named arrowcert_<pid>_<n>.
 *
 * ADBC statuses become errno values: NOT_IMPLEMENTED -> ENOSYS (a data type
 * or feature the database does not have: a declared limitation, with the
 * driver's message), INVALID_ARGUMENT/INVALID_DATA -> EINVAL, INTERNAL ->
 * ENOTRECOVERABLE, others -> EIO. On the producer side any failure to
 * ingest is ENOSYS: the database cannot hold the data, so it cannot export
 * it.
 *
 * The ADBC declarations below are this adapter's own, of the 1.0.0 API
 * revision (the driver is initialised with ADBC_VERSION_1_0_0).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arrowcert_plugin.h"

/* ---- ADBC 1.0.0, as much as this adapter calls -------------------------- */

typedef uint8_t AdbcStatusCode;
#define ADBC_STATUS_OK 0
#define ADBC_STATUS_NOT_IMPLEMENTED 2
#define ADBC_STATUS_INVALID_ARGUMENT 5
#define ADBC_STATUS_INVALID_DATA 7
#define ADBC_STATUS_INTERNAL 9
#define ADBC_VERSION_1_0_0 1000000

struct AdbcDriver;
struct AdbcError {
  char* message;
  int32_t vendor_code;
  char sqlstate[5];
  void (*release)(struct AdbcError*);
};
struct AdbcDatabase {
  void* private_data;
  struct AdbcDriver* private_driver;
};
struct AdbcConnection {
  void* private_data;
  struct AdbcDriver* private_driver;
};
struct AdbcStatement {
  void* private_data;
  struct AdbcDriver* private_driver;
};
typedef void* AnyFn; /* members this adapter never calls */
struct AdbcDriver {
  void* private_data;
  void* private_manager;
  AdbcStatusCode (*release)(struct AdbcDriver*, struct AdbcError*);
  AdbcStatusCode (*DatabaseInit)(struct AdbcDatabase*, struct AdbcError*);
  AdbcStatusCode (*DatabaseNew)(struct AdbcDatabase*, struct AdbcError*);
  AdbcStatusCode (*DatabaseSetOption)(struct AdbcDatabase*, const char*, const char*,
                                      struct AdbcError*);
  AdbcStatusCode (*DatabaseRelease)(struct AdbcDatabase*, struct AdbcError*);
  AnyFn ConnectionCommit, ConnectionGetInfo, ConnectionGetObjects, ConnectionGetTableSchema,
      ConnectionGetTableTypes;
  AdbcStatusCode (*ConnectionInit)(struct AdbcConnection*, struct AdbcDatabase*, struct AdbcError*);
  AdbcStatusCode (*ConnectionNew)(struct AdbcConnection*, struct AdbcError*);
  AnyFn ConnectionSetOption, ConnectionReadPartition;
  AdbcStatusCode (*ConnectionRelease)(struct AdbcConnection*, struct AdbcError*);
  AnyFn ConnectionRollback;
  AdbcStatusCode (*StatementBind)(struct AdbcStatement*, struct ArrowArray*, struct ArrowSchema*,
                                  struct AdbcError*);
  AdbcStatusCode (*StatementBindStream)(struct AdbcStatement*, struct ArrowArrayStream*,
                                        struct AdbcError*);
  AdbcStatusCode (*StatementExecuteQuery)(struct AdbcStatement*, struct ArrowArrayStream*, int64_t*,
                                          struct AdbcError*);
  AnyFn StatementExecutePartitions, StatementGetParameterSchema;
  AdbcStatusCode (*StatementNew)(struct AdbcConnection*, struct AdbcStatement*, struct AdbcError*);
  AnyFn StatementPrepare;
  AdbcStatusCode (*StatementRelease)(struct AdbcStatement*, struct AdbcError*);
  AdbcStatusCode (*StatementSetOption)(struct AdbcStatement*, const char*, const char*,
                                       struct AdbcError*);
  AdbcStatusCode (*StatementSetSqlQuery)(struct AdbcStatement*, const char*, struct AdbcError*);
  AnyFn StatementSetSubstraitPlan;
};
typedef AdbcStatusCode (*AdbcDriverInitFunc)(int, void*, struct AdbcError*);

/* ---- errors ---------------------------------------------------------------- */

static _Thread_local char* last_error = NULL;

static int set_error(int code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static int set_error(int code, const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  free(last_error);
  last_error = strdup(buf);
  return code;
}

ARROWCERT_EXPORT const char* arrowcert_last_error(void) { return last_error; }
ARROWCERT_EXPORT void arrowcert_free(void* p) { free(p); }

static int errno_of(AdbcStatusCode s) {
  switch (s) {
    case ADBC_STATUS_NOT_IMPLEMENTED: return ENOSYS;
    case ADBC_STATUS_INVALID_ARGUMENT:
    case ADBC_STATUS_INVALID_DATA: return EINVAL;
    case ADBC_STATUS_INTERNAL: return ENOTRECOVERABLE;
    default: return EIO;
  }
}

/* The driver's error as the last error (and released); its errno. */
static int adbc_failed(const char* what, AdbcStatusCode s, struct AdbcError* e) {
  int rc = set_error(errno_of(s), "%s: ADBC status %d: %s", what, (int)s,
                     e->message ? e->message : "(no message)");
  if (e->release) e->release(e);
  memset(e, 0, sizeof *e);
  return rc;
}

/* A message that says the database failed inside itself (DuckDB's
   "INTERNAL Error", a panic), not that it refuses the data. */
static int internal_failure(const char* m) {
  static const char* words[] = {"internal error", "\"exception_type\":\"internal\"", "panic"};
  char low[2048];
  size_t n = strlen(m);
  if (n >= sizeof low) n = sizeof low - 1;
  for (size_t i = 0; i < n; i++) low[i] = (char)((m[i] >= 'A' && m[i] <= 'Z') ? m[i] + 32 : m[i]);
  low[n] = 0;
  for (size_t i = 0; i < sizeof words / sizeof *words; i++)
    if (strstr(low, words[i])) return 1;
  return 0;
}

/* ---- configuration and the driver ------------------------------------------ */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int init_code = 0;
static char init_message[8192];
static char name[512] = "ADBC driver (not loaded)";
static struct AdbcDriver driver;
static struct AdbcDatabase database;
static struct AdbcConnection connection;

#define MAX_OPTIONS 32
static char* options[MAX_OPTIONS][2];
static int n_options = 0;

static char* trim(char* s) {
  size_t n = strlen(s);
  while (n && (s[n - 1] == '\n' || s[n - 1] == '\r')) s[--n] = 0;
  return s;
}

static void do_init(void) {
  Dl_info info;
  if (!dladdr((void*)&do_init, &info) || !info.dli_fname) {
    snprintf(init_message, sizeof init_message, "the ADBC adapter cannot find its own path");
    init_code = EIO;
    return;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s.adbc", info.dli_fname);
  FILE* f = fopen(path, "r");
  if (!f) {
    snprintf(init_message, sizeof init_message, "%s: cannot read the adapter's configuration", path);
    init_code = EIO;
    return;
  }
  char line[4096], driver_path[4096] = "", entrypoint[256] = "AdbcDriverInit";
  while (fgets(line, sizeof line, f)) {
    trim(line);
    if (strncmp(line, "driver=", 7) == 0) snprintf(driver_path, sizeof driver_path, "%s", line + 7);
    else if (strncmp(line, "entrypoint=", 11) == 0) snprintf(entrypoint, sizeof entrypoint, "%s", line + 11);
    else if (strncmp(line, "name=", 5) == 0) snprintf(name, sizeof name, "%s", line + 5);
    else if (strncmp(line, "preload=", 8) == 0) {
      if (!dlopen(line + 8, RTLD_NOW | RTLD_GLOBAL)) {
        snprintf(init_message, sizeof init_message, "cannot load %s: %s", line + 8, dlerror());
        init_code = EIO;
        fclose(f);
        return;
      }
    } else if (strncmp(line, "option=", 7) == 0 && n_options < MAX_OPTIONS) {
      char* kv = line + 7;
      char* eq = strchr(kv, '=');
      if (eq) {
        *eq = 0;
        options[n_options][0] = strdup(kv);
        options[n_options][1] = strdup(eq + 1);
        n_options++;
      }
    }
  }
  fclose(f);
  void* lib = dlopen(driver_path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(init_message, sizeof init_message, "cannot load the ADBC driver %s: %s", driver_path,
             dlerror());
    init_code = EIO;
    return;
  }
  AdbcDriverInitFunc init = (AdbcDriverInitFunc)dlsym(lib, entrypoint);
  if (!init) {
    snprintf(init_message, sizeof init_message, "%s has no entry point %s", driver_path, entrypoint);
    init_code = EIO;
    return;
  }
  struct AdbcError e = {0};
  AdbcStatusCode s = init(ADBC_VERSION_1_0_0, &driver, &e);
  if (s == ADBC_STATUS_OK) s = driver.DatabaseNew(&database, &e);
  for (int i = 0; s == ADBC_STATUS_OK && i < n_options; i++)
    s = driver.DatabaseSetOption(&database, options[i][0], options[i][1], &e);
  if (s == ADBC_STATUS_OK) s = driver.DatabaseInit(&database, &e);
  if (s == ADBC_STATUS_OK) s = driver.ConnectionNew(&connection, &e);
  if (s == ADBC_STATUS_OK) s = driver.ConnectionInit(&connection, &database, &e);
  if (s != ADBC_STATUS_OK) {
    snprintf(init_message, sizeof init_message, "%s (%s): ADBC status %d: %s", driver_path, entrypoint,
             (int)s, e.message ? e.message : "(no message)");
    if (e.release) e.release(&e);
    init_code = EIO;
  }
}

static int ready(void) {
  pthread_once(&init_once, do_init);
  if (init_code) return set_error(init_code, "%s", init_message);
  return 0;
}

ARROWCERT_EXPORT int32_t arrowcert_plugin_abi_version(void) { return ARROWCERT_PLUGIN_ABI_VERSION; }
ARROWCERT_EXPORT const char* arrowcert_plugin_name(void) {
  pthread_once(&init_once, do_init);
  return name;
}
ARROWCERT_EXPORT const char* arrowcert_plugin_load_error(void) {
  pthread_once(&init_once, do_init);
  return init_code ? init_message : NULL;
}

/* ---- statements kept alive -------------------------------------------------- */

/* Two: the result stream of the last call may still be in use when the
   next call comes; anything older would only grow the database, which the
   leak rules (repeated exports, memory measured) would charge to the
   driver. */
#define KEPT 2
static struct {
  struct AdbcStatement stmt;
  char table[64];
  int live;
} kept[KEPT];
static unsigned long calls = 0;

static void drop_table(const char* table) {
  struct AdbcStatement st = {0};
  struct AdbcError e = {0};
  char sql[128];
  snprintf(sql, sizeof sql, "DROP TABLE IF EXISTS %s", table);
  if (driver.StatementNew(&connection, &st, &e) == ADBC_STATUS_OK) {
    if (driver.StatementSetSqlQuery(&st, sql, &e) == ADBC_STATUS_OK)
      (void)driver.StatementExecuteQuery(&st, NULL, NULL, &e);
    (void)driver.StatementRelease(&st, &e);
  }
  if (e.release) e.release(&e);
}

/* A slot for this call's statement (the oldest one's released, its table
   dropped); the table name it will use. With the lock held. */
static int next_slot(void) {
  int i = (int)(calls % KEPT);
  if (kept[i].live) {
    struct AdbcError e = {0};
    (void)driver.StatementRelease(&kept[i].stmt, &e);
    if (e.release) e.release(&e);
    drop_table(kept[i].table);
    kept[i].live = 0;
  }
  snprintf(kept[i].table, sizeof kept[i].table, "arrowcert_%ld_%lu", (long)getpid(), calls);
  calls++;
  return i;
}

/* Ingests `data` (a stream, or one batch) into a new table, then queries
   it into `out`. `producer`: every ingest failure is ENOSYS. */
static int ingest_and_query(struct ArrowArrayStream* data, struct ArrowSchema* schema,
                            struct ArrowArray* batch, struct ArrowArrayStream* out, int producer) {
  int rc = ready();
  if (rc) return rc;
  pthread_mutex_lock(&lock);
  int i = next_slot();
  struct AdbcError e = {0};
  struct AdbcStatement ingest = {0};
  AdbcStatusCode s = driver.StatementNew(&connection, &ingest, &e);
  if (s == ADBC_STATUS_OK) s = driver.StatementSetOption(&ingest, "adbc.ingest.target_table", kept[i].table, &e);
  if (s == ADBC_STATUS_OK) s = driver.StatementSetOption(&ingest, "adbc.ingest.mode", "adbc.ingest.mode.create", &e);
  if (s == ADBC_STATUS_OK)
    s = data ? driver.StatementBindStream(&ingest, data, &e) : driver.StatementBind(&ingest, batch, schema, &e);
  int64_t rows = -1;
  if (s == ADBC_STATUS_OK) s = driver.StatementExecuteQuery(&ingest, NULL, &rows, &e);
  if (s != ADBC_STATUS_OK) {
    /* Whatever the status (SQLite's driver reports a CREATE TABLE the
       database refuses, duplicate column names say, as INTERNAL), the
       database did not take the data: the driver's message says why. */
    (void)producer;
    adbc_failed("bulk ingestion", s, &e);
    char* said = last_error ? strdup(last_error) : NULL;
    if (said && internal_failure(said))
      rc = set_error(ENOTRECOVERABLE, "%s", said);
    else
      rc = set_error(ENOSYS, "the database cannot hold this data: %s", said ? said : "(no message)");
    free(said);
    (void)driver.StatementRelease(&ingest, &e);
    if (e.release) e.release(&e);
    pthread_mutex_unlock(&lock);
    return rc;
  }
  (void)driver.StatementRelease(&ingest, &e);
  if (e.release) e.release(&e);
  memset(&e, 0, sizeof e);
  char sql[160];
  snprintf(sql, sizeof sql, "SELECT * FROM %s", kept[i].table);
  memset(&kept[i].stmt, 0, sizeof kept[i].stmt);
  s = driver.StatementNew(&connection, &kept[i].stmt, &e);
  if (s == ADBC_STATUS_OK) {
    kept[i].live = 1;
    s = driver.StatementSetSqlQuery(&kept[i].stmt, sql, &e);
  }
  if (s == ADBC_STATUS_OK) s = driver.StatementExecuteQuery(&kept[i].stmt, out, &rows, &e);
  if (s != ADBC_STATUS_OK) rc = adbc_failed("reading the table back", s, &e);
  pthread_mutex_unlock(&lock);
  return rc;
}

/* ---- producers ---------------------------------------------------------------- */

ARROWCERT_EXPORT int arrowcert_produce_stream_from_stream(struct ArrowArrayStream* data,
                                                          struct ArrowArrayStream* out) {
  return ingest_and_query(data, NULL, NULL, out, 1);
}

ARROWCERT_EXPORT int arrowcert_produce_schema_from_stream(struct ArrowArrayStream* data,
                                                          struct ArrowSchema* out) {
  struct ArrowArrayStream st = {0};
  int rc = ingest_and_query(data, NULL, NULL, &st, 1);
  if (rc) return rc;
  rc = st.get_schema(&st, out);
  if (rc) {
    const char* m = st.get_last_error ? st.get_last_error(&st) : NULL;
    set_error(rc, "the driver's result stream: get_schema failed: %s", m ? m : "(no message)");
  }
  st.release(&st);
  return rc;
}

/* ---- consumers ---------------------------------------------------------------- */

ARROWCERT_EXPORT int arrowcert_consume_stream_to_stream(struct ArrowArrayStream* stream,
                                                        struct ArrowArrayStream* read) {
  int rc = ingest_and_query(stream, NULL, NULL, read, 0);
  if (stream && stream->release) stream->release(stream);
  return rc;
}

ARROWCERT_EXPORT int arrowcert_consume_array_to_stream(struct ArrowSchema* schema,
                                                       struct ArrowArray* array,
                                                       struct ArrowArrayStream* read) {
  int rc = ingest_and_query(NULL, schema, array, read, 0);
  if (array && array->release) array->release(array);
  if (schema && schema->release) schema->release(schema);
  return rc;
}
