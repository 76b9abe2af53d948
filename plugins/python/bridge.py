"""Python glue of arrowcert's adapter bridge (bridge.c, which embeds it).

Executed once per bridge copy in a fresh namespace holding

  SELF  the path of the bridge copy; SELF + ".adapter" says which adapter
        it runs (lines KEY=VALUE: adapter=PATH.py or module=NAME, and
        site=DIR for each directory to add to sys.path)
  C     the bridge's helper module (capsules over C structures)

start() loads the adapter and returns (plugin name, entry points served);
produce(kind, data) and consume(kind, a, b) serve the entry points;
describe(exception) turns an exception into (errno, message).

An adapter is a Python file (or module) with

  load(data)  -> the library's own object holding `data` (producers); `data`
                 speaks the PyCapsule protocol (__arrow_c_stream__,
                 __arrow_c_schema__, and __arrow_c_array__ when it is one
                 batch); the object must not refer to `data` once load()
                 returned (copy or import it: `data` is released then)
  read(data)  -> the library's own object holding what it imported from
                 `data` (consumers); `data` has the one dunder of the
                 interface under test (__arrow_c_array__, ...)
  NAME        optional: the name reports give the library
  values(obj) optional: what read() returned as plain Python values,
                 through the library's own converter (not its Arrow
                 exporter): a list of columns, or a dict column -> list
  VARIANTS    optional: {name: {attribute: override}}; py:FILE.py#name runs
                 the adapter with those attributes (load, read, values, ...)
                 replaced, as a library of its own ("NAME [name]")
  slice(obj, offset, length)
              optional: the library's own slice of what load() returned,
                 rows [offset, offset + length) across its batches (length
                 None: to the end), as its users take one (pyarrow's
                 Table.slice, polars' DataFrame.slice); its stream dunders
                 serve the sliced stream entry points

Every dunder the object load() returns has is a producer path; each form
read() accepts is a consumer path. What read() returns is read back through
its own __arrow_c_stream__ (or __arrow_c_array__).
"""
import errno as _errno
import importlib
import importlib.util
import os
import sys
import traceback

ADAPTER = None


def _config():
    conf = {"site": []}
    with open(SELF + ".adapter", encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#") or "=" not in line:
                continue
            k, v = line.split("=", 1)
            if k == "site":
                conf["site"].append(v)
            else:
                conf[k] = v
    return conf


def _load_adapter(conf):
    import site
    for d in conf["site"]:
        if d and d not in sys.path:
            site.addsitedir(d)
    if sys.stdout is not sys.stderr:
        sys.stdout = sys.stderr  # the harness treats output on stdout as a fault
    if "adapter" in conf:
        path = conf["adapter"]
        # Its directory is not put on sys.path: an adapter named after its
        # library (pyarrow.py) must not shadow the library.
        name = "arrowcert_adapter_" + str(abs(hash(path)))
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"{path}: not a Python file")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return _variant(mod, conf.get("variant")), os.path.splitext(os.path.basename(path))[0]
    mod = importlib.import_module(conf["module"])
    return _variant(mod, conf.get("variant")), conf["module"]


class _Variant:
    """The adapter with one variant's attributes in front of its own."""

    def __init__(self, mod, name, overrides):
        self._mod = mod
        self._overrides = dict(overrides)
        base = overrides.get("NAME") or getattr(mod, "NAME", None)
        self._overrides["NAME"] = f"{base} [{name}]" if base else None
        self._stem_suffix = f"[{name}]"

    def __getattr__(self, attr):
        if attr in self._overrides:
            return self._overrides[attr]
        return getattr(self._mod, attr)


def adapter_variants(mod):
    """The adapter's variants: VARIANTS (a dict name -> overrides), or
    variants() returning one."""
    v = getattr(mod, "VARIANTS", None)
    if v is None and callable(getattr(mod, "variants", None)):
        v = mod.variants()
    if v is None:
        return {}
    if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(o, dict)
                                          for k, o in v.items()):
        raise TypeError("VARIANTS must be a dict of variant name -> dict of attributes")
    return v


def _variant(mod, name):
    if not name:
        return mod
    variants = adapter_variants(mod)
    if name not in variants:
        known = ", ".join(sorted(variants)) or "none"
        raise LookupError(f"the adapter has no variant {name!r} (its variants: {known})")
    return _Variant(mod, name, variants[name])


# ---- what the harness hands over ---------------------------------------------

