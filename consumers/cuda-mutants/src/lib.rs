//! The mutant CUDA consumer plugin ("cuda-mutant-consumer"): the reference
//! CUDA consumer with one fault, chosen by `ARROWCERT_MUTANT` (read once):
//! `none` or `read-before-wait` (copies the buffers before waiting on
//! `sync_event`: consumer.sync.waits). An unknown name makes every entry
//! point fail with `EINVAL`.

arrowcert_cuda_common::consumer_plugin!(
    c"cuda-mutant-consumer",
    arrowcert_cuda_common::mutation::consumer_from_env
);
