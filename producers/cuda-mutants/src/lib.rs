//! The mutant CUDA producer plugin ("cuda-mutant-producer"): the reference
//! CUDA producer with one fault, chosen by `ARROWCERT_MUTANT` (read once):
//! `none`, `no-event`, `event-before-write`, `event-by-value`,
//! `host-buffers`, `managed-buffers`, `short-allocation`, `leak-device-memory` (see
//! `arrowcert_cuda_common::mutation::Producer` for the rule each breaks).
//! An unknown name makes every entry point fail with `EINVAL`.

arrowcert_cuda_common::producer_plugin!(
    c"cuda-mutant-producer",
    arrowcert_cuda_common::mutation::producer_from_env
);
