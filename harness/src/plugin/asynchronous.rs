//! The async device stream's calls, on either side: a producer's async
//! export, a consumer's start, cancel and finish (handed to the plugin's
//! backend, [`super::backend`]), and one whole stream from a producer into
//! a consumer, which the harness drives over those calls.

use super::*;

impl Plugin {
    /// `arrowcert_produce_async` into `handler`. On success the producer
    /// owns the handler until it calls its release (possibly later, from
    /// its own threads); on failure it never took it.
    ///
    /// # Safety
    /// `handler` must point to an initialised handler that stays valid (at
    /// that address) until its release callback has been called.
    pub unsafe fn produce_async(
        &self,
        ipc: &[u8],
        device_type: ArrowDeviceType,
        device_id: i64,
        handler: *mut ArrowAsyncDeviceStreamHandler,
    ) -> Result<(), CallError> {
        // SAFETY: the caller guarantees what the backend's call requires
        // (this function's `# Safety`, which is the trait's).
        unsafe {
            self.backend
                .produce_async(ipc, device_type, device_id, handler)
        }
    }

    /// `arrowcert_produce_sliced_async`: as [`Plugin::produce_async`], the
    /// rows `slice_offset..slice_offset + slice_length` of the stream
    /// (`-1`: to its end) across batches.
    ///
    /// # Safety
    /// As [`Plugin::produce_async`].
    pub unsafe fn produce_sliced_async(
        &self,
        ipc: &[u8],
        slice_offset: i64,
        slice_length: i64,
        device_type: ArrowDeviceType,
        device_id: i64,
        handler: *mut ArrowAsyncDeviceStreamHandler,
    ) -> Result<(), CallError> {
        // SAFETY: the caller guarantees what the backend's call requires
        // (this function's `# Safety`, which is the trait's).
        unsafe {
            self.backend.produce_sliced_async(
                ipc,
                slice_offset,
                slice_length,
                device_type,
                device_id,
                handler,
            )
        }
    }

    /// True when the plugin exports both async consumer entry points.
    pub fn consumes_async(&self) -> bool {
        self.backend.consumes_async()
    }

    /// `arrowcert_consume_async_start`: the consumer initialises `handler`
    /// and returns its token.
    ///
    /// # Safety
    /// `handler` must point to a writable handler that stays valid until
    /// its release callback has been called.
    pub unsafe fn consume_async_start(
        &self,
        handler: *mut ArrowAsyncDeviceStreamHandler,
    ) -> Result<usize, CallError> {
        // SAFETY: the caller guarantees what the backend's call requires
        // (this function's `# Safety`, which is the trait's).
        unsafe { self.backend.consume_async_start(handler) }
    }

    /// True when the consumer exports the optional
    /// `arrowcert_consume_async_cancel`.
    pub fn cancels_async(&self) -> bool {
        self.backend.cancels_async()
    }

    /// The optional `arrowcert_consume_async_cancel` for a token from
    /// [`Plugin::consume_async_start`] (before its finish): `None` when the
    /// consumer does not export it.
    pub fn async_canceller(&self, token: usize) -> Option<Canceller> {
        self.backend.async_canceller(token)
    }

    /// `arrowcert_consume_async_finish` on a token from
    /// [`Plugin::consume_async_start`] (each token once): the IPC the
    /// consumer read, or its error. The call runs on a thread of its own
    /// (the plugin's last error is read there too); if it has not returned
    /// after `wait`, `None`: the thread is left behind, blocked in the
    /// plugin, and the case goes on.
    pub fn consume_async_finish(
        &self,
        token: usize,
        timeout_ms: i64,
        wait: std::time::Duration,
    ) -> Option<Result<Vec<u8>, CallError>> {
        self.backend.consume_async_finish(token, timeout_ms, wait)
    }

    /// Runs one async stream from `producer` into this consumer: the
    /// consumer initialises a handler the harness allocated, the producer
    /// drives it from its own threads, and `finish` waits up to `timeout_ms`
    /// for the handler's release. Returns what the consumer received.
    pub fn consume_async_from(
        &self,
        producer: &Plugin,
        ipc: &[u8],
        device_type: ArrowDeviceType,
        device_id: i64,
        timeout_ms: i64,
    ) -> Result<Vec<u8>, CallError> {
        const FINISH: &str = "arrowcert_consume_async_finish";
        // The library's symbols are the entry points its backend serves.
        if !self.has(FINISH) {
            return Err(CallError::Missing(FINISH));
        }
        if !producer.has("arrowcert_produce_async") {
            return Err(CallError::Missing("arrowcert_produce_async"));
        }
        // The handler must stay at one address until its release has been
        // called, possibly from a producer thread after we return: it is
        // freed only once finish() reports that release happened, and leaked
        // otherwise.
        let handler: *mut ArrowAsyncDeviceStreamHandler = Box::into_raw(Box::new(
            <ArrowAsyncDeviceStreamHandler as crate::abi::Plain>::zeroed(),
        ));
        // SAFETY: handler points to a live, zeroed handler kept as above.
        let token = match unsafe { self.consume_async_start(handler) } {
            Ok(t) => t,
            Err(e) => {
                // SAFETY: the consumer failed to start: nobody else holds
                // the handler, so it is freed here (its release was never
                // armed).
                drop(unsafe { Box::from_raw(handler) });
                return Err(e);
            }
        };
        // SAFETY: handler stays allocated (see above) for as long as the
        // producer may use it.
        let produced = unsafe { producer.produce_async(ipc, device_type, device_id, handler) };
        if produced.is_err() {
            // The producer refused synchronously and will not call the
            // handler; the harness, holding it, releases it as the spec's
            // owner would, so the consumer can finish.
            // SAFETY: handler is live and no producer uses it.
            let release = unsafe { (*handler).release };
            if let Some(release) = release {
                // SAFETY: the consumer's own release callback on its handler.
                unsafe { release(handler) };
            }
        }
        let wait = std::time::Duration::from_millis(timeout_ms.max(0) as u64)
            + std::time::Duration::from_secs(5);
        let finished = self.consume_async_finish(token, timeout_ms, wait);
        let released = match &finished {
            Some(Ok(_)) => true,
            Some(Err(e)) => e.code() != Some(libc::ETIMEDOUT),
            None => false,
        };
        if released {
            // SAFETY: finish() returned without timing out, so the
            // handler's release has been called (contract) and the
            // producer no longer touches it.
            drop(unsafe { Box::from_raw(handler) });
        }
        // Otherwise release may still come later from a producer thread:
        // the handler is deliberately leaked rather than freed under it,
        // and the worker ends after this case (the producer's threads may
        // still run in it).
        if !released {
            crate::abi::breadcrumb::taint(
                "the async producer had not released the consumer's handler when the case ended",
            );
        }
        produced?;
        finished.unwrap_or_else(|| {
            Err(CallError::Failed {
                entry: FINISH,
                code: libc::ETIMEDOUT,
                message: Some(format!(
                    "{FINISH} did not return within {} ms of its {timeout_ms} ms timeout",
                    wait.as_millis()
                )),
            })
        })
    }
}
