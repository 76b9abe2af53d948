# arrowcert workflows. `just` lists them. CI runs `.ci/run` (= `just test`).

gold := "../shared/gold/cpp-21.0.0"

default:
    @just --list

# Build the harness and every bundled plugin.
build:
    cargo build --workspace

# The main job on bundled defaults: reference producer -> reference consumer,
# built-in scenarios, every path; prints the summary, writes reports/*.json.
roundtrip *ARGS: build
    target/debug/arrowcert roundtrip {{ARGS}}

# The same over Arrow's integration gold files.
gold *ARGS: build
    target/debug/arrowcert roundtrip --gold {{gold}} {{ARGS}}

# Certify a producer and/or a consumer rule by rule (`--producer P`,
# `--consumer C`; default: both bundled reference plugins).
certify *ARGS: build
    target/debug/arrowcert certify {{ARGS}}

# Certify a consumer only (default: the bundled reference consumer).
certify-consumer CONSUMER="reference" *ARGS: build
    target/debug/arrowcert certify --consumer {{CONSUMER}} {{ARGS}}

# The async device stream suite alone (both bundled plugins unless
# --producer/--consumer say otherwise): 2,000+ drawn schedules per side.
certify-async *ARGS: build
    target/debug/arrowcert certify --cases 1000 {{ARGS}} async

# The GPU run procedure (needs an NVIDIA driver; no CUDA toolkit): builds
# everything, runs the CUDA backend's GPU tests (they skip without a
# driver), certifies the CUDA reference plugins on the three CUDA device
# types (--require-device: a missing GPU is an error, not skips), then the
# CUDA mutants, each of which must fail its rule. Reports go to reports/gpu/.
gpu CASES="20" GPU_PYTHON="python3":
    cargo build --release --workspace
    cargo test --release -p arrowcert-sdk --features cuda --lib device::cuda -- --nocapture
    cargo test --release -p arrowcert-cuda-common -- --nocapture
    mkdir -p reports/gpu
    target/release/arrowcert certify --producer cuda-reference --consumer cuda-reference \
        --require-device cuda --device cuda --device cuda-host --device cuda-managed \
        --cases {{CASES}} --seed 1 --report reports/gpu/cuda-reference.json
    # DLPack on CUDA (docs/DLPACK.md): the harness's tensors in device
    # memory into the reference fixture (it copies them back through the
    # driver) and into NumPy (which refuses device tensors: limitations,
    # so that run is not certified and may exit non-zero). Needs
    # target/python-test/venv (scripts/python/setup-test-env.sh; on a
    # machine without network, carry it there).
    target/release/arrowcert --python target/python-test/venv/bin/python certify --dlpack \
        --require-device cuda --device cuda \
        --consumer py:harness/tests/fixtures/dlpack/mutants.py 'dlpack/consumer/cuda/' \
        --report reports/gpu/dlpack-reference.json
    -target/release/arrowcert --python target/python-test/venv/bin/python certify --dlpack \
        --device cuda --consumer py:adapters/dlpack/numpy.py 'dlpack/consumer/cuda/' \
        --report reports/gpu/dlpack-numpy.json
    # CUDA libraries through DLPack: CuPy and PyTorch from GPU_PYTHON (the
    # GPU machine's own Python; the project pins neither), each alone and
    # in every pair, against expectations/dlpack-<name>.json. The first
    # run's results: reports/FINDINGS.md, "On an H100".
    target/release/arrowcert --python {{GPU_PYTHON}} dlpack-matrix --cases 5 \
        --library cupy=py:adapters/dlpack/cupy.py --library torch=py:adapters/dlpack/torch_cuda.py \
        --out reports/gpu --expectations expectations
    # JAX on CUDA through DLPack, producer and consumer (JAX's CUDA plugin,
    # jax[cuda12], in GPU_PYTHON; not run on a GPU yet). A Python without
    # it says so in one line (exit 2) and the recipe goes on.
    -target/release/arrowcert --python {{GPU_PYTHON}} certify --dlpack --require-device cuda \
        --device cuda --producer py:adapters/dlpack/jax_cuda.py \
        --consumer py:adapters/dlpack/jax_cuda.py --report reports/gpu/dlpack-jax-cuda.json
    # The CUDA Array Interface (docs/CAI.md) of CuPy, Numba and PyTorch
    # from GPU_PYTHON: the dict rules, the cai.agree.* rules against each
    # library's own __dlpack__ (CuPy, PyTorch; Numba's arrays have none),
    # and the memory rules through the harness's CUDA backend (cai.values,
    # cai.producer.sync, cai.data.*), and as consumers of the harness's own
    # CUDA arrays with work pending on their stream (cai.consumer.sync);
    # none of it run on a GPU yet. cai.stream.lifetime is not exercised on
    # CUDA (the reason is in the reports), so a run may exit non-zero.
    for lib in cupy numba torch; do \
        target/release/arrowcert --python {{GPU_PYTHON}} certify --cai \
            --producer py:adapters/cai/$lib.py --consumer py:adapters/cai/$lib.py \
            --report reports/gpu/cai-$lib.json || true; \
    done
    # Their pairs: each library's CAI arrays (with work pending on their
    # stream in the -pending cases) into each other's cai_consume.
    for p in cupy numba torch; do for c in cupy numba torch; do \
        if [ "$p" != "$c" ]; then \
            target/release/arrowcert --python {{GPU_PYTHON}} certify --cai \
                --producer py:adapters/cai/$p.py --consumer py:adapters/cai/$c.py \
                --report reports/gpu/cai-pair-$p-$c.json || true; \
        fi; \
    done; done
    # Last: each CUDA mutant must fail its rule (on the H100, read-before-wait
    # did not; the consumer's settled rerun, built since, should catch it,
    # and event-by-value's fix is unconfirmed: FINDINGS.md, "On an H100").
    bash scripts/gpu-mutants.sh target/release