class HarnessData:
    """The scenario the harness exports (producers): a stream, read once.
    One batch (`one`): also __arrow_c_array__."""

    def __init__(self, addr, one):
        self._addr = addr
        self._taken = False
        if one:
            self.__arrow_c_array__ = self._array

    def _take(self):
        if self._taken:
            raise ValueError("the harness's data can be taken once (it is a stream)")
        self._taken = True

    def __arrow_c_schema__(self):
        return C.stream_schema(self._addr)

    def __arrow_c_stream__(self, requested_schema=None):
        # "the producer may ignore requested_schema" (PyCapsuleInterface.rst)
        self._take()
        return C.take_stream(self._addr)

    def _array(self, requested_schema=None):
        self._take()
        return C.take_batch(self._addr)


class HarnessArray:
    def __init__(self, s, a):
        self._s, self._a = s, a
        # Whether the library asked for the capsules (else the structures
        # are still the harness's to release).
        self.taken = False

    def __arrow_c_array__(self, requested_schema=None):
        self.taken = True
        return (C.capsule(self._s, "arrow_schema"), C.capsule(self._a, "arrow_array"))


class HarnessDeviceArray:
    def __init__(self, s, a):
        self._s, self._a = s, a

    def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
        return (C.capsule(self._s, "arrow_schema"),
                C.capsule(self._a, "arrow_device_array"))


class HarnessStream:
    """A stream of the harness's; its schema too (from get_schema), for
    importers that ask for it before they take the stream."""

    def __init__(self, p, _=None):
        self._p = p

    def __arrow_c_stream__(self, requested_schema=None):
        return C.capsule(self._p, "arrow_array_stream")

    def __arrow_c_schema__(self):
        return C.stream_schema(self._p)


class HarnessDeviceStream:
    def __init__(self, p, _=None):
        self._p = p

    def __arrow_c_device_stream__(self, requested_schema=None, **kwargs):
        return C.capsule(self._p, "arrow_device_array_stream")


DUNDERS = {
    "schema": "__arrow_c_schema__",
    "array": "__arrow_c_array__",
    "device_array": "__arrow_c_device_array__",
    "stream": "__arrow_c_stream__",
    "device_stream": "__arrow_c_device_stream__",
}

HANDED = {
    "array": HarnessArray,
    "device_array": HarnessDeviceArray,
    "stream": HarnessStream,
    "device_stream": HarnessDeviceStream,
}


# ---- the entry points ----------------------------------------------------------

def _schema_dunder(obj):
    """The schema export of `obj`: its __arrow_c_schema__, or else the
    schema of its own exported stream (get_schema), which is the library's
    export of the schema too (a Table, a DataFrame)."""
    if hasattr(obj, "__arrow_c_schema__"):
        return obj.__arrow_c_schema__
    if hasattr(obj, "__arrow_c_stream__"):
        return lambda: C.schema_of_stream(obj.__arrow_c_stream__())
    return None


def _dunder(obj, kind):
    if kind == "schema":
        return _schema_dunder(obj)
    return getattr(obj, DUNDERS[kind], None)


class CannotLoad(NotImplementedError):
    pass


def produce(kind, data_addr, offset=None, length=None):
    # "array_schema": the schema half of the array dunder's pair (the bridge
    # moves that half out).
    if kind == "array_schema":
        kind = "array"
    # "sliced_stream", "sliced_device_stream": that dunder of the adapter's
    # slice of what load() made (length -1: to the end).
    sliced = kind.startswith("sliced_")
    if sliced:
        kind = kind[len("sliced_"):]
    # A library that cannot hold this data (its import refuses it, or
    # panics) cannot export it: a declared limitation (ENOSYS) of the
    # producer, with its message, never a failure of its export.
    try:
        obj = ADAPTER.load(HarnessData(data_addr, kind in ("array", "device_array")))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # pyo3's PanicException is a BaseException
        raise CannotLoad(f"load() cannot hold this data: "
                         f"{type(e).__module__}.{type(e).__name__}: {e}") from e
    if sliced:
        # An exception here is the library's slice failing: judged as any
        # other (describe), never a pass.
        obj = ADAPTER.slice(obj, offset, None if length == -1 else length)
    dunder = _dunder(obj, kind)
    if dunder is None:
        raise NotImplementedError(
            f"{type(obj).__module__}.{type(obj).__name__} has no {DUNDERS[kind]}")
    return dunder()


def load_object(data_addr):
    """One object of the library holding the one batch at `data_addr`, to
    export several times (export_object)."""
    try:
        obj = ADAPTER.load(HarnessData(data_addr, True))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:
        raise CannotLoad(f"load() cannot hold this data: "
                         f"{type(e).__module__}.{type(e).__name__}: {e}") from e
    if _dunder(obj, "array") is None:
        raise NotImplementedError(
            f"{type(obj).__module__}.{type(obj).__name__} has no __arrow_c_array__")
    return obj


def export_object(obj):
    """One more export of the same object."""
    return _dunder(obj, "array")()


