/*
 * arrowcert plugin that embeds CPython and certifies a Python library
 * through the Arrow PyCapsule interface (PyCapsuleInterface.rst): pyarrow,
 * polars or duckdb, chosen at compile time with one of
 *
 *   -DPYCAPSULE_LIB_PYARROW   -DPYCAPSULE_LIB_POLARS   -DPYCAPSULE_LIB_DUCKDB
 *
 * Built by scripts/real/build-pycapsule.sh into
 * target/real/lib/libarrowcert_pycapsule_<library>.so.
 *
 * Producer side: the harness's IPC stream bytes become the library's own
 * object (a small Python glue, embedded below), whose __arrow_c_schema__ /
 * __arrow_c_array__ / __arrow_c_device_array__ / __arrow_c_stream__ method
 * is called; the C structure is then MOVED out of the capsule into the
 * harness's `out` (bitwise copy, the capsule's copy marked released so that
 * the capsule's destructor does not release it). Nothing the library
 * exported is initialised, repaired or wrapped here.
 *
 * Consumer side: the harness's structures are wrapped, where they lie, in
 * PyCapsules with the protocol's names ("arrow_schema", "arrow_array",
 * "arrow_device_array", "arrow_array_stream"), returned by a small Python
 * object's __arrow_c_*__ methods and handed to the library's importer. The
 * capsules' destructors release a structure the library did not move (as
 * the PyCapsule interface asks). What the library read is written back as
 * an IPC stream (pyarrow's or polars' IPC writer).
 *
 * Only the entry points the library can serve are compiled in: the harness
 * reads capabilities from which symbols exist.
 *
 * Python: initialised once per process, only if Py_IsInitialized() is false
 * (several of these plugins can share one libpython in one process); the
 * GIL is released after initialisation and taken with PyGILState_Ensure in
 * every entry point. sys.stdout is redirected to sys.stderr (the harness
 * treats output on stdout as a fault).
 *
 * Environment (all optional):
 *   ARROWCERT_PYCAPSULE_LIBRARY        pyarrow | polars | duckdb: which glue
 *                                      runs (ad-hoc use; the exported entry
 *                                      points stay those of the build)
 *   ARROWCERT_PYCAPSULE_SITE_PACKAGES  the venv's site-packages
 *   ARROWCERT_PYCAPSULE_PYTHONHOME     the interpreter's prefix
 *   ARROWCERT_PYCAPSULE_GLUE           a .py file replacing the embedded glue
 *   ARROWCERT_PYCAPSULE_NO_GC=1        skip gc.collect() after a consume call
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arrowcert_plugin.h"

/* ---- build selection ---------------------------------------------------- */

#if defined(PYCAPSULE_LIB_PYARROW)
#define PYCAPSULE_DEFAULT_LIBRARY "pyarrow"
#define HAVE_PRODUCE_SCHEMA 1
#define HAVE_PRODUCE_ARRAY 1
#define HAVE_PRODUCE_DEVICE_ARRAY 1
#define HAVE_PRODUCE_STREAM 1
/* pyarrow 26 has no __arrow_c_device_stream__ (neither export nor import). */
#define HAVE_CONSUME_ARRAY 1
#define HAVE_CONSUME_DEVICE_ARRAY 1
#define HAVE_CONSUME_STREAM 1
#elif defined(PYCAPSULE_LIB_POLARS)
#define PYCAPSULE_DEFAULT_LIBRARY "polars"
/* polars exports DataFrame.__arrow_c_stream__ and Schema.__arrow_c_schema__
   only; it imports __arrow_c_array__ and __arrow_c_stream__. */
#define HAVE_PRODUCE_SCHEMA 1
#define HAVE_PRODUCE_STREAM 1
#define HAVE_CONSUME_ARRAY 1
#define HAVE_CONSUME_STREAM 1
#elif defined(PYCAPSULE_LIB_DUCKDB)
#define PYCAPSULE_DEFAULT_LIBRARY "duckdb"
/* duckdb relations export __arrow_c_stream__ only and import streams only. */
#define HAVE_PRODUCE_STREAM 1
#define HAVE_CONSUME_STREAM 1
#else
#error "define one of PYCAPSULE_LIB_PYARROW, PYCAPSULE_LIB_POLARS, PYCAPSULE_LIB_DUCKDB"
#endif