# The Python wheel (docs/PYTHON_ADAPTERS.md, "From Python and pytest"):
# the binary and the bundled plugins with the arrowcert package (launcher,
# API, pytest plugin) into target/wheels/ (`--profile debug` packs a test
# build; `cargo test -p arrowcert --test wheel` installs and runs one).
wheel *ARGS:
    bash scripts/wheel/build.sh {{ARGS}}

# Build the real-library adapters (Arrow C++, nanoarrow, pyarrow, polars,
# duckdb) into target/real/lib/: installs the pinned libraries into a
# project-local environment under target/real/ first (needs PyPI).
real:
    bash scripts/real/build.sh

# The compatibility matrix over every bundled library (reference, arrow-rs,
# Arrow C++, nanoarrow; pyarrow, polars, duckdb, nanoarrow-python, arro3,
# pandas, datafusion, pyogrio (GDAL) through py: adapters; SQLite, DuckDB and PostgreSQL through their
# ADBC drivers): each certified on its own,
# then every producer -> consumer pair, over the gold files plus CASES
# generated scenarios; writes reports/matrix.{json,md,html} and a
# screenshot of the page (reports/matrix.png) when chromium is installed.
matrix CASES="100" SEED="20261122" *ARGS: build real
    #!/usr/bin/env bash
    set -euo pipefail
    # PostgreSQL's ADBC driver needs a server: a throwaway one in a scratch
    # directory (scripts/postgres/server.sh), stopped and removed at the end.
    eval "$(bash scripts/postgres/server.sh start)"
    trap 'bash scripts/postgres/server.sh stop "$ARROWCERT_PG_DIR"' EXIT
    # Each library's known results (expectations/): a unit whose results
    # are not as its file says fails the matrix.
    target/debug/arrowcert matrix --gold {{gold}} --cases {{CASES}} --seed {{SEED}} --out reports --expectations expectations --units-at-once 3 --jobs 1 --repeat 1 {{ARGS}}
    bash scripts/screenshot.sh reports/matrix.html reports/matrix.png
    # nanoarrow's own C data integration library, through the built-in
    # integration adapter (no plugin); failures are its findings.
    target/debug/arrowcert certify --producer target/real/lib/libnanoarrow_c_data_integration.so --consumer target/real/lib/libnanoarrow_c_data_integration.so --gold {{gold}} --cases {{CASES}} --seed {{SEED}} --expectations expectations/nanoarrow-integration.json --report reports/runs/certify~both~nanoarrow-integration.json
    # The published copies of the certification reports.
    for f in reports/runs/certify~*.json; do b=$(basename "$f" .json); role=$(echo "$b" | cut -d~ -f2); lib=$(echo "$b" | cut -d~ -f3); gzip -9 -n -c "$f" > "reports/certify/$role-$lib.json.gz"; done