def export_read(obj):
    """What read() returned, as a stream capsule or a (schema, array) pair."""
    if hasattr(obj, "__arrow_c_stream__"):
        return obj.__arrow_c_stream__()
    if hasattr(obj, "__arrow_c_array__"):
        return obj.__arrow_c_array__()
    raise TypeError(f"read() returned {type(obj).__module__}.{type(obj).__name__}, "
                    "which has neither __arrow_c_stream__ nor __arrow_c_array__")


# The adapter's values(obj) of the last consume call, as JSON text (what
# arrowcert_consume_values hands the harness), or None.
LAST_VALUES = None


def consume(kind, a, b):
    global LAST_VALUES
    LAST_VALUES = None
    obj = ADAPTER.read(HANDED[kind](a, b))
    try:
        # Before the export: the view is of what the library read, not of
        # what its exporter makes of it.
        LAST_VALUES = values_json(obj)
        return export_read(obj)
    finally:
        del obj


def last_values():
    return LAST_VALUES


# ---- values(obj): an independent view of what the library read --------------
#
# Each value becomes JSON the harness compares with what it sent
# (harness/src/compare/pyvalues.rs): null, true/false, a string, a list, or
# an object tagged by its kind: {"i": "digits"} (int), {"f": "repr"} (float,
# nan and infinities included), {"b": "hex"} (bytes), {"d": ["digits", exp]}
# (Decimal), {"date": days}, {"ts": "n", "unit": "us"|"ns", "tz": bool}
# (datetime, pandas Timestamp; an aware one as UTC), {"time": "n", "unit"},
# {"dur": "n", "unit"} (timedelta, pandas Timedelta), {"map": [[k, v], ...]}
# (dict), {"?": "type"} (anything else: not compared).

import datetime as _dt
import decimal as _decimal
import json as _json

_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_UTC = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_US = _dt.timedelta(microseconds=1)


