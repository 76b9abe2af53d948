#!/usr/bin/env bash
# Certifies each CUDA mutant (producers/cuda-mutants, consumers/cuda-mutants)
# on the CUDA device and checks that its rule fails. Part of `just gpu`;
# needs a GPU. Usage: scripts/gpu-mutants.sh TARGET_DIR
set -uo pipefail
dir=${1:-target/release}
exe=$dir/arrowcert
status=0
check() { # role lib mutant rule
    local role=$1 lib=$2 mutant=$3 rule=$4 report=reports/gpu/$3.json
    ARROWCERT_MUTANT=$mutant "$exe" certify "--$role" "$lib" --require-device cuda \
        --device cuda --cases 0 --report "$report" "device:cuda/" >/dev/null
    if python3 -c "import json,sys; r=json.load(open('$report')); sys.exit(0 if any(x['rule']=='$rule' and x['verdict']=='fail' for x in r['rules']) else 1)"; then
        echo "caught   $role $mutant: $rule fails"
    else
        echo "MISSED   $role $mutant: $rule does not fail ($report)"; status=1
    fi
}
p=$dir/libarrowcert_producer_cuda_mutants.so
c=$dir/libarrowcert_consumer_cuda_mutants.so
check producer "$p" no-event device.event.covers-data
check producer "$p" event-before-write device.event.covers-data
check producer "$p" event-by-value device.event.type
check producer "$p" host-buffers device.buffers.accessible
check producer "$p" managed-buffers device.buffers.memory-kind
check producer "$p" short-allocation device.buffers.in-allocation
check producer "$p" leak-device-memory array.release.frees
check consumer "$c" read-before-wait consumer.sync.waits
exit $status
