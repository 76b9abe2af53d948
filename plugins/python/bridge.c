/*
 * arrowcert's Python adapter bridge: an arrowcert plugin that embeds CPython
 * and certifies a Python library through the Arrow PyCapsule interface
 * (PyCapsuleInterface.rst), driven by a small adapter file the user writes
 * (docs/PYTHON_ADAPTERS.md):
 *
 *   def load(data): ...   # producer: the harness's data -> the library's object
 *   def read(data): ...   # consumer: the library imports what the harness hands
 *
 * The harness never loads this library as it is built: for each adapter it
 * copies it next to a file `<copy>.adapter` that names the adapter (and the
 * interpreter's site-packages), and loads the copy (`--producer py:FILE.py`).
 * Each copy has its own state; copies share the process's one interpreter.
 *
 * It speaks the contract's stream variants only (docs/PLUGIN_ABI.md, "Data
 * as a stream"): the harness's data comes in as an ArrowArrayStream, which
 * the glue (bridge.py, embedded) offers to `load` as an object with
 * __arrow_c_stream__ / __arrow_c_schema__ (/ __arrow_c_array__ for one
 * batch); the object `load` returns is exported through its own dunder
 * methods, and the structure is MOVED out of the capsule into the harness's
 * `out`. A consumer's `read` gets the harness's structures wrapped, where
 * they lie, in capsules with the protocol's names; what it returns is
 * exported through its own __arrow_c_stream__ (or __arrow_c_array__) and
 * handed back to the harness, which validates it. No IPC on either side.
 *
 * Which entry points it serves (arrowcert_plugin_offers) is what the adapter
 * can do, found when it is loaded: `load` on a small probe and the dunders
 * of what it returns; `read` on the probe in each form.
 *
 * Written against CPython's stable ABI (Py_LIMITED_API, 3.10 and later) and
 * linked against no libpython: harness/build.rs builds it once, the
 * arrowcert binary carries it (assets.rs), and the harness loads the chosen
 * interpreter's libpython RTLD_GLOBAL before loading a copy of it
 * (plugin::python::preload_libpython), so one build serves every CPython
 * >= 3.10 and `py:` needs no C compiler or Python headers at run time.
 * scripts/python/build-bridge.sh builds the same source against one
 * interpreter (a source checkout's fallback when the binary has none).
 */
#define PY_SSIZE_T_CLEAN
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
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
#include <unistd.h>
#include <wchar.h>

#include "arrowcert_plugin.h"

/* PyUnicode_AsUTF8 is in the limited API from 3.13 only; this is the same
   (the UTF-8 form lives as long as the object), for 3.10 and later. */
static const char* utf8_of(PyObject* o) { return PyUnicode_AsUTF8AndSize(o, NULL); }

/* A type's tp_name for a message (out of the limited API), rebuilt: a
   class defined in Python (a heap type) is its __name__; a C type is
   __module__.__qualname__, builtins without the module. Never fails;
   clears any error it meets. */
static const char* type_name(PyObject* type) {
  static _Thread_local char buf[256];
  int heap = PyType_Check(type) && (PyType_GetFlags((PyTypeObject*)type) & Py_TPFLAGS_HEAPTYPE);
  PyObject* mod = heap ? NULL : PyObject_GetAttrString(type, "__module__");
  PyObject* name = PyObject_GetAttrString(type, heap ? "__name__" : "__qualname__");
  const char* m = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8AndSize(mod, NULL) : NULL;
  const char* n = name && PyUnicode_Check(name) ? PyUnicode_AsUTF8AndSize(name, NULL) : NULL;
  if (m != NULL && strcmp(m, "builtins") != 0)
    snprintf(buf, sizeof buf, "%s.%s", m, n ? n : "?");
  else
    snprintf(buf, sizeof buf, "%s", n ? n : "an object");
  Py_XDECREF(mod);
  Py_XDECREF(name);
  if (PyErr_Occurred()) PyErr_Clear();
  return buf;
}

static const char GLUE[] =
#include BRIDGE_GLUE_HEADER
    ;

/* ---- errors ------------------------------------------------------------ */

static _Thread_local char* last_error = NULL;

static void clear_error(void) {
  free(last_error);
  last_error = NULL;
}

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

static PyObject* glue_dict = NULL;

/* With the GIL held and a Python exception set: clears it, sets the last
   error from the glue's describe() and returns its errno. */
static int error_from_python(const char* where) {
  PyObject *type = NULL, *value = NULL, *tb = NULL;
  PyErr_Fetch(&type, &value, &tb);
  if (type == NULL) return set_error(EIO, "%s: failed without a Python exception", where);
  PyErr_NormalizeException(&type, &value, &tb);
  if (tb != NULL && value != NULL) PyException_SetTraceback(value, tb);
  int code = EIO;
  char* msg = NULL;
  PyObject* describe = glue_dict ? PyDict_GetItemString(glue_dict, "describe") : NULL;
  PyObject* res = describe ? PyObject_CallFunctionObjArgs(describe, value ? value : Py_None, NULL) : NULL;
  if (res != NULL && PyTuple_Check(res) && PyTuple_Size(res) == 2) {
    code = (int)PyLong_AsLong(PyTuple_GetItem(res, 0));
    const char* m = utf8_of(PyTuple_GetItem(res, 1));
    if (m != NULL) msg = strdup(m);
  }
  if (PyErr_Occurred()) PyErr_Clear();
  Py_XDECREF(res);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  if (code <= 0) code = EIO;
  int rc = set_error(code, "%s: %s", where, msg ? msg : "unknown Python error");
  free(msg);
  return rc;
}

/* ---- capsules ------------------------------------------------------------ */

/* Over a structure the harness owns, where it lies: the destructor releases
   it unless the library moved it out. */
static void release_schema_in_place(PyObject* cap) {
  struct ArrowSchema* s = PyCapsule_GetPointer(cap, "arrow_schema");
  if (s != NULL && s->release != NULL) s->release(s);
  if (s == NULL) PyErr_Clear();
}
static void release_array_in_place(PyObject* cap) {
  struct ArrowArray* a = PyCapsule_GetPointer(cap, "arrow_array");
  if (a != NULL && a->release != NULL) a->release(a);
  if (a == NULL) PyErr_Clear();
}
static void release_device_array_in_place(PyObject* cap) {
  struct ArrowDeviceArray* a = PyCapsule_GetPointer(cap, "arrow_device_array");
  if (a != NULL && a->array.release != NULL) a->array.release(&a->array);
  if (a == NULL) PyErr_Clear();
}
static void release_stream_in_place(PyObject* cap) {
  struct ArrowArrayStream* s = PyCapsule_GetPointer(cap, "arrow_array_stream");
  if (s != NULL && s->release != NULL) s->release(s);
  if (s == NULL) PyErr_Clear();
}
static void release_device_stream_in_place(PyObject* cap) {
  struct ArrowDeviceArrayStream* s = PyCapsule_GetPointer(cap, "arrow_device_array_stream");
  if (s != NULL && s->release != NULL) s->release(s);
  if (s == NULL) PyErr_Clear();
}

/* Over a malloc'd structure of the bridge's own (moved out of the
   harness's): released if still live, then freed. */