#ifndef PYCAPSULE_SITE_PACKAGES
#define PYCAPSULE_SITE_PACKAGES ""
#endif
#ifndef PYCAPSULE_PYTHONHOME
#define PYCAPSULE_PYTHONHOME ""
#endif
#ifndef PYARROW_VERSION
#define PYARROW_VERSION "?"
#endif
#ifndef POLARS_VERSION
#define POLARS_VERSION "?"
#endif
#ifndef DUCKDB_VERSION
#define DUCKDB_VERSION "?"
#endif

/* ---- the Python glue ----------------------------------------------------- */

/* Executed once in a fresh module namespace holding LIBRARY (the selected
   library's name) and C (the helper module defined below). Entry points
   call its produce_* / consume_* functions; describe() turns an exception
   into (errno, message). */
static const char GLUE[] =
#include PYCAPSULE_GLUE_HEADER
    ;

/* ---- errors ------------------------------------------------------------ */

static _Thread_local char* last_error = NULL;

static void clear_error(void) {
  free(last_error);
  last_error = NULL;
}

static int set_error(int code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static int set_error(int code, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  free(last_error);
  last_error = strdup(buf);
  return code;
}

const char* arrowcert_last_error(void) { return last_error; }

void arrowcert_free(void* ptr) { free(ptr); }

/* With the GIL held and a Python exception set: clears it, sets the last
   error from the glue's describe() and returns its errno. */
static PyObject* glue_dict = NULL;

static int error_from_python(const char* where) {
  PyObject *type = NULL, *value = NULL, *tb = NULL;
  PyErr_Fetch(&type, &value, &tb);
  if (type == NULL) return set_error(EIO, "%s: failed without a Python exception", where);
  PyErr_NormalizeException(&type, &value, &tb);
  if (tb != NULL && value != NULL) PyException_SetTraceback(value, tb);
  int code = EIO;
  char* msg = NULL;
  PyObject* describe = glue_dict ? PyDict_GetItemString(glue_dict, "describe") : NULL;
  PyObject* res = describe ? PyObject_CallOneArg(describe, value ? value : Py_None) : NULL;
  if (res != NULL && PyTuple_Check(res) && PyTuple_GET_SIZE(res) == 2) {
    code = (int)PyLong_AsLong(PyTuple_GET_ITEM(res, 0));
    const char* m = PyUnicode_AsUTF8(PyTuple_GET_ITEM(res, 1));
    if (m != NULL) msg = strdup(m);
  }
  if (PyErr_Occurred()) PyErr_Clear();
  Py_XDECREF(res);
  /* Dropping the exception drops its traceback's frames, and with them
     every Python object the failed call still referred to. */
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  if (code <= 0) code = EIO;
  free(last_error);
  size_t n = strlen(where) + (msg ? strlen(msg) : 20) + 3;
  last_error = malloc(n);
  if (last_error) snprintf(last_error, n, "%s: %s", where, msg ? msg : "unknown Python error");
  free(msg);
  return code;
}

/* ---- the helper module the glue calls (capsules over harness structs) --- */

static void capsule_release_schema(PyObject* cap) {
  struct ArrowSchema* s = PyCapsule_GetPointer(cap, "arrow_schema");
  if (s != NULL && s->release != NULL) s->release(s);
  if (s == NULL) PyErr_Clear();
}

static void capsule_release_array(PyObject* cap) {
  struct ArrowArray* a = PyCapsule_GetPointer(cap, "arrow_array");
  if (a != NULL && a->release != NULL) a->release(a);
  if (a == NULL) PyErr_Clear();
}

static void capsule_release_device_array(PyObject* cap) {
  struct ArrowDeviceArray* a = PyCapsule_GetPointer(cap, "arrow_device_array");
  if (a != NULL && a->array.release != NULL) a->array.release(&a->array);
  if (a == NULL) PyErr_Clear();
}

static void capsule_release_stream(PyObject* cap) {
  struct ArrowArrayStream* s = PyCapsule_GetPointer(cap, "arrow_array_stream");
  if (s != NULL && s->release != NULL) s->release(s);
  if (s == NULL) PyErr_Clear();
}

static void capsule_release_device_stream(PyObject* cap) {
  struct ArrowDeviceArrayStream* s = PyCapsule_GetPointer(cap, "arrow_device_array_stream");
  if (s != NULL && s->release != NULL) s->release(s);
  if (s == NULL) PyErr_Clear();
}

/* A schema this plugin allocated (from a harness stream's get_schema). */
static void capsule_free_owned_schema(PyObject* cap) {
  struct ArrowSchema* s = PyCapsule_GetPointer(cap, "arrow_schema");
  if (s == NULL) {
    PyErr_Clear();
    return;
  }
  if (s->release != NULL) s->release(s);
  free(s);
}

/* C.capsule(address, name): a capsule over a structure the harness owns. */
static PyObject* helper_capsule(PyObject* self, PyObject* args) {
  (void)self;
  unsigned long long addr;
  const char* kind;
  if (!PyArg_ParseTuple(args, "Ks", &addr, &kind)) return NULL;
  void* p = (void*)(uintptr_t)addr;
  if (p == NULL) {
    PyErr_SetString(PyExc_ValueError, "NULL structure");
    return NULL;
  }
  if (strcmp(kind, "arrow_schema") == 0)
    return PyCapsule_New(p, "arrow_schema", capsule_release_schema);
  if (strcmp(kind, "arrow_array") == 0)
    return PyCapsule_New(p, "arrow_array", capsule_release_array);
  if (strcmp(kind, "arrow_device_array") == 0)
    return PyCapsule_New(p, "arrow_device_array", capsule_release_device_array);
  if (strcmp(kind, "arrow_array_stream") == 0)
    return PyCapsule_New(p, "arrow_array_stream", capsule_release_stream);
  if (strcmp(kind, "arrow_device_array_stream") == 0)
    return PyCapsule_New(p, "arrow_device_array_stream", capsule_release_device_stream);
  PyErr_Format(PyExc_ValueError, "unknown capsule kind %s", kind);
  return NULL;
}

/* The code of the last failed get_schema the glue itself called, on this
   thread (see helper_stream_schema). */
static _Thread_local int stream_schema_error = 0;

/* C.stream_schema(address): the schema of a harness stream (get_schema),
   in a capsule that owns it. */
static PyObject* helper_stream_schema(PyObject* self, PyObject* args) {
  (void)self;
  unsigned long long addr;
  if (!PyArg_ParseTuple(args, "K", &addr)) return NULL;
  struct ArrowArrayStream* st = (struct ArrowArrayStream*)(uintptr_t)addr;
  if (st == NULL || st->release == NULL) {
    PyErr_SetString(PyExc_ValueError, "the stream is NULL or released");
    return NULL;
  }
  struct ArrowSchema* s = calloc(1, sizeof *s);
  if (s == NULL) return PyErr_NoMemory();
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = st->get_schema(st, s);
  Py_END_ALLOW_THREADS if (rc != 0) {
    const char* m = st->get_last_error ? st->get_last_error(st) : NULL;
    /* The importer wraps this exception in its own, losing the code: the
       consume call returns it (stream_schema_error) if it then fails. */
    stream_schema_error = rc;
    PyErr_Format(PyExc_OSError, "get_schema failed with %d: %s", rc, m ? m : "(no message)");
    free(s);
    return NULL;
  }
  PyObject* cap = PyCapsule_New(s, "arrow_schema", capsule_free_owned_schema);
  if (cap == NULL) {
    if (s->release) s->release(s);
    free(s);
  }
  return cap;
}

static PyMethodDef helper_methods[] = {
    {"capsule", helper_capsule, METH_VARARGS, "capsule(address, name)"},
    {"stream_schema", helper_stream_schema, METH_VARARGS, "stream_schema(address)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef helper_module = {PyModuleDef_HEAD_INIT, "_arrowcert_pycapsule_c",
                                           NULL, -1, helper_methods, NULL, NULL, NULL, NULL};

/* ---- initialisation ------------------------------------------------------ */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_code = 0;
static char init_message[2048];
static int run_gc = 1;

static const char* library(void) {
  const char* e = getenv("ARROWCERT_PYCAPSULE_LIBRARY");
  return (e && *e) ? e : PYCAPSULE_DEFAULT_LIBRARY;
}

static const char* env_or(const char* name, const char* fallback) {
  const char* e = getenv(name);
  return (e && *e) ? e : fallback;
}

static char* read_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  if (buf) buf[n] = 0;
  fclose(f);
  return buf;
}

/* With the GIL held: site-packages, stdout, the helper module, the glue. */
static int setup_python(void) {
  const char* lib = library();
  if (strcmp(lib, "pyarrow") && strcmp(lib, "polars") && strcmp(lib, "duckdb")) {
    snprintf(init_message, sizeof init_message,
             "ARROWCERT_PYCAPSULE_LIBRARY=%s: expected pyarrow, polars or duckdb", lib);
    return EINVAL;
  }
  const char* site = env_or("ARROWCERT_PYCAPSULE_SITE_PACKAGES", PYCAPSULE_SITE_PACKAGES);
  PyObject* setup_globals = PyDict_New();
  PyObject* site_str = PyUnicode_FromString(site);
  int ok = setup_globals && site_str &&
           PyDict_SetItemString(setup_globals, "__builtins__", PyEval_GetBuiltins()) == 0 &&
           PyDict_SetItemString(setup_globals, "SITE", site_str) == 0;
  if (ok) {
    /* addsitedir also runs the venv's .pth files; stdout goes to stderr. */
    PyObject* r = PyRun_String(
        "import site, sys\n"
        "if SITE and SITE not in sys.path:\n"
        "    site.addsitedir(SITE)\n"
        "if sys.stdout is not sys.stderr:\n"
        "    sys.stdout = sys.stderr\n",
        Py_file_input, setup_globals, setup_globals);
    ok = r != NULL;
    Py_XDECREF(r);
  }
  Py_XDECREF(site_str);
  Py_XDECREF(setup_globals);
  if (!ok) goto fail;

  PyObject* helper = PyModule_Create(&helper_module);
  if (helper == NULL) goto fail;
  PyObject* mod = PyModule_New("_arrowcert_pycapsule_glue");
  if (mod == NULL) {
    Py_DECREF(helper);
    goto fail;
  }
  PyObject* d = PyModule_GetDict(mod); /* borrowed */
  PyObject* lib_str = PyUnicode_FromString(lib);
  ok = lib_str && PyDict_SetItemString(d, "__builtins__", PyEval_GetBuiltins()) == 0 &&
       PyDict_SetItemString(d, "C", helper) == 0 && PyDict_SetItemString(d, "LIBRARY", lib_str) == 0;
  Py_XDECREF(lib_str);
  Py_DECREF(helper);
  if (ok) {
    const char* glue_path = getenv("ARROWCERT_PYCAPSULE_GLUE");
    char* src = NULL;
    if (glue_path && *glue_path) {
      src = read_file(glue_path);
      if (src == NULL) {
        snprintf(init_message, sizeof init_message, "cannot read ARROWCERT_PYCAPSULE_GLUE=%s",
                 glue_path);
        Py_DECREF(mod);
        return EINVAL;
      }
    }
    PyObject* code = Py_CompileString(src ? src : GLUE, src ? glue_path : "<arrowcert pycapsule glue>",
                                      Py_file_input);
    free(src);
    PyObject* r = code ? PyEval_EvalCode(code, d, d) : NULL;
    ok = r != NULL;
    Py_XDECREF(r);
    Py_XDECREF(code);
  }
  if (ok) {
    /* Import the library now: a broken installation fails here, clearly. */
    PyObject* m = PyImport_ImportModule(lib);
    ok = m != NULL;
    Py_XDECREF(m);
  }
  if (!ok) {
    Py_DECREF(mod);
    goto fail;
  }
  Py_INCREF(d);
  glue_dict = d; /* keeps the module's namespace; the module object may go */
  Py_DECREF(mod);
  return 0;

fail:;
  PyObject *type = NULL, *value = NULL, *tb = NULL;
  PyErr_Fetch(&type, &value, &tb);
  PyObject* s = value ? PyObject_Str(value) : NULL;
  const char* m = s ? PyUnicode_AsUTF8(s) : NULL;
  snprintf(init_message, sizeof init_message, "Python setup failed (site-packages %s): %s%s%s",
           site, type ? ((PyTypeObject*)type)->tp_name : "", m ? ": " : "", m ? m : "");
  if (PyErr_Occurred()) PyErr_Clear();
  Py_XDECREF(s);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return EIO;
}

static void do_init(void) {
  run_gc = !(getenv("ARROWCERT_PYCAPSULE_NO_GC") && *getenv("ARROWCERT_PYCAPSULE_NO_GC") == '1');
  /* The harness dlopens plugins RTLD_LOCAL, which would hide libpython's
     symbols from the extension modules (pyarrow, polars, duckdb) Python
     loads later: make them global. */
  Dl_info info;
  if (dladdr((void*)&Py_IsInitialized, &info) && info.dli_fname) {
    if (!dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD)) {
      snprintf(init_message, sizeof init_message, "cannot make %s global: %s", info.dli_fname,
               dlerror());
      init_code = EIO;
      return;
    }
  }
  int we_initialised = 0;
  if (!Py_IsInitialized()) {
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0;
    config.parse_argv = 0;
    config.user_site_directory = 0;
    const char* home = env_or("ARROWCERT_PYCAPSULE_PYTHONHOME", PYCAPSULE_PYTHONHOME);
    PyStatus st = PyStatus_Ok();
    if (home[0]) st = PyConfig_SetBytesString(&config, &config.home, home);
    if (!PyStatus_Exception(st)) st = PyConfig_SetBytesString(&config, &config.program_name, "python3");
    if (!PyStatus_Exception(st)) st = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(st)) {
      snprintf(init_message, sizeof init_message, "Python initialisation failed (home %s): %s%s%s",
               home, st.func ? st.func : "", st.func ? ": " : "", st.err_msg ? st.err_msg : "");
      init_code = EIO;
      return;
    }
    we_initialised = 1;
  }
  PyGILState_STATE g = PyGILState_Ensure();
  init_code = setup_python();
  PyGILState_Release(g);
  /* The main thread state initialisation left holding the GIL: let go of
     it, so that every entry point (on any thread) can take it. */
  if (we_initialised) (void)PyEval_SaveThread();
}

