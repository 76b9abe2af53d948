//! The reference CUDA consumer plugin ("cuda-reference-consumer"): moves the
//! device array or stream it is given, waits on `sync_event` before reading,
//! copies every buffer to the host, imports with arrow-rs and hands back an
//! IPC stream. Everything is in `arrowcert-cuda-common`; this crate names
//! the plugin.

arrowcert_cuda_common::consumer_plugin!(
    c"cuda-reference-consumer",
    arrowcert_cuda_common::mutation::reference_consumer
);