static void free_schema(PyObject* cap) {
  struct ArrowSchema* s = PyCapsule_GetPointer(cap, "arrow_schema");
  if (s == NULL) { PyErr_Clear(); return; }
  if (s->release != NULL) s->release(s);
  free(s);
}
static void free_array(PyObject* cap) {
  struct ArrowArray* a = PyCapsule_GetPointer(cap, "arrow_array");
  if (a == NULL) { PyErr_Clear(); return; }
  if (a->release != NULL) a->release(a);
  free(a);
}
static void free_stream(PyObject* cap) {
  struct ArrowArrayStream* s = PyCapsule_GetPointer(cap, "arrow_array_stream");
  if (s == NULL) { PyErr_Clear(); return; }
  if (s->release != NULL) s->release(s);
  free(s);
}

static void* parse_address(PyObject* args) {
  unsigned long long addr;
  if (!PyArg_ParseTuple(args, "K", &addr)) return NULL;
  if (addr == 0) PyErr_SetString(PyExc_ValueError, "NULL structure");
  return (void*)(uintptr_t)addr;
}

/* Capsules made over the harness's structures in the running consume
   call (this thread): none means read() never got them. */
static _Thread_local int capsules_made = 0;

/* C.capsule(address, name): a capsule over a structure the harness owns. */
static PyObject* helper_capsule(PyObject* self, PyObject* args) {
  (void)self;
  capsules_made++;
  unsigned long long addr;
  const char* kind;
  if (!PyArg_ParseTuple(args, "Ks", &addr, &kind)) return NULL;
  void* p = (void*)(uintptr_t)addr;
  if (p == NULL) {
    PyErr_SetString(PyExc_ValueError, "NULL structure");
    return NULL;
  }
  if (strcmp(kind, "arrow_schema") == 0) return PyCapsule_New(p, "arrow_schema", release_schema_in_place);
  if (strcmp(kind, "arrow_array") == 0) return PyCapsule_New(p, "arrow_array", release_array_in_place);
  if (strcmp(kind, "arrow_device_array") == 0)
    return PyCapsule_New(p, "arrow_device_array", release_device_array_in_place);
  if (strcmp(kind, "arrow_array_stream") == 0)
    return PyCapsule_New(p, "arrow_array_stream", release_stream_in_place);
  if (strcmp(kind, "arrow_device_array_stream") == 0)
    return PyCapsule_New(p, "arrow_device_array_stream", release_device_stream_in_place);
  PyErr_Format(PyExc_ValueError, "unknown capsule kind %s", kind);
  return NULL;
}

static PyObject* stream_failed_of(struct ArrowArrayStream* st, const char* whose, const char* call,
                                  int rc) {
  const char* m = st->get_last_error ? st->get_last_error(st) : NULL;
  PyErr_Format(PyExc_OSError, "%s: %s failed with %d: %s", whose, call, rc, m ? m : "(no message)");
  return NULL;
}

static PyObject* stream_failed(struct ArrowArrayStream* st, const char* call, int rc) {
  return stream_failed_of(st, "the harness's stream", call, rc);
}

/* get_schema of the live stream `st` (`whose`, for messages), in a capsule
   that owns the result; the stream stays where it is. */
static PyObject* schema_capsule(struct ArrowArrayStream* st, const char* whose) {
  struct ArrowSchema* s = calloc(1, sizeof *s);
  if (s == NULL) return PyErr_NoMemory();
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = st->get_schema(st, s);
  Py_END_ALLOW_THREADS
  if (rc != 0) {
    free(s);
    return stream_failed_of(st, whose, "get_schema", rc);
  }
  PyObject* cap = PyCapsule_New(s, "arrow_schema", free_schema);
  if (cap == NULL) {
    if (s->release != NULL) s->release(s);
    free(s);
  }
  return cap;
}

/* C.stream_schema(address): get_schema of a harness stream, in a capsule
   that owns the result. The stream stays where it is. */
static PyObject* helper_stream_schema(PyObject* self, PyObject* args) {
  (void)self;
  struct ArrowArrayStream* st = parse_address(args);
  if (st == NULL) return NULL;
  if (st->release == NULL) {
    PyErr_SetString(PyExc_ValueError, "the harness's stream was already taken");
    return NULL;
  }
  return schema_capsule(st, "the harness's stream");
}

/* C.take_stream(address): the harness's stream moved into a capsule of the
   bridge's own (so the library may keep it past the call). */
static PyObject* helper_take_stream(PyObject* self, PyObject* args) {
  (void)self;
  struct ArrowArrayStream* st = parse_address(args);
  if (st == NULL) return NULL;
  if (st->release == NULL) {
    PyErr_SetString(PyExc_ValueError, "the harness's stream was already taken");
    return NULL;
  }
  struct ArrowArrayStream* moved = malloc(sizeof *moved);
  if (moved == NULL) return PyErr_NoMemory();
  *moved = *st;
  st->release = NULL;
  PyObject* cap = PyCapsule_New(moved, "arrow_array_stream", free_stream);
  if (cap == NULL) {
    moved->release(moved);
    free(moved);
  }
  return cap;
}

/* C.take_batch(address): (schema, array) capsules of the stream's first
   (only) batch; the stream is released. */
static PyObject* helper_take_batch(PyObject* self, PyObject* args) {
  (void)self;
  struct ArrowArrayStream* st = parse_address(args);
  if (st == NULL) return NULL;
  if (st->release == NULL) {
    PyErr_SetString(PyExc_ValueError, "the harness's stream was already taken");
    return NULL;
  }
  struct ArrowSchema* s = calloc(1, sizeof *s);
  struct ArrowArray* a = calloc(1, sizeof *a);
  if (s == NULL || a == NULL) {
    free(s);
    free(a);
    return PyErr_NoMemory();
  }
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = st->get_schema(st, s);
  if (rc == 0) rc = -st->get_next(st, a);
  Py_END_ALLOW_THREADS
  if (rc != 0 || a->release == NULL) {
    PyObject* r = rc != 0 ? stream_failed(st, rc > 0 ? "get_schema" : "get_next", rc > 0 ? rc : -rc)
                          : (PyErr_SetString(PyExc_ValueError, "the harness's stream has no batch"), NULL);
    if (s->release) s->release(s);
    if (a->release) a->release(a);
    free(s);
    free(a);
    st->release(st);
    return r;
  }
  st->release(st);
  PyObject* sc = PyCapsule_New(s, "arrow_schema", free_schema);
  PyObject* ac = PyCapsule_New(a, "arrow_array", free_array);
  if (sc == NULL || ac == NULL) {
    Py_XDECREF(sc);
    Py_XDECREF(ac);
    return NULL;
  }
  return Py_BuildValue("(NN)", sc, ac);
}

/* C.schema_of_stream(capsule): get_schema of a stream the library
   exported (an "arrow_array_stream" capsule), in a capsule that owns the
   result; the stream stays in its capsule. */
static PyObject* helper_schema_of_stream(PyObject* self, PyObject* args) {
  (void)self;
  PyObject* cap;
  if (!PyArg_ParseTuple(args, "O", &cap)) return NULL;
  struct ArrowArrayStream* st = PyCapsule_GetPointer(cap, "arrow_array_stream");
  if (st == NULL) return NULL;
  if (st->release == NULL) {
    PyErr_SetString(PyExc_ValueError, "the library's stream capsule holds a released stream");
    return NULL;
  }
  return schema_capsule(st, "the library's stream");
}

