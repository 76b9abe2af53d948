#!/usr/bin/env python3
"""Packs a built arrowcert into a binary wheel (scripts/wheel/build.sh
builds it first; docs/PYTHON_ADAPTERS.md, "From Python and pytest").

The wheel holds the ``arrowcert`` package (python/arrowcert/: the launcher,
the API, the pytest plugin) with the binary and the bundled plugins in
``arrowcert/_bin/``: the binary looks for its plugins beside itself, and
carries everything else (adapters, bridge, header). Entry points: the
``arrowcert`` command (``arrowcert.__main__:main``, which runs the binary
with ``py:`` adapters in the environment's own interpreter) and the pytest
plugin (``pytest11``). Standard library only, so it needs nothing from
PyPI: maturin would build the binary a second time, and its ``bin``
bindings put the binary alone in ``bin/`` (the plugins would have to go
elsewhere, and nothing would set the interpreter).

Tag: ``py3-none-manylinux_2_N_<arch>``, N the newest glibc symbol version
the binary and the plugins need (read from their ELF files), so pip takes
it on this machine and on any with a glibc at least that new.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The bundled plugins found beside the binary (cli: Place::Workspace).
PLUGINS = {
    "reference": ["libarrowcert_producer_reference.so", "libarrowcert_consumer_reference.so"],
    "arrow-rs": ["libarrowcert_producer_arrow_rs.so", "libarrowcert_consumer_arrow_rs.so"],
    "cuda-reference": [
        "libarrowcert_producer_cuda_reference.so",
        "libarrowcert_consumer_cuda_reference.so",
    ],
}
#: In bridge.py, embedded in the bridge, embedded in the binary: a binary
#: without it was built without Python.h and would need its checkout.
BRIDGE_MARKER = b"<arrowcert bridge glue>"
#: Reproducible: every entry gets this time.
EPOCH = (1980, 1, 1, 0, 0, 0)


def fail(msg: str) -> None:
    print(f"make_wheel: {msg}", file=sys.stderr)
    sys.exit(2)


def version() -> str:
    text = (ROOT / "Cargo.toml").read_text()
    section = text.split("[workspace.package]", 1)[-1]
    m = re.search(r'^version\s*=\s*"([^"]+)"', section, re.M)
    if not m:
        fail("no [workspace.package] version in Cargo.toml")
    return m.group(1)


def glibc_needed(files) -> tuple:
    """The newest GLIBC_2.N version name any of the ELF files references."""
    best = (2, 17)
    for f in files:
        for m in re.finditer(rb"GLIBC_2\.(\d+)(?:\.\d+)?\x00", f.read_bytes()):
            best = max(best, (2, int(m.group(1))))
    return best


def stripped(src: Path, tmp: Path, strip: bool) -> Path:
    """A copy of ``src`` without debug info when ``strip`` (``strip`` from
    binutils; the file as it is when there is none)."""
    dst = tmp / src.name
    shutil.copy2(src, dst)
    tool = shutil.which("strip")
    if strip and tool:
        subprocess.run([tool, "--strip-debug", str(dst)], check=True)
    elif strip:
        print("make_wheel: no strip on PATH: debug info kept", file=sys.stderr)
    return dst


def record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin-dir", required=True, help="cargo's output folder (target/release)")
    ap.add_argument("--out", required=True, help="folder the wheel is written to")
    ap.add_argument(
        "--plugins",
        default="reference,arrow-rs,cuda-reference",
        help="bundled plugins to ship beside the binary (comma-separated; "
        f"known: {', '.join(PLUGINS)}); a missing optional one is left out with a warning, "
        "a missing reference plugin is an error",
    )
    ap.add_argument("--no-strip", action="store_true", help="keep the debug info")
    a = ap.parse_args()

    bin_dir = Path(a.bin_dir)
    exe = bin_dir / "arrowcert"
    if not exe.is_file():
        fail(f"{exe} is missing (cargo build -p arrowcert first)")
    if BRIDGE_MARKER not in exe.read_bytes():
        fail(
            f"{exe} carries no Python bridge (it was built without Python.h): "
            "py: adapters would need its checkout; rebuild it where python3's headers are"
        )
    libs = []
    for name in [p for p in a.plugins.split(",") if p]:
        if name not in PLUGINS:
            fail(f"--plugins: unknown plugin {name} (known: {', '.join(PLUGINS)})")
        for file in PLUGINS[name]:
            path = bin_dir / file
            if path.is_file():
                libs.append(path)
            elif name == "reference":
                fail(f"{path} is missing (cargo build -p arrowcert-producer-reference -p arrowcert-consumer-reference)")
            else:
                print(f"make_wheel: {path} is missing: left out of the wheel", file=sys.stderr)

    ver = version()
    major, minor = glibc_needed([exe, *libs])
    arch = platform.machine()
    tag = f"py3-none-manylinux_{major}_{minor}_{arch}"
    dist = f"arrowcert-{ver}.dist-info"
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    wheel = out / f"arrowcert-{ver}-{tag}.whl"

    entries = []  # (name in the wheel, bytes, executable)
    pkg = ROOT / "python" / "arrowcert"
    for f in sorted(pkg.glob("*.py")):
        entries.append((f"arrowcert/{f.name}", f.read_bytes(), False))
    with tempfile.TemporaryDirectory() as tmp:
        for f in [exe, *libs]:
            data = stripped(f, Path(tmp), not a.no_strip).read_bytes()
            entries.append((f"arrowcert/_bin/{f.name}", data, True))
    readme = (ROOT / "python" / "README.md").read_text()
    metadata = (
        "Metadata-Version: 2.1\n"
        "Name: arrowcert\n"
        f"Version: {ver}\n"
        "Summary: Conformance and fuzz testing of the Apache Arrow C data, stream, "
        "device and async interfaces and DLPack, with a pytest plugin\n"
        "Requires-Python: >=3.10\n"
        "Classifier: Framework :: Pytest\n"
        "Description-Content-Type: text/markdown\n"
        f"\n{readme}"
    )
    entries.append((f"{dist}/METADATA", metadata.encode(), False))
    entries.append(
        (
            f"{dist}/WHEEL",
            f"Wheel-Version: 1.0\nGenerator: arrowcert make_wheel.py\n"
            f"Root-Is-Purelib: false\nTag: {tag}\n".encode(),
            False,
        )
    )
    entries.append(
        (
            f"{dist}/entry_points.txt",
            b"[console_scripts]\narrowcert = arrowcert.__main__:main\n\n"
            b"[pytest11]\narrowcert = arrowcert.pytest_plugin\n",
            False,
        )
    )
    record = io.StringIO()
    for name, data, _ in entries:
        record.write(f"{name},{record_hash(data)},{len(data)}\n")
    record.write(f"{dist}/RECORD,,\n")
    entries.append((f"{dist}/RECORD", record.getvalue().encode(), False))

    tmp_wheel = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(tmp_wheel, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as z:
        for name, data, executable in entries:
            info = zipfile.ZipInfo(name, EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            # pip keeps the executable bits of an entry's mode.
            info.external_attr = (0o100755 if executable else 0o100644) << 16
            z.writestr(info, data)
    tmp_wheel.replace(wheel)
    size = wheel.stat().st_size
    print(f"make_wheel: {wheel} ({size / 1e6:.1f} MB; {len(libs)} plugins; needs glibc {major}.{minor})")


if __name__ == "__main__":
    main()