static int ensure_python(void) {
  pthread_once(&init_once, do_init);
  if (init_code != 0) return set_error(init_code, "%s", init_message);
  return 0;
}

/* ---- calling the glue ---------------------------------------------------- */

/* With the GIL held: glue[name](*args) (steals args). */
static int call_glue(const char* name, PyObject* args, PyObject** result) {
  *result = NULL;
  if (args == NULL) return error_from_python(name);
  PyObject* fn = PyDict_GetItemString(glue_dict, name); /* borrowed */
  if (fn == NULL) {
    Py_DECREF(args);
    return set_error(ENOSYS, "%s: not in the glue", name);
  }
  PyObject* r = PyObject_CallObject(fn, args);
  Py_DECREF(args);
  if (r == NULL) return error_from_python(name);
  *result = r;
  return 0;
}

static void collect_garbage(void) {
  if (!run_gc) return;
  PyObject* gc = PyImport_ImportModule("gc");
  PyObject* r = gc ? PyObject_CallMethod(gc, "collect", NULL) : NULL;
  Py_XDECREF(r);
  Py_XDECREF(gc);
  if (PyErr_Occurred()) PyErr_Clear();
}

#if defined(HAVE_PRODUCE_SCHEMA) || defined(HAVE_PRODUCE_ARRAY) || \
    defined(HAVE_PRODUCE_DEVICE_ARRAY) || defined(HAVE_PRODUCE_STREAM) || \
    defined(HAVE_PRODUCE_DEVICE_STREAM)