static void free_device_array(PyObject* cap) {
  struct ArrowDeviceArray* a = PyCapsule_GetPointer(cap, "arrow_device_array");
  if (a == NULL) { PyErr_Clear(); return; }
  if (a->array.release != NULL) a->array.release(&a->array);
  free(a);
}

/* C.as_device_batch(array capsule): the array moved into a CPU
   ArrowDeviceArray capsule of the bridge's own (device_id -1, no event). */
static PyObject* helper_as_device_batch(PyObject* self, PyObject* args) {
  (void)self;
  PyObject* cap;
  if (!PyArg_ParseTuple(args, "O", &cap)) return NULL;
  struct ArrowArray* a = PyCapsule_GetPointer(cap, "arrow_array");
  if (a == NULL) return NULL;
  struct ArrowDeviceArray* d = calloc(1, sizeof *d);
  if (d == NULL) return PyErr_NoMemory();
  d->array = *a;
  a->release = NULL;
  d->device_id = -1;
  d->device_type = ARROW_DEVICE_CPU;
  PyObject* out = PyCapsule_New(d, "arrow_device_array", free_device_array);
  if (out == NULL) {
    if (d->array.release) d->array.release(&d->array);
    free(d);
  }
  return out;
}

/* ---- a stream of one batch (what `read` returned, as (schema, array)) --- */

struct one_batch {
  struct ArrowSchema schema;
  struct ArrowArray array;
};

static int one_get_schema(struct ArrowArrayStream* st, struct ArrowSchema* out) {
  struct one_batch* o = st->private_data;
  /* A deep copy is not needed by the harness, which asks once; a second
     call gets EINVAL rather than a shared schema. */
  if (o->schema.release == NULL) return EINVAL;
  *out = o->schema;
  o->schema.release = NULL;
  return 0;
}
static int one_get_next(struct ArrowArrayStream* st, struct ArrowArray* out) {
  struct one_batch* o = st->private_data;
  *out = o->array; /* after the one batch: a released array, the end */
  o->array.release = NULL;
  return 0;
}
static const char* one_last_error(struct ArrowArrayStream* st) {
  (void)st;
  return "the schema of this one-batch stream was already taken";
}
static void collect_after_release(void);
static void one_release(struct ArrowArrayStream* st) {
  struct one_batch* o = st->private_data;
  if (o->schema.release) o->schema.release(&o->schema);
  if (o->array.release) o->array.release(&o->array);
  free(o);
  st->release = NULL;
  collect_after_release();
}

/* ---- what read() returned, handed back: collected after its release ---- */

/* The library's stream of what it read, forwarded as it is; when the
   harness releases it, the young generations are collected. What read()
   made may hold the harness's input zero-copy in reference cycles (pandas
   does), which only a collection frees: without it the harness would see
   its input never released, and charge the library with a leak of its
   own reading. The forwarding changes nothing the harness judges: the
   stream handed back is only read (and validated) for its values. */
struct after_release {
  struct ArrowArrayStream inner;
};
static int after_get_schema(struct ArrowArrayStream* st, struct ArrowSchema* out) {
  struct after_release* w = st->private_data;
  return w->inner.get_schema(&w->inner, out);
}
static int after_get_next(struct ArrowArrayStream* st, struct ArrowArray* out) {
  struct after_release* w = st->private_data;
  return w->inner.get_next(&w->inner, out);
}
static const char* after_last_error(struct ArrowArrayStream* st) {
  struct after_release* w = st->private_data;
  return w->inner.get_last_error ? w->inner.get_last_error(&w->inner) : NULL;
}
/* Generations gc.collect() is given: the young ones after every call, all
   of them after a call that raised. */
enum { YOUNG_COLLECTION = 1, FULL_COLLECTION = 2 };
static void collect_garbage(int generation);
static void collect_after_release(void) {
  PyGILState_STATE g = PyGILState_Ensure();
  collect_garbage(YOUNG_COLLECTION);
  PyGILState_Release(g);
}
static void after_release_stream(struct ArrowArrayStream* st) {
  struct after_release* w = st->private_data;
  if (w->inner.release) w->inner.release(&w->inner);
  free(w);
  st->release = NULL;
  collect_after_release();
}

/* ---- moving structures out of the library's capsules -------------------- */

/* Sets `*p` to the structure in `capsule` when it is a capsule named
   `name` holding a live structure (release at `release_offset` non-NULL)
   and returns 0; else sets the last error and returns its code. */
static int movable(PyObject* capsule, const char* name, size_t release_offset, void** p) {
  if (!PyCapsule_IsValid(capsule, name)) {
    const char* got = PyCapsule_CheckExact(capsule) ? PyCapsule_GetName(capsule) : NULL;
    if (PyErr_Occurred()) PyErr_Clear();
    return set_error(EIO, "the library returned %s, not a PyCapsule named \"%s\"",
                     PyCapsule_CheckExact(capsule) ? (got ? got : "a capsule without a name")
                                                   : type_name((PyObject*)Py_TYPE(capsule)),
                     name);
  }
  *p = PyCapsule_GetPointer(capsule, name);
  if (*p == NULL) return error_from_python("PyCapsule_GetPointer");
  void* release;
  memcpy(&release, (char*)*p + release_offset, sizeof release);
  if (release == NULL)
    return set_error(EIO, "the library's \"%s\" capsule holds a released structure", name);
  return 0;
}

/* Bitwise copy of the movable structure `p` into `out`, then its copy
   marked released, so the capsule's destructor leaves it alone. */
static void move_from(void* p, void* out, size_t size, size_t release_offset) {
  memcpy(out, p, size);
  memset((char*)p + release_offset, 0, sizeof(void*));
}

/* Bitwise copy into `out`, then the capsule's copy marked released, so its
   destructor leaves it alone. */
static int move_out(PyObject* capsule, const char* name, void* out, size_t size,
                    size_t release_offset) {
  void* p = NULL;
  int rc = movable(capsule, name, release_offset, &p);
  if (rc == 0) move_from(p, out, size, release_offset);
  return rc;
}

static PyObject* pair_item(PyObject* pair, Py_ssize_t i) {
  if (!PyTuple_Check(pair) || PyTuple_Size(pair) != 2) return NULL;
  return PyTuple_GetItem(pair, i);
}

/* What `read` returned, as glue.export_read() gave it: a stream capsule, or
   a (schema, array) pair; into `out` as a stream. */