def _enc(v):
    if v is None or isinstance(v, bool):
        return v
    t = type(v)
    mod = t.__module__ or ""
    if mod.startswith("numpy"):
        if hasattr(v, "tolist"):
            return _enc(v.tolist())
    if mod.startswith("pandas"):
        name = t.__name__
        if name == "Timestamp":
            return {"ts": str(v.value), "unit": "ns", "tz": v.tzinfo is not None}
        if name == "Timedelta":
            return {"dur": str(v.value), "unit": "ns"}
        if name in ("NAType", "NaTType"):
            return None
    if isinstance(v, int):
        return {"i": str(v)}
    if isinstance(v, float):
        return {"f": repr(v)}
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            return {"?": "str with lone surrogates"}
        return v
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"b": bytes(v).hex()}
    if isinstance(v, _decimal.Decimal):
        if not v.is_finite():
            return {"?": f"Decimal {v}"}
        sign, digits, exp = v.as_tuple()
        return {"d": [("-" if sign else "") + "".join(map(str, digits)), exp]}
    if isinstance(v, _dt.datetime):
        if v.tzinfo is not None and v.utcoffset() is not None:
            return {"ts": str((v - _EPOCH_UTC) // _US), "unit": "us", "tz": True}
        return {"ts": str((v - _EPOCH) // _US), "unit": "us", "tz": False}
    if isinstance(v, _dt.date):
        return {"date": (v - _dt.date(1970, 1, 1)).days}
    if isinstance(v, _dt.time):
        us = ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond
        return {"time": str(us), "unit": "us"}
    if isinstance(v, _dt.timedelta):
        return {"dur": str(v // _US), "unit": "us"}
    if isinstance(v, dict):
        return {"map": [[_enc(k), _enc(x)] for k, x in v.items()]}
    if isinstance(v, (list, tuple)):
        return [_enc(x) for x in v]
    return {"?": f"{mod}.{t.__qualname__}"}


def values_json(obj):
    """The adapter's values(obj) as JSON text: {"columns": [...], "names":
    [...] or null}, or {"error": "..."} when values() raised; None when the
    adapter has no values()."""
    fn = getattr(ADAPTER, "values", None)
    if fn is None:
        return None
    try:
        v = fn(obj)
        names = None
        if isinstance(v, dict):
            names = [str(k) for k in v]
            v = list(v.values())
        columns = [_enc(list(c)) for c in v]
        return _json.dumps({"columns": columns, "names": names}, allow_nan=False)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:
        t = type(e)
        return _json.dumps({"error": f"{t.__module__}.{t.__name__}: {e}"[:2000]})


# ---- what the adapter can do: a probe ------------------------------------------

def _probe_produce():
    served = []
    # A variant may set load or read to None: that side is not served.
    if not callable(getattr(ADAPTER, "load", None)):
        return served
    for one in (False, True):
        addr = C.probe()
        try:
            obj = ADAPTER.load(HarnessData(addr, one))
            for kind in DUNDERS:
                if _dunder(obj, kind) is not None and kind not in served:
                    if one == (kind in ("array", "device_array")):
                        served.append(kind)
            del obj
        except Exception:
            pass
        finally:
            import gc
            gc.collect()
            C.free_probe(addr)
    # Slices of the stream: with slice(obj, offset, length), on the stream
    # paths the adapter serves.
    if callable(getattr(ADAPTER, "slice", None)):
        served += [f"sliced_{k}" for k in ("stream", "device_stream") if k in served]
    return served


def _probe_consume():
    served = []
    if not callable(getattr(ADAPTER, "read", None)):
        return served
    # The probe as a stream: read() accepts streams if this works.
    addr = C.probe()
    try:
        export_read(ADAPTER.read(HarnessStream(addr)))
        served.append("stream")
    except Exception:
        pass
    finally:
        import gc
        gc.collect()
        C.free_probe(addr)
    # Arrays: read() is handed the probe's one batch as (schema, array).
    for kind, cls in (("array", HarnessArray),):
        addr = C.probe()
        try:
            schema, array = C.take_batch(addr)
            obj = ADAPTER.read(_Pair(schema, array))
            export_read(obj)
            del obj
            served.append(kind)
        except Exception:
            pass
        finally:
            import gc
            gc.collect()
            C.free_probe(addr)
    # A device array on the CPU (device_type CPU, device_id -1).
    addr = C.probe()
    try:
        schema, array = C.take_batch(addr)
        obj = ADAPTER.read(_DevicePair(schema, C.as_device_batch(array)))
        export_read(obj)
        del obj
        served.append("device_array")
    except Exception:
        pass
    finally:
        import gc
        gc.collect()
        C.free_probe(addr)
    # Device streams: offered when the adapter says so (READS_DEVICE = True).
    if getattr(ADAPTER, "READS_DEVICE", False):
        served += [k for k in ("device_array", "device_stream") if k not in served]
    return served


class _DevicePair:
    def __init__(self, schema, array):
        self._pair = (schema, array)

    def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
        pair, self._pair = self._pair, None
        if pair is None:
            raise ValueError("taken once")
        return pair


class _Pair:
    def __init__(self, schema, array):
        self._pair = (schema, array)

    def __arrow_c_array__(self, requested_schema=None):
        pair, self._pair = self._pair, None
        if pair is None:
            raise ValueError("taken once")
        return pair


def start():
    global ADAPTER
    import gc
    # numpy's OpenBLAS starts a thread per core that spins between calls;
    # nothing of the Arrow interfaces uses it, and in a worker that
    # restarts after every crash it took a sixth of the CPU (measured with
    # perf on a pyarrow -> nanoarrow pair). A user's own setting is kept.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    conf = _config()
    # The imports make objects that live as long as the process: the
    # collector has nothing to find among them while they are made, and
    # once made they are frozen out of every later collection (gc.freeze),
    # so the probes' and each call's collections walk what calls make
    # only. Together a fifth of a Python worker's start-up.
    enabled = gc.isenabled()
    gc.disable()
    try:
        ADAPTER, stem = _load_adapter(conf)
    finally:
        if enabled:
            gc.enable()
    gc.freeze()
    name = getattr(ADAPTER, "NAME", None) or f"{stem}{getattr(ADAPTER, '_stem_suffix', '')} (Python adapter)"
    offers = [f"arrowcert_produce_{k}" for k in _probe_produce()]
    offers += [f"arrowcert_consume_{k}" for k in _probe_consume()]
    return str(name), " ".join(offers)


# ---- errors -----------------------------------------------------------------

# A library that says so in its message declares a limitation (ENOSYS).
NOT_SUPPORTED = ("not supported", "not yet supported", "not yet implemented",
                 "not implemented", "unsupported", "does not support")

# Arrow C++'s record batch import refuses a struct array at a non-zero
# top-level offset; the spec allows it ("Consumers MAY decide not to support
# non-0-offset arrays"): a declared limitation.
DECLARED_LIMITATIONS = ("arrowarray struct has non-zero offset",)

# A library that failed inside itself (a Rust panic a binding caught, an
# internal error) did not decline the data: ENOTRECOVERABLE.
INTERNAL_FAILURES = ("panicexception", "internalexception", "internal error",
                     "basic_string: construction from null")


def describe(e):
    """(errno, message) for an exception the glue, the adapter or the
    library raised."""
    text = str(e).lower()
    name = (type(e).__module__ + "." + type(e).__name__).lower()
    if isinstance(e, CannotLoad):
        code = _errno.ENOSYS
    elif any(w in name or w in text for w in INTERNAL_FAILURES):
        code = _errno.ENOTRECOVERABLE
    elif (isinstance(e, NotImplementedError) or any(w in text for w in NOT_SUPPORTED)
            or any(w in text for w in DECLARED_LIMITATIONS)):
        code = _errno.ENOSYS
    elif isinstance(e, MemoryError):
        code = _errno.ENOMEM
    elif isinstance(e, (ValueError, TypeError, IndexError, KeyError)):
        code = _errno.EINVAL
    else:
        code = _errno.EIO
    t = type(e)
    msg = "".join(traceback.format_exception_only(t, e)).strip()
    if t.__module__ not in ("builtins", "__main__") and not msg.startswith(t.__module__):
        msg = f"{t.__module__}.{msg}"
    return code, msg


# ---- DLPack (docs/DLPACK.md) ------------------------------------------------
#
# An adapter may also speak DLPack (the Array API's data interchange):
#
#   dlpack_load(tensor) -> the library's own array holding a copy of
#                          `tensor` (producers: everything its __dlpack__
#                          exports is certified)
#   dlpack_read(tensor) -> what the library's from_dlpack made of `tensor`
#                          (consumers)
#
# `tensor` is the harness's: __dlpack__ and __dlpack_device__ only, each
# capsule over one of the harness's instrumented tensors. Each step below is
# one call of the harness (arrowcert_dlpack_call).

import json as _json


def _describe_error(e):
    t = type(e)
    return {"type": t.__name__, "module": t.__module__,
            "mro": [c.__name__ for c in t.__mro__],
            "message": str(e)[:2000]}


class HarnessTensor:
    """A tensor of the harness: one versioned and one legacy managed tensor
    over the same data; __dlpack__ hands over one of them (once), as the
    caller's max_version asks, and records every call."""

    def __init__(self, versioned, legacy, device_type, device_id, mode):
        self._v = versioned
        self._l = legacy
        self._device = (device_type, device_id)
        self._mode = mode
        self.calls = []
        self.capsules = []
        self.device_calls = 0

    def __dlpack_device__(self):
        self.device_calls += 1
        return self._device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        call = {"stream": stream if stream is None or isinstance(stream, int) else repr(stream),
                "max_version": list(max_version) if max_version is not None else None,
                "dl_device": list(dl_device) if dl_device is not None else None,
                "copy": copy}
        self.calls.append(call)
        if self.capsules:
            raise BufferError("arrowcert: this tensor was exported once already")
        if copy is True:
            raise BufferError("arrowcert's tensors are exported as they are (copy=True is not supported)")
        if dl_device is not None and tuple(dl_device) != self._device:
            raise BufferError(f"arrowcert: the tensor is on {self._device}, not {tuple(dl_device)}")
        versioned = max_version is not None and tuple(max_version) >= (1, 0)
        if self._mode == "legacy":
            versioned = False
        elif self._mode == "versioned" and not versioned:
            raise BufferError("arrowcert: this case exports DLManagedTensorVersioned only (pass max_version=(1, 0))")
        cap = C.dlpack_capsule(self._v if versioned else self._l, versioned)
        self.capsules.append(cap)
        return cap

    def report(self):
        return {"calls": self.calls, "device_calls": self.device_calls,
                "capsules": [C.capsule_info(c)[0] for c in self.capsules]}


def _kwargs(text):
    kw = _json.loads(text) if text else {}
    for k in ("max_version", "dl_device"):
        if isinstance(kw.get(k), list):
            kw[k] = tuple(kw[k])
    return kw


def _capsule_json(cap):
    name, pointer, is_capsule = C.capsule_info(cap)
    return {"is_capsule": bool(is_capsule), "name": name, "pointer": pointer,
            "type": type(cap).__name__}


def _dlpack_tensor(args, text):
    opts = _json.loads(text) if text else {}
    return HarnessTensor(args[0], args[1], args[2], args[3], opts.get("mode", "negotiate"))


def _with_tensor(args, text, fn):
    """fn(the harness's tensor): its object, and what the tensor saw."""
    t = _dlpack_tensor(args, text)
    try:
        obj = fn(t)
    except Exception as e:
        out = {"error": _describe_error(e), "harness": t.report()}
        t.capsules.clear()
        return None, _json.dumps(out)
    out = {"harness": t.report()}
    t.capsules.clear()
    return obj, _json.dumps(out)


def _dlpack_load(args, text):
    return _with_tensor(args, text, ADAPTER.dlpack_load)


def _dlpack_read(args, text):
    return _with_tensor(args, text, ADAPTER.dlpack_read)


def _dlpack_read_object(args, text):
    """A pair: what another library's array (an object another adapter
    made) becomes in this library's dlpack_read."""
    try:
        obj = ADAPTER.dlpack_read(args[0])
    except Exception as e:
        return None, _json.dumps({"error": _describe_error(e)})
    return obj, "{}"


def _default_view(obj, name):
    """The view `name` of `obj` through the Array API's indexing (and its
    namespace's broadcast_to): an adapter may define dlpack_view(obj, name)
    for a library that makes them otherwise."""
    if name == "step":
        return obj[::2]
    if name == "offset":
        return obj[1:]
    if name == "transpose":
        return obj.T
    # The Array API indexes every axis of a multi-dimensional array or
    # none: the ellipsis stands for the rest.
    if name == "reverse":
        return obj[::-1, ...]
    if name == "column-step":
        return obj[:, ::2, ...]
    if name == "broadcast":
        xp = obj.__array_namespace__()
        return xp.broadcast_to(obj, (2,) + tuple(obj.shape))
    return obj


def _dlpack_view(args, text):
    obj = args[0]
    try:
        if hasattr(ADAPTER, "dlpack_view"):
            v = ADAPTER.dlpack_view(obj, text)
        else:
            v = _default_view(obj, text)
    except Exception as e:
        return None, _json.dumps({"error": _describe_error(e)})
    return v, "{}"


def _dlpack_writeable(args, text):
    """Whether the library's array can be written: the adapter's
    dlpack_writeable(obj), else NumPy's obj.flags.writeable; null when the
    library shows no such state (it has no read-only arrays)."""
    obj = args[0]
    try:
        if hasattr(ADAPTER, "dlpack_writeable"):
            w, how = ADAPTER.dlpack_writeable(obj), "dlpack_writeable(obj)"
        else:
            w, how = getattr(getattr(obj, "flags", None), "writeable", None), "obj.flags.writeable"
    except Exception as e:
        return None, _json.dumps({"error": _describe_error(e)})
    return None, _json.dumps({"writeable": None if w is None else bool(w), "how": how})


def _dlpack_device(args, text):
    try:
        d = args[0].__dlpack_device__()
        return None, _json.dumps({"device": [int(d[0]), int(d[1])]})
    except Exception as e:
        return None, _json.dumps({"error": _describe_error(e)})


def _dlpack_export(args, text):
    try:
        cap = args[0].__dlpack__(**_kwargs(text))
    except Exception as e:
        return None, _json.dumps({"error": _describe_error(e)})
    return cap, _json.dumps({"capsule": _capsule_json(cap)})


def _dlpack_info(args, text):
    return None, _json.dumps({"capsule": _capsule_json(args[0])})


def _dlpack_take(args, text):
    return None, _json.dumps({"name": C.capsule_take(args[0])})


def _dlpack_weakref(args, text):
    """A weak reference to the object (None when it takes none)."""
    import weakref
    try:
        return weakref.ref(args[0]), "{}"
    except TypeError as e:
        return None, _json.dumps({"error": _describe_error(e)})


def _dlpack_alive(args, text):
    return None, _json.dumps({"alive": args[0]() is not None})


class ArrowcertProtocolError(Exception):
    """What the library handed back broke the Arrow PyCapsule interface (not
    a refusal of the data): the case is an error, not a limitation."""


def _dlpack_to_arrow(args, text):
    """DLPack in, Arrow out: the adapter's dlpack_to_arrow of the harness's
    tensor (args[:4]), its Arrow export moved to the harness's ArrowSchema
    (args[4]) and ArrowDeviceArray (args[5]). The library's objects are
    dropped here: what the moved structures need they must hold."""
    def convert(t):
        obj = ADAPTER.dlpack_to_arrow(t)
        if hasattr(obj, "__arrow_c_device_array__"):
            s, a = obj.__arrow_c_device_array__()
            kind = "arrow_device_array"
        elif hasattr(obj, "__arrow_c_array__"):
            s, a = obj.__arrow_c_array__()
            kind = "arrow_array"
        else:
            raise ArrowcertProtocolError(
                f"dlpack_to_arrow returned a {type(obj).__name__}, "
                "with neither __arrow_c_device_array__ nor __arrow_c_array__")
        try:
            # An ArrowArray goes where the ArrowDeviceArray's array member
            # lies (its first member).
            C.capsules_move(s, a, kind, args[4], args[5])
        except Exception as e:
            raise ArrowcertProtocolError(str(e)) from None
        return kind

    kind, seen = _with_tensor(args[:4], text, convert)
    out = _json.loads(seen)
    out["moved"] = kind
    return None, _json.dumps(out)


def _dlpack_from_arrow(args, text):
    """Arrow in, DLPack out: the adapter's arrow_to_dlpack of the harness's
    ArrowSchema (args[0]) and ArrowArray (args[1]), offered through the
    PyCapsule interface; the object it returns (its __dlpack__ is
    certified)."""
    offered = HarnessArray(args[0], args[1])
    try:
        obj = ADAPTER.arrow_to_dlpack(offered)
    except Exception as e:
        return None, _json.dumps({"error": _describe_error(e), "taken": offered.taken})
    return obj, _json.dumps({"taken": offered.taken})


def _dlpack_gc(args, text):
    import gc
    gc.collect()
    return None, "{}"


def _dlpack_offers(args, text):
    served = [k for k in ("dlpack_load", "dlpack_read", "dlpack_to_arrow", "arrow_to_dlpack")
              if hasattr(ADAPTER, k)]
    return None, _json.dumps({"offers": served})


_DLPACK_OPS = {"load": _dlpack_load, "read": _dlpack_read, "read_object": _dlpack_read_object,
               "view": _dlpack_view, "writeable": _dlpack_writeable,
               "device": _dlpack_device, "export": _dlpack_export, "info": _dlpack_info,
               "take": _dlpack_take, "gc": _dlpack_gc, "offers": _dlpack_offers,
               "weakref": _dlpack_weakref, "alive": _dlpack_alive,
               "to_arrow": _dlpack_to_arrow, "from_arrow": _dlpack_from_arrow}


# ---- CUDA Array Interface (docs/CAI.md) -------------------------------------
#
# An adapter may also speak the CUDA Array Interface:
#
#   cai_object(spec) -> an object whose __cuda_array_interface__ is certified
#                       (spec: dtype, typestr, shape, values (flat, C order),
#                       view (None or "step": every second row), pending (the
#                       values still being written by work on a stream))
#   CAI_DEVICE       -> "cuda" (default) or "software" (an emulated device
#                       whose memory is host memory: the harness reads it)
#   cai_synchronize(stream) -> synchronize on an int stream, or on the
#                       whole device when stream is None (software device)
#   cai_stream_alive(stream) -> whether the stream still exists
#   cai_accessible(ptr, nbytes) -> whether [ptr, ptr + nbytes) lies in a
#                       live allocation of the device
#
# The dict is sent to the harness as typed JSON (_cai_enc): the harness
# judges the Python types (tuple, not list; int, not bool), not just values.


def _cai_int(v):
    return v if -(1 << 63) <= v < (1 << 64) else str(v)


def _cai_enc(v, depth=0):
    if depth > 6:
        return {"t": "object", "type": type(v).__name__}
    if v is None:
        return {"t": "none"}
    if isinstance(v, bool):
        return {"t": "bool", "v": v}
    if isinstance(v, int):
        return {"t": "int", "v": _cai_int(int(v))}
    if isinstance(v, float):
        return {"t": "float", "v": repr(v)}
    if isinstance(v, str):
        return {"t": "str", "v": v}
    if isinstance(v, (bytes, bytearray)):
        return {"t": "bytes", "v": repr(bytes(v))}
    if isinstance(v, tuple):
        return {"t": "tuple", "v": [_cai_enc(x, depth + 1) for x in v]}
    if isinstance(v, list):
        return {"t": "list", "v": [_cai_enc(x, depth + 1) for x in v]}
    if isinstance(v, dict):
        return {"t": "dict", "type": type(v).__name__,
                "v": {k: _cai_enc(x, depth + 1) for k, x in v.items() if isinstance(k, str)}}
    out = {"t": "object", "type": type(v).__name__}
    try:
        inner = getattr(v, "__cuda_array_interface__")
    except AttributeError:
        return out
    except Exception as e:
        out["cai_error"] = _describe_error(e)
        return out
    out["cai"] = _cai_enc(inner, depth + 1)
    return out


def _cai_offers(args, text):
    served = [k for k in ("cai_object", "cai_synchronize", "cai_stream_alive", "cai_accessible",
                          "cai_consume", "cai_device_array")
              if hasattr(ADAPTER, k)]
    return None, _json.dumps({"offers": served,
                              "device": str(getattr(ADAPTER, "CAI_DEVICE", "cuda"))})


def _cai_load(args, text):
    try:
        obj = ADAPTER.cai_object(_json.loads(text))
    except Exception as e:
        return None, _json.dumps({"error": _describe_error(e)})
    return obj, "{}"


def _cai_export(args, text):
    """The object's __cuda_array_interface__: handed over (the harness holds
    it until it drops it) and described."""
    try:
        d = args[0].__cuda_array_interface__
    except Exception as e:
        return None, _json.dumps({"error": _describe_error(e)})
    return d, _json.dumps({"cai": _cai_enc(d)})


def _cai_device_call(name, *a):
    try:
        return {"value": getattr(ADAPTER, name)(*a)}
    except Exception as e:
        return {"error": _describe_error(e)}


def _cai_sync(args, text):
    stream = _json.loads(text).get("stream")
    return None, _json.dumps(_cai_device_call("cai_synchronize", stream), default=str)


def _cai_stream_alive(args, text):
    out = _cai_device_call("cai_stream_alive", _json.loads(text)["stream"])
    if "value" in out:
        out["value"] = bool(out["value"])
    return None, _json.dumps(out)


def _cai_accessible(args, text):
    q = _json.loads(text)
    out = _cai_device_call("cai_accessible", int(q["ptr"]), int(q["nbytes"]))
    if "value" in out:
        out["value"] = bool(out["value"])
    return None, _json.dumps(out)


def _cai_protocols(args, text):
    """Which other protocols the producer's object exports (the
    cai.agree.* rules compare them with its dict)."""
    obj = args[0]
    return None, _json.dumps({"dlpack": hasattr(obj, "__dlpack__"),
                              "dlpack_device": hasattr(obj, "__dlpack_device__"),
                              "arrow_device_array": hasattr(obj, "__arrow_c_device_array__")})


def _cai_arrow(args, text):
    """The producer's object (args[0], a handle) exported through
    __arrow_c_device_array__() and moved to the harness's ArrowSchema
    (args[1]) and ArrowDeviceArray (args[2]), as a PyCapsule consumer
    does."""
    import ctypes
    obj = ctypes.cast(args[0], ctypes.py_object).value
    try:
        s, a = obj.__arrow_c_device_array__()
        C.capsules_move(s, a, "arrow_device_array", args[1], args[2])
    except Exception as e:
        return None, _json.dumps({"error": _describe_error(e)})
    return None, "{}"


class HarnessCAI:
    """The harness's array for a consumer: the device's array (the
    adapter's cai_device_array(spec); the harness has no device of its
    own), its __cuda_array_interface__ passed through and counted."""

    def __init__(self, inner):
        self._inner = inner
        self.reads = 0

    @property
    def __cuda_array_interface__(self):
        self.reads += 1
        return self._inner.__cuda_array_interface__


class HarnessCudaArray:
    """The harness's own CUDA array (memory and stream it made, described
    by the text's "cuda_array"), as a CUDA Array Interface version 3 dict."""

    def __init__(self, d):
        self.__cuda_array_interface__ = {
            "shape": tuple(d["shape"]),
            "typestr": d["typestr"],
            "data": (d["ptr"], False),
            "version": 3,
            "strides": tuple(d["strides"]) if d["strides"] is not None else None,
            "stream": d["stream"],
        }


def _cai_consume(args, text):
    """What the adapter's cai_consume(obj) read of the harness's array, as
    host values (flat, C order)."""
    q = _json.loads(text)
    try:
        if "cuda_array" in q:
            obj = HarnessCAI(HarnessCudaArray(q["cuda_array"]))
        else:
            obj = HarnessCAI(ADAPTER.cai_device_array(q))
    except Exception as e:
        return None, _json.dumps({"harness_error": _describe_error(e)})
    try:
        values = [float(v) for v in ADAPTER.cai_consume(obj)]
    except Exception as e:
        return None, _json.dumps({"error": _describe_error(e), "reads": obj.reads})
    return None, _json.dumps({"values": values, "reads": obj.reads})


def _cai_consume_object(args, text):
    """A pair: what this adapter's cai_consume(obj) read of another
    library's array (args[0], the object that library's cai_object made),
    seen through its __cuda_array_interface__ only (the wrapper hides the
    object's other protocols, so the pair crosses by this interface)."""
    obj = HarnessCAI(args[0])
    try:
        values = [float(v) for v in ADAPTER.cai_consume(obj)]
    except Exception as e:
        return None, _json.dumps({"error": _describe_error(e), "reads": obj.reads})
    return None, _json.dumps({"values": values, "reads": obj.reads})


_DLPACK_OPS["cai_consume"] = _cai_consume
_DLPACK_OPS["cai_consume_object"] = _cai_consume_object
_DLPACK_OPS.update({"cai_offers": _cai_offers, "cai_load": _cai_load,
                    "cai_export": _cai_export, "cai_protocols": _cai_protocols,
                    "cai_arrow": _cai_arrow,
                    "cai_sync": _cai_sync,
                    "cai_stream_alive": _cai_stream_alive, "cai_accessible": _cai_accessible})


def dlpack_call(op, args, text):
    """One DLPack step: op over args (integers: harness addresses, or the
    objects earlier steps returned, passed back as object addresses)."""
    import ctypes
    fn = _DLPACK_OPS.get(op)
    if fn is None:
        raise ValueError(f"unknown DLPack step {op!r}")
    if op in ("view", "device", "export", "info", "take", "read_object", "weakref", "alive",
              "writeable", "cai_export", "cai_protocols", "cai_consume_object"):
        # Handles the harness holds: the objects themselves (the harness
        # keeps a reference to each until it drops it).
        args = [ctypes.cast(a, ctypes.py_object).value for a in args]
    return fn(args, text)