static PyObject* ipc_bytes(const uint8_t* ipc, int64_t ipc_len) {
  if (ipc_len < 0 || (ipc == NULL && ipc_len > 0)) {
    PyErr_Format(PyExc_ValueError, "invalid IPC input (%p, %lld bytes)", (const void*)ipc,
                 (long long)ipc_len);
    return NULL;
  }
  return PyBytes_FromStringAndSize((const char*)ipc, (Py_ssize_t)ipc_len);
}

/* Moves the structure out of a capsule the library made: bitwise copy
   into `out`, then the capsule's copy marked released (its `release` set to
   NULL, `release_offset` bytes into it) so the capsule's destructor leaves
   it alone. */
static int move_out(PyObject* capsule, const char* name, void* out, size_t size,
                    size_t release_offset) {
  if (!PyCapsule_IsValid(capsule, name)) {
    const char* got = PyCapsule_CheckExact(capsule) ? PyCapsule_GetName(capsule) : NULL;
    if (PyErr_Occurred()) PyErr_Clear();
    return set_error(EIO, "the library returned %s, not a PyCapsule named \"%s\"",
                     PyCapsule_CheckExact(capsule) ? (got ? got : "a capsule without a name")
                                                   : Py_TYPE(capsule)->tp_name,
                     name);
  }
  void* p = PyCapsule_GetPointer(capsule, name);
  if (p == NULL) return error_from_python("PyCapsule_GetPointer");
  void* release;
  memcpy(&release, (char*)p + release_offset, sizeof release);
  if (release == NULL) return set_error(EIO, "the library's \"%s\" capsule holds a released structure", name);
  memcpy(out, p, size);
  memset((char*)p + release_offset, 0, sizeof(void*));
  return 0;
}