static int hand_back(PyObject* what, struct ArrowArrayStream* out) {
  if (PyTuple_Check(what)) {
    PyObject *sc = pair_item(what, 0), *ac = pair_item(what, 1);
    if (sc == NULL || ac == NULL)
      return set_error(EIO, "__arrow_c_array__ did not return a (schema, array) pair");
    struct one_batch* o = calloc(1, sizeof *o);
    if (o == NULL) return set_error(ENOMEM, "out of memory");
    int rc = move_out(sc, "arrow_schema", &o->schema, sizeof o->schema,
                      offsetof(struct ArrowSchema, release));
    if (rc == 0)
      rc = move_out(ac, "arrow_array", &o->array, sizeof o->array, offsetof(struct ArrowArray, release));
    if (rc != 0) {
      if (o->schema.release) o->schema.release(&o->schema);
      free(o);
      return rc;
    }
    out->get_schema = one_get_schema;
    out->get_next = one_get_next;
    out->get_last_error = one_last_error;
    out->release = one_release;
    out->private_data = o;
    return 0;
  }
  struct after_release* w = calloc(1, sizeof *w);
  if (w == NULL) return set_error(ENOMEM, "out of memory");
  int rc = move_out(what, "arrow_array_stream", &w->inner, sizeof w->inner,
                    offsetof(struct ArrowArrayStream, release));
  if (rc != 0) {
    free(w);
    return rc;
  }
  out->get_schema = after_get_schema;
  out->get_next = after_get_next;
  out->get_last_error = after_last_error;
  out->release = after_release_stream;
  out->private_data = w;
  return 0;
}

/* ---- the probe: a small stream the bridge builds itself ----------------- */

/* Every schema and batch it hands out owns its memory (released on its
   own, as the stream interface asks: "Their lifetimes are not tied to that
   of the ArrowArrayStream"). */
struct probe_schema {
  struct ArrowSchema child;
  struct ArrowSchema* children[1];
};
struct probe_batch {
  int64_t values[3];
  const void* buffers[2];
  const void* struct_buffers[1];
  struct ArrowArray child;
  struct ArrowArray* children[1];
};
struct probe {
  int taken_batch;
};

static void probe_release_child_schema(struct ArrowSchema* s) { s->release = NULL; }
static void probe_release_schema(struct ArrowSchema* s) {
  struct probe_schema* p = s->private_data;
  if (p->child.release) p->child.release(&p->child);
  free(p);
  s->release = NULL;
}
static void probe_release_child_array(struct ArrowArray* a) { a->release = NULL; }
static void probe_release_array(struct ArrowArray* a) {
  struct probe_batch* b = a->private_data;
  if (b->child.release) b->child.release(&b->child);
  free(b);
  a->release = NULL;
}

static int probe_get_schema(struct ArrowArrayStream* st, struct ArrowSchema* out) {
  (void)st;
  struct probe_schema* p = calloc(1, sizeof *p);
  if (p == NULL) return ENOMEM;
  p->child.format = "l";
  p->child.name = "x";
  p->child.flags = ARROW_FLAG_NULLABLE;
  p->child.release = probe_release_child_schema;
  p->children[0] = &p->child;
  memset(out, 0, sizeof *out);
  out->format = "+s";
  out->name = "";
  out->n_children = 1;
  out->children = p->children;
  out->release = probe_release_schema;
  out->private_data = p;
  return 0;
}
static int probe_get_next(struct ArrowArrayStream* st, struct ArrowArray* out) {
  struct probe* p = st->private_data;
  memset(out, 0, sizeof *out);
  if (p->taken_batch++) return 0; /* the end */
  struct probe_batch* b = calloc(1, sizeof *b);
  if (b == NULL) return ENOMEM;
  b->values[0] = 1;
  b->values[1] = 2;
  b->values[2] = 3;
  b->buffers[0] = NULL;
  b->buffers[1] = b->values;
  b->child.length = 3;
  b->child.n_buffers = 2;
  b->child.buffers = b->buffers;
  b->child.release = probe_release_child_array;
  b->children[0] = &b->child;
  b->struct_buffers[0] = NULL;
  out->length = 3;
  out->n_buffers = 1;
  out->buffers = b->struct_buffers;
  out->n_children = 1;
  out->children = b->children;
  out->release = probe_release_array;
  out->private_data = b;
  return 0;
}
static const char* probe_last_error(struct ArrowArrayStream* st) {
  (void)st;
  return NULL;
}
static void probe_release(struct ArrowArrayStream* st) {
  free(st->private_data);
  st->release = NULL;
}

/* C.probe(): the address of a fresh probe stream (one int64 column
   x = 1, 2, 3) the glue frees with C.free_probe. */
static PyObject* helper_probe(PyObject* self, PyObject* args) {
  (void)self;
  (void)args;
  struct ArrowArrayStream* st = calloc(1, sizeof *st);
  struct probe* p = calloc(1, sizeof *p);
  if (st == NULL || p == NULL) {
    free(st);
    free(p);
    return PyErr_NoMemory();
  }
  st->get_schema = probe_get_schema;
  st->get_next = probe_get_next;
  st->get_last_error = probe_last_error;
  st->release = probe_release;
  st->private_data = p;
  return PyLong_FromUnsignedLongLong((uintptr_t)st);
}

/* C.free_probe(address): releases (if live) and frees a probe stream. */
static PyObject* helper_free_probe(PyObject* self, PyObject* args) {
  (void)self;
  struct ArrowArrayStream* st = parse_address(args);
  if (st == NULL) return NULL;
  if (st->release) st->release(st);
  free(st);
  Py_RETURN_NONE;
}


/* ---- DLPack capsules (docs/DLPACK.md) -------------------------------------- */

/* The two DLPack exchange structures, as far as a capsule destructor needs
   them (the members before and including the deleter keep their place
   across versions: dlpack.h). The harness reads and builds the rest. */
struct bridge_dl_managed {
  unsigned char dl_tensor[48];
  void* manager_ctx;
  void (*deleter)(struct bridge_dl_managed*);
};
struct bridge_dl_managed_versioned {
  uint32_t major, minor;
  void* manager_ctx;
  void (*deleter)(struct bridge_dl_managed_versioned*);
};

/* Capsule names live as long as the library: "the capsule names ... must
   be statically allocated". */
static const char DLTENSOR[] = "dltensor";
static const char DLTENSOR_VERSIONED[] = "dltensor_versioned";
static const char USED_DLTENSOR[] = "used_dltensor";
static const char USED_DLTENSOR_VERSIONED[] = "used_dltensor_versioned";

/* The destructor of the harness's own capsules: a capsule nobody took (its
   name unchanged) deletes its tensor, as the Python specification's
   example does; a taken one (renamed used_...) does nothing. An exception
   in flight is kept. */
static void harness_dltensor_destructor(PyObject* cap) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  if (PyCapsule_IsValid(cap, DLTENSOR)) {
    struct bridge_dl_managed* m = PyCapsule_GetPointer(cap, DLTENSOR);
    if (m != NULL && m->deleter != NULL) m->deleter(m);
  } else if (PyCapsule_IsValid(cap, DLTENSOR_VERSIONED)) {
    struct bridge_dl_managed_versioned* m = PyCapsule_GetPointer(cap, DLTENSOR_VERSIONED);
    if (m != NULL && m->deleter != NULL) m->deleter(m);
  }
  PyErr_Clear();
  PyErr_Restore(type, value, tb);
}

/* C.dlpack_capsule(address, versioned): a capsule over one of the harness's
   tensors, named dltensor or dltensor_versioned. */
