//! The reference CUDA producer plugin ("cuda-reference-producer"): record
//! batches exported on ARROW_DEVICE_CUDA, ARROW_DEVICE_CUDA_HOST or
//! ARROW_DEVICE_CUDA_MANAGED, their data written late on a producer stream
//! with an event recorded after the writes and `sync_event` pointing to it.
//! Everything is in `arrowcert-cuda-common`; this crate names the plugin.

arrowcert_cuda_common::producer_plugin!(
    c"cuda-reference-producer",
    arrowcert_cuda_common::mutation::reference_producer
);