/* An element of a (schema, array) tuple the library returned. */
static __attribute__((unused)) PyObject* pair_item(PyObject* pair, Py_ssize_t i) {
  if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) return NULL;
  return PyTuple_GET_ITEM(pair, i);
}
#endif

#define ENTER()                 \
  clear_error();                \
  {                             \
    int init_rc = ensure_python(); \
    if (init_rc != 0) return init_rc; \
  }

/* ---- identity -------------------------------------------------------------- */

int32_t arrowcert_plugin_abi_version(void) { return ARROWCERT_PLUGIN_ABI_VERSION; }

const char* arrowcert_plugin_name(void) {
  const char* lib = library();
  if (strcmp(lib, "pyarrow") == 0) return "pyarrow " PYARROW_VERSION " (PyCapsule)";
  if (strcmp(lib, "polars") == 0) return "polars " POLARS_VERSION " (PyCapsule)";
  if (strcmp(lib, "duckdb") == 0) return "duckdb " DUCKDB_VERSION " (PyCapsule)";
  return PYCAPSULE_DEFAULT_LIBRARY " (PyCapsule, unknown ARROWCERT_PYCAPSULE_LIBRARY)";
}

/* Host memory only: none of the libraries exports or imports device data
   through the PyCapsule interface here. */
int32_t arrowcert_plugin_supports_device(int32_t device_type) {
  return device_type == ARROW_DEVICE_CPU;
}