static PyObject* helper_dlpack_capsule(PyObject* self, PyObject* args) {
  (void)self;
  unsigned long long addr;
  int versioned;
  if (!PyArg_ParseTuple(args, "Kp", &addr, &versioned)) return NULL;
  if (addr == 0) {
    PyErr_SetString(PyExc_ValueError, "NULL tensor");
    return NULL;
  }
  return PyCapsule_New((void*)(uintptr_t)addr, versioned ? DLTENSOR_VERSIONED : DLTENSOR,
                       harness_dltensor_destructor);
}

/* C.capsule_info(obj): (name or None, pointer) of a capsule; (None, 0) and
   is_capsule False for anything else. */
static PyObject* helper_capsule_info(PyObject* self, PyObject* args) {
  (void)self;
  PyObject* cap;
  if (!PyArg_ParseTuple(args, "O", &cap)) return NULL;
  if (!PyCapsule_CheckExact(cap)) return Py_BuildValue("(OKO)", Py_None, 0ULL, Py_False);
  const char* name = PyCapsule_GetName(cap);
  if (name == NULL && PyErr_Occurred()) PyErr_Clear();
  void* p = PyCapsule_GetPointer(cap, name);
  if (p == NULL) PyErr_Clear();
  PyObject* n = name ? PyUnicode_FromString(name) : Py_NewRef(Py_None);
  if (n == NULL) return NULL;
  return Py_BuildValue("(NKO)", n, (unsigned long long)(uintptr_t)p, Py_True);
}

/* C.capsule_take(capsule): renames dltensor[_versioned] to
   used_dltensor[_versioned], as a consumer taking the tensor does; returns
   the new name, or None when the capsule had neither name. */
static PyObject* helper_capsule_take(PyObject* self, PyObject* args) {
  (void)self;
  PyObject* cap;
  if (!PyArg_ParseTuple(args, "O", &cap)) return NULL;
  const char* to = NULL;
  if (PyCapsule_IsValid(cap, DLTENSOR)) to = USED_DLTENSOR;
  else if (PyCapsule_IsValid(cap, DLTENSOR_VERSIONED)) to = USED_DLTENSOR_VERSIONED;
  if (to == NULL) Py_RETURN_NONE;
  if (PyCapsule_SetName(cap, to) != 0) return NULL;
  return PyUnicode_FromString(to);
}

/* C.capsules_move(schema, array, kind, schema_address, array_address):
   moves the library's ArrowSchema and its ArrowArray or ArrowDeviceArray
   (`kind`: arrow_array, arrow_device_array) out of their capsules to the
   harness's memory, as a consumer of the PyCapsule interface does: both
   are checked before either is moved, so a bad pair moves nothing (the
   capsules' destructors release what they hold). */
static PyObject* helper_capsules_move(PyObject* self, PyObject* args) {
  (void)self;
  PyObject *scap, *acap;
  const char* kind;
  unsigned long long saddr, aaddr;
  if (!PyArg_ParseTuple(args, "OOsKK", &scap, &acap, &kind, &saddr, &aaddr)) return NULL;
  if (saddr == 0 || aaddr == 0) {
    PyErr_SetString(PyExc_ValueError, "NULL structure");
    return NULL;
  }
  size_t asize, arelease;
  if (strcmp(kind, "arrow_array") == 0) {
    asize = sizeof(struct ArrowArray);
    arelease = offsetof(struct ArrowArray, release);
  } else if (strcmp(kind, "arrow_device_array") == 0) {
    asize = sizeof(struct ArrowDeviceArray);
    arelease = offsetof(struct ArrowDeviceArray, array) + offsetof(struct ArrowArray, release);
  } else {
    PyErr_Format(PyExc_ValueError, "unknown capsule kind %s", kind);
    return NULL;
  }
  size_t srelease = offsetof(struct ArrowSchema, release);
  void *sp = NULL, *ap = NULL;
  int rc = movable(scap, "arrow_schema", srelease, &sp);
  if (rc == 0) rc = movable(acap, kind, arelease, &ap);
  if (rc != 0) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, last_error ? last_error : "the move failed");
    return NULL;
  }
  move_from(sp, (void*)(uintptr_t)saddr, sizeof(struct ArrowSchema), srelease);
  move_from(ap, (void*)(uintptr_t)aaddr, asize, arelease);
  Py_RETURN_NONE;
}

static PyMethodDef helper_methods[] = {
    {"capsule", helper_capsule, METH_VARARGS, "capsule(address, name)"},
    {"stream_schema", helper_stream_schema, METH_VARARGS, "stream_schema(address)"},
    {"take_stream", helper_take_stream, METH_VARARGS, "take_stream(address)"},
    {"take_batch", helper_take_batch, METH_VARARGS, "take_batch(address)"},
    {"schema_of_stream", helper_schema_of_stream, METH_VARARGS, "schema_of_stream(capsule)"},
    {"as_device_batch", helper_as_device_batch, METH_VARARGS, "as_device_batch(capsule)"},
    {"probe", helper_probe, METH_VARARGS, "probe()"},
    {"free_probe", helper_free_probe, METH_VARARGS, "free_probe(address)"},
    {"dlpack_capsule", helper_dlpack_capsule, METH_VARARGS, "dlpack_capsule(address, versioned)"},
    {"capsule_info", helper_capsule_info, METH_VARARGS, "capsule_info(obj)"},
    {"capsule_take", helper_capsule_take, METH_VARARGS, "capsule_take(capsule)"},
    {"capsules_move", helper_capsules_move, METH_VARARGS,
     "capsules_move(schema, array, kind, schema_address, array_address)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef helper_module = {PyModuleDef_HEAD_INIT, "_arrowcert_bridge_c", NULL, -1,
                                           helper_methods, NULL, NULL, NULL, NULL};

/* ---- initialisation ------------------------------------------------------ */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_code = 0;
static char init_message[4096];
static char plugin_name[512] = "arrowcert Python adapter (not loaded)";
static char self_path[4096];
/* What the adapter can do, from the probe (glue.OFFERS). */
static char offers[1024];

static int setup_python(void) {
  PyObject* helper = PyModule_Create(&helper_module);
  if (helper == NULL) return -1;
  PyObject* mod = PyModule_New("_arrowcert_bridge_glue");
  if (mod == NULL) {
    Py_DECREF(helper);
    return -1;
  }
  PyObject* d = PyModule_GetDict(mod); /* borrowed */
  PyObject* self_str = PyUnicode_FromString(self_path);
  int ok = self_str && PyDict_SetItemString(d, "__builtins__", PyEval_GetBuiltins()) == 0 &&
           PyDict_SetItemString(d, "C", helper) == 0 && PyDict_SetItemString(d, "SELF", self_str) == 0;
  Py_XDECREF(self_str);
  Py_DECREF(helper);
  if (ok) {
    PyObject* code = Py_CompileString(GLUE, "<arrowcert bridge glue>", Py_file_input);
    PyObject* r = code ? PyEval_EvalCode(code, d, d) : NULL;
    ok = r != NULL;
    Py_XDECREF(r);
    Py_XDECREF(code);
  }
  if (ok) {
    PyObject* fn = PyDict_GetItemString(d, "start"); /* borrowed */
    PyObject* r = fn ? PyObject_CallNoArgs(fn) : NULL;
    ok = r != NULL && PyTuple_Check(r) && PyTuple_Size(r) == 2;
    if (ok) {
      const char* n = utf8_of(PyTuple_GetItem(r, 0));
      const char* o = utf8_of(PyTuple_GetItem(r, 1));
      ok = n != NULL && o != NULL;
      if (ok) {
        snprintf(plugin_name, sizeof plugin_name, "%s", n);
        snprintf(offers, sizeof offers, " %s ", o);
      }
    }
    Py_XDECREF(r);
  }
  if (!ok) {
    Py_DECREF(mod);
    return -1;
  }
  Py_INCREF(d);
  glue_dict = d;
  Py_DECREF(mod);
  return 0;
}

/* The value of `key=` in this copy's sidecar (`<self>.adapter`, written by
   the harness), or "" when it has none. */
static void config_value(const char* key, char* out, size_t size) {
  out[0] = 0;
  char path[4200];
  snprintf(path, sizeof path, "%s.adapter", self_path);
  FILE* f = fopen(path, "r");
  if (f == NULL) return;
  char line[4200];
  size_t klen = strlen(key);
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, key, klen) == 0 && line[klen] == '=') {
      line[strcspn(line, "\n")] = 0;
      snprintf(out, size, "%s", line + klen + 1);
      break;
    }
  }
  fclose(f);
}

