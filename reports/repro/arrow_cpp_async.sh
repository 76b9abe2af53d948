#!/usr/bin/env bash
# Builds the two Arrow C++ async repros against pyarrow 26.0.1's libarrow
# and runs them. No harness. Needs g++, valgrind and a Python with pip:
#
#   bash reports/repro/arrow_cpp_async.sh
#
# arrow_cpp_async_producer_freed.cc (ExportAsyncRecordBatchReader, under
# valgrind), expected on 26.0.1:
#   plain          "Invalid read of size 4 ... OnNextTask" in a 160-byte block
#                  ExportAsyncRecordBatchReader allocated and freed before
#                  on_next_task(NULL);
#   cancel-at-end  the same read, then producer->cancel called through it;
#   refuse         invalid reads of the task block extract_data freed, in
#                  Arrow's loop (and a SIGSEGV when run without valgrind).
# arrow_cpp_async_consumer_late_request.cc (CreateAsyncDeviceStreamHandler):
#   end            request() after the handler's release began, in every run;
#   error          the 2 tasks queued before on_error never extracted, in
#                  every run;
#   slow-error     the same with on_error 20 ms later: (almost) all extracted.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q "pyarrow==${PYARROW:-26.0.1}"
read -r inc lib < <("$work/venv/bin/python" -c 'import pyarrow as p; print(p.get_include(), p.get_library_dirs()[0])')
libarrow=$(ls "$lib"/libarrow.so.[0-9]* | grep -E '/libarrow\.so\.[0-9]+$' | head -n1)
for name in arrow_cpp_async_producer_freed arrow_cpp_async_consumer_late_request; do
    g++ -std=c++20 -O1 -g -D_GLIBCXX_USE_CXX11_ABI=1 -isystem "$inc" \
        -o "$work/$name" "$here/$name.cc" "$libarrow" -Wl,-rpath,"$lib" -pthread
done
for mode in plain cancel-at-end refuse; do
    echo "== producer: $mode (valgrind)"
    valgrind -q --num-callers=3 "$work/arrow_cpp_async_producer_freed" "$mode" \
        > "$work/$mode.log" 2>&1 || echo "(exit status $?)"
    grep -vE 'dl-[a-z-]+\.c|rtld|dlopen\.c|dlerror\.c|strcmp|strdup' "$work/$mode.log" |
        grep -E 'Invalid|Jump|OnNextTask|Address|end of stream|released|on_error|finished' |
        sed -n 1,12p || true
done
for mode in end error slow-error; do
    echo "== consumer: $mode"
    "$work/arrow_cpp_async_consumer_late_request" "$mode" 200
done