/* ---- producers ------------------------------------------------------------- */

#ifdef HAVE_PRODUCE_SCHEMA
int arrowcert_produce_schema(const uint8_t* ipc, int64_t ipc_len, struct ArrowSchema* out) {
  ENTER();
  if (out == NULL) return set_error(EINVAL, "out is NULL");
  PyGILState_STATE g = PyGILState_Ensure();
  PyObject* cap = NULL;
  int rc = call_glue("produce_schema", Py_BuildValue("(N)", ipc_bytes(ipc, ipc_len)), &cap);
  if (rc == 0) rc = move_out(cap, "arrow_schema", out, sizeof *out, offsetof(struct ArrowSchema, release));
  Py_XDECREF(cap);
  PyGILState_Release(g);
  return rc;
}
#endif

#ifdef HAVE_PRODUCE_ARRAY
int arrowcert_produce_array(const uint8_t* ipc, int64_t ipc_len, int64_t batch_index,
                            int64_t slice_offset, int64_t slice_length, struct ArrowArray* out) {
  ENTER();
  if (out == NULL) return set_error(EINVAL, "out is NULL");
  PyGILState_STATE g = PyGILState_Ensure();
  PyObject* pair = NULL;
  int rc = call_glue("produce_array",
                     Py_BuildValue("(NLLL)", ipc_bytes(ipc, ipc_len), (long long)batch_index,
                                   (long long)slice_offset, (long long)slice_length),
                     &pair);
  if (rc == 0) {
    PyObject* cap = pair_item(pair, 1);
    rc = cap ? move_out(cap, "arrow_array", out, sizeof *out, offsetof(struct ArrowArray, release))
             : set_error(EIO, "__arrow_c_array__ did not return a (schema, array) pair");
  }
  Py_XDECREF(pair); /* the schema capsule's destructor releases the schema */
  PyGILState_Release(g);
  return rc;
}
#endif