static void do_init(void) {
  Dl_info info;
  if (!dladdr((void*)&do_init, &info) || info.dli_fname == NULL) {
    snprintf(init_message, sizeof init_message, "the bridge cannot find its own path");
    init_code = EIO;
    return;
  }
  snprintf(self_path, sizeof self_path, "%s", info.dli_fname);
  /* The harness dlopens plugins RTLD_LOCAL, which would hide libpython's
     symbols from the extension modules Python loads later: make them
     global. */
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
    /* The limited API has no PyConfig: the legacy setters, looked up by
       name (deprecated since 3.11; a CPython without them still starts,
       finding its home from the program name). */
    char home[4096], stdlib[4200];
    config_value("home", home, sizeof home);
    config_value("stdlib", stdlib, sizeof stdlib);
    /* Py_InitializeEx aborts the process when it cannot find the standard
       library: look for it first and fail with a message instead. */
    if (stdlib[0] && access(stdlib, R_OK) != 0) {
      snprintf(init_message, sizeof init_message,
               "Python initialisation failed (home %.1500s): its standard library (%.1500s) is not there",
               home, stdlib);
      init_code = EIO;
      return;
    }
    typedef void (*set_wide_fn)(const wchar_t*);
    set_wide_fn set_home = (set_wide_fn)dlsym(RTLD_DEFAULT, "Py_SetPythonHome");
    set_wide_fn set_name = (set_wide_fn)dlsym(RTLD_DEFAULT, "Py_SetProgramName");
    int* no_user_site = (int*)dlsym(RTLD_DEFAULT, "Py_NoUserSiteDirectory");
    if (home[0] && set_home != NULL) {
      /* Python keeps the pointer: never freed. */
      wchar_t* w = Py_DecodeLocale(home, NULL);
      if (w != NULL) set_home(w);
    }
    if (set_name != NULL) set_name(L"python3");
    if (no_user_site != NULL) *no_user_site = 1;
    Py_InitializeEx(0); /* 0: no signal handlers (the harness has its own) */
    we_initialised = 1;
  }
  PyGILState_STATE g = PyGILState_Ensure();
  if (setup_python() != 0) {
    PyObject *type = NULL, *value = NULL, *tb = NULL;
    PyErr_Fetch(&type, &value, &tb);
    PyObject* s = value ? PyObject_Str(value) : NULL;
    const char* m = s ? utf8_of(s) : NULL;
    snprintf(init_message, sizeof init_message, "%s%s%s", type ? type_name(type) : "",
             m ? ": " : "", m ? m : "the adapter could not be loaded");
    if (PyErr_Occurred()) PyErr_Clear();
    Py_XDECREF(s);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    init_code = EIO;
  }
  PyGILState_Release(g);
  if (we_initialised) (void)PyEval_SaveThread();
}

static int ensure_python(void) {
  pthread_once(&init_once, do_init);
  if (init_code != 0) return set_error(init_code, "%s", init_message);
  return 0;
}

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

/* After a call: objects of the call caught in reference cycles
   (an exception's traceback, a library's own cycles) hold capsules over the
   harness's structures, whose release the harness checks when the call
   returns. The young generations hold everything the call made; a full
   collection (all generations) each call cost 3x the certification time,
   so it is kept for calls that raised (FULL_COLLECTION). */
static void collect_garbage(int generation) {
  PyObject* gc = PyImport_ImportModule("gc");
  PyObject* r = gc ? PyObject_CallMethod(gc, "collect", "i", generation) : NULL;
  Py_XDECREF(r);
  Py_XDECREF(gc);
  if (PyErr_Occurred()) PyErr_Clear();
}

static PyObject* address(const void* p) { return PyLong_FromUnsignedLongLong((uintptr_t)p); }

/* ---- identity -------------------------------------------------------------- */

ARROWCERT_EXPORT int32_t arrowcert_plugin_abi_version(void) { return ARROWCERT_PLUGIN_ABI_VERSION; }

/* The adapter's NAME (or its file's), once it is loaded; loading it is
   what the harness's first call (this one) starts. */
ARROWCERT_EXPORT const char* arrowcert_plugin_name(void) {
  pthread_once(&init_once, do_init);
  if (init_code != 0)
    snprintf(plugin_name, sizeof plugin_name, "arrowcert Python adapter (failed: %.400s)",
             init_message);
  return plugin_name;
}

ARROWCERT_EXPORT const char* arrowcert_plugin_load_error(void) {
  pthread_once(&init_once, do_init);
  return init_code != 0 ? init_message : NULL;
}

ARROWCERT_EXPORT int32_t arrowcert_plugin_offers(const char* entry_point) {
  pthread_once(&init_once, do_init);
  if (init_code != 0 || entry_point == NULL) return 0;
  char key[256];
  snprintf(key, sizeof key, " %s ", entry_point);
  return strstr(offers, key) != NULL;
}

ARROWCERT_EXPORT int32_t arrowcert_plugin_supports_device(int32_t device_type) {
  return device_type == ARROW_DEVICE_CPU;
}

ARROWCERT_EXPORT void arrowcert_free(void* ptr) { free(ptr); }

/* ---- producers ------------------------------------------------------------- */

/* glue.produce(kind, data address) returns what the loaded object's dunder
   returned; moved into `out`. `pair`: a (schema, array) tuple whose second
   element (1), or first (2: the schema that comes with an array), is
   moved. */
static int produce_with(const char* kind, struct ArrowArrayStream* data,
                        const char* capsule_name, void* out, size_t size,
                        size_t release_offset, int pair, const int64_t* slice);

static int produce(const char* kind, struct ArrowArrayStream* data, const char* capsule_name,
                   void* out, size_t size, size_t release_offset, int pair) {
  return produce_with(kind, data, capsule_name, out, size, release_offset, pair, NULL);
}

/* `slice`: NULL, or (offset, length) for the sliced stream kinds: glue.produce
   then has the adapter's slice(obj, offset, length) cut what load() made. */