# The DLPack matrix (docs/DLPACK.md): NumPy, pyarrow, array-api-strict, JAX
# (CPU) and nanoarrow (pinned in scripts/real/versions.env, installed into
# target/real/venv) certified through their DLPack adapters
# (adapters/dlpack/), then every producer -> consumer pair; writes
# reports/dlpack-matrix.{json,md} and reports/dlpack/*.json, checked
# against expectations/dlpack-*.json. Every case of the matrix runs on the
# CPU; the DLPack CUDA cases are part of `just gpu`.
dlpack-matrix: build
    bash scripts/real/setup.sh
    target/debug/arrowcert dlpack-matrix --out reports --expectations expectations
    # The published copies of the per-library and per-pair reports.
    for f in reports/dlpack/*.json; do gzip -9 -n -f "$f"; done

# Nightly: many generated scenarios with a fresh seed, plus the gold files.
certify-nightly CASES="20000" *ARGS: build
    target/debug/arrowcert certify --cases {{CASES}} --gold {{gold}} {{ARGS}}

# Fuzz one target (validate, consumer, producer, async) for SECONDS against
# PLUGIN: `reference`, `mutant:NAME`, `async-mutant:NAME` or a library path
# (docs/FUZZING.md). Crashes are minimised into target/fuzz-runs/.
fuzz TARGET PLUGIN="reference" SECONDS="60":
    bash scripts/fuzz/run.sh {{TARGET}} {{PLUGIN}} {{SECONDS}}

# The nightly fuzzing job: every target against every plugin in
# FUZZ_PRODUCERS / FUZZ_CONSUMERS (default: the reference plugins) for
# SECONDS each, findings minimised, one report in reports/fuzz/nightly.json.
fuzz-nightly SECONDS="600":
    bash scripts/fuzz/nightly.sh {{SECONDS}}

# CI's fuzz smoke run: every target for a few seconds, must end clean.
fuzz-smoke SECONDS="10":
    bash scripts/fuzz/smoke.sh {{SECONDS}}

# One planted bug per target, each of which the fuzzer must find and
# minimise within SECONDS (docs/FUZZING.md, "Mutants").
fuzz-mutants SECONDS="300":
    bash scripts/fuzz/mutants.sh {{SECONDS}}

# Rerun one certification case exactly (IDs and seeds come from reports).
replay *ARGS: build
    target/debug/arrowcert replay {{ARGS}}

# List the rules, or explain one.
rules *ARGS: build
    target/debug/arrowcert rules {{ARGS}}

# Describe a plugin.
inspect LIB: build
    target/debug/arrowcert inspect {{LIB}}

# Check a C header's Arrow structs against arrowcert's layouts.
abi-check HEADER="harness/include/arrowcert_plugin.h": build
    target/debug/arrowcert abi-check {{HEADER}}

# The test suite (what CI runs).
test:
    cargo test --workspace

# The lints CI denies warnings of ([workspace.lints] in Cargo.toml).
lint:
    cargo clippy --workspace --all-targets -- -D warnings

# Benchmarks (figures printed, never asserted; docs/BENCHMARKS.md): gold
# round trips per second per path with a baseline ratio; certification
# overhead against a bare produce -> import -> release loop; validation
# throughput beside nanoarrow (its first build fetches nanoarrow's source
# distribution from PyPI with pip; NANOARROW_SDIST=FILE uses a local copy).
bench:
    cargo bench -p arrowcert --bench roundtrip --bench certify --bench scenarios
    cargo bench -p arrowcert-bench-nanoarrow --features nanoarrow --bench validate

# The same seed gives the same verdicts case by case: RUNS certifications of
# the reference pair in workers, and one in process, compared; then RUNS
# certifications each of pyarrow's producer and DuckDB's consumer (with the
# real libraries installed: `just real`; skipped with the reason otherwise).
determinism RUNS="20":
    ARROWCERT_DETERMINISM_RUNS={{RUNS}} cargo test -p arrowcert --test determinism -- --nocapture

# Every benchmark, one short round (what CI runs): they build and run here.
bench-smoke:
    bash scripts/bench-smoke.sh

# Regenerate the committed report JSON Schema.
report-schema: build
    target/debug/arrowcert report-schema > reports/report.schema.json

fmt:
    cargo fmt --all

lint:
    cargo clippy --workspace --all-targets -- -D warnings

# Draft expectations files from the last `just matrix` run's reports
# (expectations/README.md): review every reason before committing.
expectations-draft:
    for lib in arrow-rs arrow-cpp nanoarrow pyarrow polars duckdb nanoarrow-python arro3 pandas datafusion pyogrio sqlite-adbc duckdb-adbc postgresql-adbc; do python3 scripts/expectations-from-reports.py $lib reports/runs/certify~producer~$lib.json reports/runs/certify~consumer~$lib.json > expectations/$lib.json; done

# Make every library's expectations file exact over the committed reports
# (reports/certify/, which `just matrix` refreshes, and the other runs kept
# in reports/seen/, whose differing verdicts mark cases flaky), keeping the
# reasons of the entries that already are; `cargo test -p arrowcert --test
# expectations_exact` checks the result (expectations/README.md).
expectations-exact:
    for lib in arrow-rs arrow-cpp nanoarrow pyarrow polars duckdb nanoarrow-python arro3 pandas datafusion pyogrio sqlite-adbc duckdb-adbc postgresql-adbc; do python3 scripts/expectations-from-reports.py --exact $lib expectations/$lib.json reports/certify/producer-$lib.json.gz reports/certify/consumer-$lib.json.gz --seen $(ls reports/seen/*-$lib-*.json.gz 2>/dev/null) > target/$lib.exact.json && mv target/$lib.exact.json expectations/$lib.json; done

# The release tarball (scripts/release/tarball.sh): bin/arrowcert, the
# reference and arrow-rs plugins in lib/arrowcert/, include/, docs/ and the
# C and Rust examples, as target/release-tarball/arrowcert-<version>-x86_64-linux-gnu.tar.gz.
release-tarball *ARGS:
    bash scripts/release/tarball.sh {{ARGS}}