#ifdef HAVE_PRODUCE_DEVICE_ARRAY
int arrowcert_produce_device_array(const uint8_t* ipc, int64_t ipc_len, int64_t batch_index,
                                   int64_t slice_offset, int64_t slice_length, int32_t device_type,
                                   int64_t device_id, struct ArrowDeviceArray* out) {
  ENTER();
  if (out == NULL) return set_error(EINVAL, "out is NULL");
  if (device_type != ARROW_DEVICE_CPU)
    return set_error(ENOSYS, "%s exports host memory only (asked for device type %d, id %lld)",
                     library(), (int)device_type, (long long)device_id);
  PyGILState_STATE g = PyGILState_Ensure();
  PyObject* pair = NULL;
  int rc = call_glue("produce_device_array",
                     Py_BuildValue("(NLLL)", ipc_bytes(ipc, ipc_len), (long long)batch_index,
                                   (long long)slice_offset, (long long)slice_length),
                     &pair);
  if (rc == 0) {
    PyObject* cap = pair_item(pair, 1);
    rc = cap ? move_out(cap, "arrow_device_array", out, sizeof *out,
                        offsetof(struct ArrowDeviceArray, array) + offsetof(struct ArrowArray, release))
             : set_error(EIO, "__arrow_c_device_array__ did not return a (schema, array) pair");
  }
  Py_XDECREF(pair);
  PyGILState_Release(g);
  return rc;
}
#endif

#ifdef HAVE_PRODUCE_STREAM
int arrowcert_produce_stream(const uint8_t* ipc, int64_t ipc_len, struct ArrowArrayStream* out) {
  ENTER();
  if (out == NULL) return set_error(EINVAL, "out is NULL");
  PyGILState_STATE g = PyGILState_Ensure();
  PyObject* cap = NULL;
  int rc = call_glue("produce_stream", Py_BuildValue("(N)", ipc_bytes(ipc, ipc_len)), &cap);
  if (rc == 0)
    rc = move_out(cap, "arrow_array_stream", out, sizeof *out,
                  offsetof(struct ArrowArrayStream, release));
  Py_XDECREF(cap);
  PyGILState_Release(g);
  return rc;
}
#endif

#ifdef HAVE_PRODUCE_DEVICE_STREAM
int arrowcert_produce_device_stream(const uint8_t* ipc, int64_t ipc_len, int32_t device_type,
                                    int64_t device_id, struct ArrowDeviceArrayStream* out) {
  ENTER();
  if (out == NULL) return set_error(EINVAL, "out is NULL");
  if (device_type != ARROW_DEVICE_CPU)
    return set_error(ENOSYS, "%s exports host memory only (asked for device type %d, id %lld)",
                     library(), (int)device_type, (long long)device_id);
  PyGILState_STATE g = PyGILState_Ensure();
  PyObject* cap = NULL;
  int rc = call_glue("produce_device_stream", Py_BuildValue("(N)", ipc_bytes(ipc, ipc_len)), &cap);
  if (rc == 0)
    rc = move_out(cap, "arrow_device_array_stream", out, sizeof *out,
                  offsetof(struct ArrowDeviceArrayStream, release));
  Py_XDECREF(cap);
  PyGILState_Release(g);
  return rc;
}
#endif

/* ---- consumers ------------------------------------------------------------- */

#if defined(HAVE_CONSUME_ARRAY) || defined(HAVE_CONSUME_DEVICE_ARRAY) || \
    defined(HAVE_CONSUME_STREAM) || defined(HAVE_CONSUME_DEVICE_STREAM)
/* Copies what the glue returned (bytes, pyarrow Buffer: any buffer) into
   malloc'd memory for the harness. */
static int hand_out(PyObject* obj, uint8_t** out_ipc, int64_t* out_len) {
  Py_buffer view;
  if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) != 0) return error_from_python("output");
  uint8_t* mem = malloc(view.len > 0 ? (size_t)view.len : 1);
  if (mem == NULL) {
    PyBuffer_Release(&view);
    return set_error(ENOMEM, "cannot allocate %zd bytes for the output", view.len);
  }
  memcpy(mem, view.buf, (size_t)view.len);
  *out_ipc = mem;
  *out_len = (int64_t)view.len;
  PyBuffer_Release(&view);
  return 0;
}

static PyObject* address(const void* p) { return PyLong_FromUnsignedLongLong((uintptr_t)p); }

/* After the library is done (and Python's garbage is collected): a
   structure still live at the harness's address was neither moved nor
   released by the library, which happens only when the call failed before
   any capsule over it existed; release it, as the consumer must. */