static int produce_with(const char* kind, struct ArrowArrayStream* data,
                        const char* capsule_name, void* out, size_t size,
                        size_t release_offset, int pair, const int64_t* slice) {
  clear_error();
  int rc = ensure_python();
  if (rc == 0 && (out == NULL || data == NULL)) rc = set_error(EINVAL, "data or out is NULL");
  if (rc != 0) {
    if (data != NULL && data->release != NULL) data->release(data);
    return rc;
  }
  PyGILState_STATE g = PyGILState_Ensure();
  PyObject* res = NULL;
  PyObject* args = slice ? Py_BuildValue("(sNLL)", kind, address(data), (long long)slice[0],
                                        (long long)slice[1])
                         : Py_BuildValue("(sN)", kind, address(data));
  rc = call_glue("produce", args, &res);
  if (rc == 0) {
    PyObject* cap = pair ? pair_item(res, pair == 2 ? 0 : 1) : res;
    rc = cap ? move_out(cap, capsule_name, out, size, release_offset)
             : set_error(EIO, "%s: the dunder did not return a (schema, array) pair", kind);
  }
  Py_XDECREF(res);
  /* What load() made and the library left in reference cycles (nanoarrow's
     Array from a Python sequence leaves ~320 bytes a call, freed only by
     the collector's next pass, dozens of calls later) goes now: otherwise
     the harness's repetitions of export and release would see the
     collector's backlog grow and charge it to release. The young
     generations hold everything the call made (a full collection per call
     cost 5x the certification time). What the exported structure still
     needs it holds by reference, so a collection cannot free it. */
  collect_garbage(YOUNG_COLLECTION);
  PyGILState_Release(g);
  if (data->release != NULL) data->release(data);
  return rc;
}

ARROWCERT_EXPORT int arrowcert_produce_schema_from_stream(struct ArrowArrayStream* data,
                                                          struct ArrowSchema* out) {
  return produce("schema", data, "arrow_schema", out, sizeof *out,
                 offsetof(struct ArrowSchema, release), 0);
}

ARROWCERT_EXPORT int arrowcert_produce_array_from_stream(struct ArrowArrayStream* data,
                                                         struct ArrowArray* out) {
  return produce("array", data, "arrow_array", out, sizeof *out, offsetof(struct ArrowArray, release),
                 1);
}

ARROWCERT_EXPORT int arrowcert_produce_array_schema_from_stream(struct ArrowArrayStream* data,
                                                                struct ArrowSchema* out) {
  return produce("array_schema", data, "arrow_schema", out, sizeof *out,
                 offsetof(struct ArrowSchema, release), 2);
}

ARROWCERT_EXPORT int arrowcert_produce_device_array_from_stream(struct ArrowArrayStream* data,
                                                                int32_t device_type, int64_t device_id,
                                                                struct ArrowDeviceArray* out) {
  if (device_type != ARROW_DEVICE_CPU) {
    clear_error();
    if (data != NULL && data->release != NULL) data->release(data);
    return set_error(ENOSYS, "the Python adapter bridge exports host memory only (asked for device type %d, id %lld)",
                     (int)device_type, (long long)device_id);
  }
  return produce("device_array", data, "arrow_device_array", out, sizeof *out,
                 offsetof(struct ArrowDeviceArray, array) + offsetof(struct ArrowArray, release), 1);
}

ARROWCERT_EXPORT int arrowcert_produce_stream_from_stream(struct ArrowArrayStream* data,
                                                          struct ArrowArrayStream* out) {
  return produce("stream", data, "arrow_array_stream", out, sizeof *out,
                 offsetof(struct ArrowArrayStream, release), 0);
}

ARROWCERT_EXPORT int arrowcert_produce_device_stream_from_stream(struct ArrowArrayStream* data,
                                                                 int32_t device_type, int64_t device_id,
                                                                 struct ArrowDeviceArrayStream* out) {
  if (device_type != ARROW_DEVICE_CPU) {
    clear_error();
    if (data != NULL && data->release != NULL) data->release(data);
    return set_error(ENOSYS, "the Python adapter bridge exports host memory only (asked for device type %d, id %lld)",
                     (int)device_type, (long long)device_id);
  }
  return produce("device_stream", data, "arrow_device_array_stream", out, sizeof *out,
                 offsetof(struct ArrowDeviceArrayStream, release), 0);
}

/* Slices of the whole stream (docs/PLUGIN_ABI.md, "Slices of a stream"):
   served when the adapter defines slice(obj, offset, length). */
ARROWCERT_EXPORT int arrowcert_produce_sliced_stream_from_stream(struct ArrowArrayStream* data,
                                                                 int64_t slice_offset,
                                                                 int64_t slice_length,
                                                                 struct ArrowArrayStream* out) {
  const int64_t slice[2] = {slice_offset, slice_length};
  return produce_with("sliced_stream", data, "arrow_array_stream", out, sizeof *out,
                      offsetof(struct ArrowArrayStream, release), 0, slice);
}

ARROWCERT_EXPORT int arrowcert_produce_sliced_device_stream_from_stream(
    struct ArrowArrayStream* data, int64_t slice_offset, int64_t slice_length,
    int32_t device_type, int64_t device_id, struct ArrowDeviceArrayStream* out) {
  if (device_type != ARROW_DEVICE_CPU) {
    clear_error();
    if (data != NULL && data->release != NULL) data->release(data);
    return set_error(ENOSYS, "the Python adapter bridge exports host memory only (asked for device type %d, id %lld)",
                     (int)device_type, (long long)device_id);
  }
  const int64_t slice[2] = {slice_offset, slice_length};
  return produce_with("sliced_device_stream", data, "arrow_device_array_stream", out, sizeof *out,
                      offsetof(struct ArrowDeviceArrayStream, release), 0, slice);
}

/* ---- one object, exported several times ----------------------------------- */

/* The object load() made of the one batch in `data`: a new reference to it
   is the handle (arrowcert_release_object drops it). */
ARROWCERT_EXPORT int arrowcert_produce_object_from_stream(struct ArrowArrayStream* data,
                                                          void** object) {
  clear_error();
  int rc = ensure_python();
  if (rc == 0 && (object == NULL || data == NULL)) rc = set_error(EINVAL, "data or object is NULL");
  if (rc != 0) {
    if (data != NULL && data->release != NULL) data->release(data);
    return rc;
  }
  PyGILState_STATE g = PyGILState_Ensure();
  PyObject* res = NULL;
  rc = call_glue("load_object", Py_BuildValue("(N)", address(data)), &res);
  if (rc == 0) *object = res;
  collect_garbage(YOUNG_COLLECTION);
  PyGILState_Release(g);
  if (data->release != NULL) data->release(data);
  return rc;
}

/* One more __arrow_c_array__ of the object: its array half moved into `out`. */
ARROWCERT_EXPORT int arrowcert_export_object(void* object, struct ArrowArray* out) {
  clear_error();
  if (object == NULL || out == NULL) return set_error(EINVAL, "object or out is NULL");
  PyGILState_STATE g = PyGILState_Ensure();
  PyObject* res = NULL;
  int rc = call_glue("export_object", Py_BuildValue("(O)", (PyObject*)object), &res);
  if (rc == 0) {
    PyObject* cap = pair_item(res, 1);
    rc = cap ? move_out(cap, "arrow_array", out, sizeof *out, offsetof(struct ArrowArray, release))
             : set_error(EIO, "__arrow_c_array__ did not return a (schema, array) pair");
  }
  Py_XDECREF(res);
  collect_garbage(YOUNG_COLLECTION);
  PyGILState_Release(g);
  return rc;
}