static __attribute__((unused)) void release_schema_if_live(struct ArrowSchema* s) {
  if (s != NULL && s->release != NULL) s->release(s);
}
static __attribute__((unused)) void release_array_if_live(struct ArrowArray* a) {
  if (a != NULL && a->release != NULL) a->release(a);
}
#endif

#if defined(HAVE_CONSUME_ARRAY) || defined(HAVE_CONSUME_DEVICE_ARRAY)
static int consume_pair(const char* fn, struct ArrowSchema* schema, void* array,
                        struct ArrowArray* base, uint8_t** out_ipc, int64_t* out_len) {
  int rc = ensure_python();
  if (rc == 0 && (out_ipc == NULL || out_len == NULL))
    rc = set_error(EINVAL, "out_ipc or out_len is NULL");
  if (rc == 0 && (schema == NULL || array == NULL)) rc = set_error(EINVAL, "schema or array is NULL");
  if (rc != 0) {
    /* nothing was handed to Python; release what the harness gave */
    release_schema_if_live(schema);
    release_array_if_live(base);
    return rc;
  }
  PyGILState_STATE g = PyGILState_Ensure();
  PyObject* res = NULL;
  rc = call_glue(fn, Py_BuildValue("(NN)", address(schema), address(array)), &res);
  if (rc == 0) rc = hand_out(res, out_ipc, out_len);
  Py_XDECREF(res);
  collect_garbage();
  PyGILState_Release(g);
  release_schema_if_live(schema);
  release_array_if_live(base);
  return rc;
}
#endif

#ifdef HAVE_CONSUME_ARRAY
int arrowcert_consume_array(struct ArrowSchema* schema, struct ArrowArray* array, uint8_t** out_ipc,
                            int64_t* out_len) {
  clear_error();
  return consume_pair("consume_array", schema, array, array, out_ipc, out_len);
}
#endif

#ifdef HAVE_CONSUME_DEVICE_ARRAY
int arrowcert_consume_device_array(struct ArrowSchema* schema, struct ArrowDeviceArray* array,
                                   uint8_t** out_ipc, int64_t* out_len) {
  clear_error();
  return consume_pair("consume_device_array", schema, array, array ? &array->array : NULL, out_ipc,
                      out_len);
}
#endif

#ifdef HAVE_CONSUME_STREAM
int arrowcert_consume_stream(struct ArrowArrayStream* stream, uint8_t** out_ipc, int64_t* out_len) {
  clear_error();
  int rc = ensure_python();
  if (rc == 0 && (out_ipc == NULL || out_len == NULL))
    rc = set_error(EINVAL, "out_ipc or out_len is NULL");
  if (rc == 0 && stream == NULL) rc = set_error(EINVAL, "stream is NULL");
  if (rc == 0) {
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject* res = NULL;
    stream_schema_error = 0;
    rc = call_glue("consume_stream", Py_BuildValue("(N)", address(stream)), &res);
    if (rc != 0 && stream_schema_error != 0) rc = stream_schema_error;
    if (rc == 0) rc = hand_out(res, out_ipc, out_len);
    Py_XDECREF(res);
    collect_garbage();
    PyGILState_Release(g);
  }
  if (stream != NULL && stream->release != NULL) stream->release(stream);
  return rc;
}
#endif

#ifdef HAVE_CONSUME_DEVICE_STREAM
int arrowcert_consume_device_stream(struct ArrowDeviceArrayStream* stream, uint8_t** out_ipc,
                                    int64_t* out_len) {
  clear_error();
  int rc = ensure_python();
  if (rc == 0 && (out_ipc == NULL || out_len == NULL))
    rc = set_error(EINVAL, "out_ipc or out_len is NULL");
  if (rc == 0 && stream == NULL) rc = set_error(EINVAL, "stream is NULL");
  if (rc == 0) {
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject* res = NULL;
    rc = call_glue("consume_device_stream", Py_BuildValue("(N)", address(stream)), &res);
    if (rc == 0) rc = hand_out(res, out_ipc, out_len);
    Py_XDECREF(res);
    collect_garbage();
    PyGILState_Release(g);
  }
  if (stream != NULL && stream->release != NULL) stream->release(stream);
  return rc;
}
#endif