ARROWCERT_EXPORT void arrowcert_release_object(void* object) {
  if (object == NULL) return;
  PyGILState_STATE g = PyGILState_Ensure();
  Py_DECREF((PyObject*)object);
  collect_garbage(YOUNG_COLLECTION);
  PyGILState_Release(g);
}

/* ---- consumers ------------------------------------------------------------- */

/* glue.consume(kind, address, address) returns what read() returned,
   exported; handed back in `read`. Whatever of the harness's structures is
   still live afterwards (the library never took it) is released, as a
   consumer must. */
static int consume(const char* kind, void* first, void* second, struct ArrowSchema* schema,
                   struct ArrowArray* base, struct ArrowArrayStream* stream,
                   struct ArrowDeviceArrayStream* device_stream, struct ArrowArrayStream* read) {
  clear_error();
  int handed = 0;
  int rc = ensure_python();
  if (rc == 0 && (read == NULL || first == NULL)) rc = set_error(EINVAL, "an argument is NULL");
  if (rc == 0) {
    handed = 1;
    capsules_made = 0;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject* res = NULL;
    rc = call_glue("consume", Py_BuildValue("(sNN)", kind, address(first), address(second)), &res);
    if (rc == 0) rc = hand_back(res, read);
    Py_XDECREF(res);
    /* A read() that raised holds nothing it read any more, but what its
       traceback's frames held may have been moved to the oldest
       generation by a collection during the call (how many objects the
       call made decides): only a full collection frees it, and without it
       the harness saw "never released" in some runs and not in others
       (pandas on a date out of Python's range). */
    collect_garbage(rc == 0 ? YOUNG_COLLECTION : FULL_COLLECTION);
    PyGILState_Release(g);
  }
  /* The harness's structures went to read() in capsules over them, where
     they lie: the library moved them out, or holds the capsules (what it
     read may still use their buffers, zero-copy, until the harness releases
     the stream handed back), or dropped them (whose destructors released
     them). Only when read() never got them are they still ours to release. */
  if (!handed || capsules_made == 0) {
    if (schema != NULL && schema->release != NULL) schema->release(schema);
    if (base != NULL && base->release != NULL) base->release(base);
    if (stream != NULL && stream->release != NULL) stream->release(stream);
    if (device_stream != NULL && device_stream->release != NULL) device_stream->release(device_stream);
  }
  return rc;
}

ARROWCERT_EXPORT int arrowcert_consume_array_to_stream(struct ArrowSchema* schema, struct ArrowArray* array,
                                                       struct ArrowArrayStream* read) {
  return consume("array", schema, array, schema, array, NULL, NULL, read);
}

ARROWCERT_EXPORT int arrowcert_consume_device_array_to_stream(struct ArrowSchema* schema,
                                                              struct ArrowDeviceArray* array,
                                                              struct ArrowArrayStream* read) {
  return consume("device_array", schema, array, schema, array ? &array->array : NULL, NULL, NULL, read);
}

ARROWCERT_EXPORT int arrowcert_consume_stream_to_stream(struct ArrowArrayStream* stream,
                                                        struct ArrowArrayStream* read) {
  return consume("stream", stream, stream, NULL, NULL, stream, NULL, read);
}

ARROWCERT_EXPORT int arrowcert_consume_device_stream_to_stream(struct ArrowDeviceArrayStream* stream,
                                                               struct ArrowArrayStream* read) {
  return consume("device_stream", stream, stream, NULL, NULL, NULL, stream, read);
}

/* The adapter's values(obj) of the last consume call on this thread, as
   JSON text (docs/PLUGIN_ABI.md, "An independent view of what was read"):
   valid until the next call; NULL when the adapter has no values(). */
static _Thread_local char* last_values = NULL;

ARROWCERT_EXPORT const char* arrowcert_consume_values(void) {
  free(last_values);
  last_values = NULL;
  if (ensure_python() != 0) return NULL;
  PyGILState_STATE g = PyGILState_Ensure();
  PyObject* res = NULL;
  if (call_glue("last_values", PyTuple_New(0), &res) == 0 && res != NULL && PyUnicode_Check(res)) {
    const char* text = utf8_of(res);
    if (text != NULL) last_values = strdup(text);
  }
  if (PyErr_Occurred()) PyErr_Clear();
  Py_XDECREF(res);
  PyGILState_Release(g);
  return last_values;
}

/* ---- DLPack (docs/DLPACK.md) ---------------------------------------------- */

/* One DLPack step of the glue: glue.dlpack_call(op, [args], text) returns
   (object or None, text). The object, if any, is handed to the harness as
   an owned reference (`*out_handle`, released by arrowcert_dlpack_drop);
   the text (JSON) as a malloc'd string (freed by arrowcert_free). */
ARROWCERT_EXPORT int arrowcert_dlpack_call(const char* op, const uint64_t* args, int32_t nargs,
                                           const char* text, uint64_t* out_handle,
                                           char** out_text) {
  clear_error();
  int rc = ensure_python();
  if (rc != 0) return rc;
  if (op == NULL || out_handle == NULL || out_text == NULL || nargs < 0 || (nargs > 0 && args == NULL))
    return set_error(EINVAL, "arrowcert_dlpack_call: bad arguments");
  *out_handle = 0;
  *out_text = NULL;
  PyGILState_STATE g = PyGILState_Ensure();
  PyObject* list = PyList_New(nargs);
  for (int32_t i = 0; list != NULL && i < nargs; i++) {
    PyObject* v = PyLong_FromUnsignedLongLong(args[i]);
    if (v == NULL) {
      Py_CLEAR(list);
      break;
    }
    PyList_SetItem(list, i, v); /* steals v */
  }
  PyObject* res = NULL;
  rc = call_glue("dlpack_call",
                 list ? Py_BuildValue("(sNs)", op, list, text ? text : "") : NULL, &res);
  if (rc == 0) {
    if (!PyTuple_Check(res) || PyTuple_Size(res) != 2) {
      rc = set_error(EIO, "dlpack_call(%s): the glue did not return (object, text)", op);
    } else {
      PyObject* obj = PyTuple_GetItem(res, 0);
      const char* t = utf8_of(PyTuple_GetItem(res, 1));
      if (t == NULL) {
        rc = error_from_python(op);
      } else {
        *out_text = strdup(t);
        if (obj != Py_None) {
          Py_INCREF(obj);
          *out_handle = (uint64_t)(uintptr_t)obj;
        }
      }
    }
  }
  Py_XDECREF(res);
  PyGILState_Release(g);
  return rc;
}

/* Releases an object arrowcert_dlpack_call handed over. */
ARROWCERT_EXPORT void arrowcert_dlpack_drop(uint64_t handle) {
  if (handle == 0 || ensure_python() != 0) return;
  PyGILState_STATE g = PyGILState_Ensure();
  Py_DECREF((PyObject*)(uintptr_t)handle);
  if (PyErr_Occurred()) PyErr_Clear();
  PyGILState_Release(g);
}
