//! The async device stream's entry points, on either side: a producer's
//! async export, a consumer's start, cancel and finish, and one whole stream
//! from a producer into a consumer.

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
        const E: &str = "arrowcert_produce_async";
        let f = self.entries.produce_async.ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        // SAFETY: `ipc` is valid for the call; `handler` as the caller
        // guarantees.
        let rc = unsafe {
            f(
                ipc.as_ptr(),
                ipc.len() as i64,
                device_type,
                device_id,
                handler,
            )
        };
        self.check(E, rc)
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
        const E: &str = "arrowcert_produce_sliced_async";
        let f = self
            .entries
            .produce_sliced_async
            .ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        // SAFETY: `ipc` is valid for the call; `handler` as the caller
        // guarantees.
        let rc = unsafe {
            f(
                ipc.as_ptr(),
                ipc.len() as i64,
                slice_offset,
                slice_length,
                device_type,
                device_id,
                handler,
            )
        };
        self.check(E, rc)
    }

    /// True when the plugin exports both async consumer entry points.
    pub fn consumes_async(&self) -> bool {
        self.entries.consume_async_start.is_some() && self.entries.consume_async_finish.is_some()
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
        const E: &str = "arrowcert_consume_async_start";
        let f = self
            .entries
            .consume_async_start
            .ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        let mut token: *mut c_void = std::ptr::null_mut();
        // SAFETY: handler as the caller guarantees; token is writable.
        let rc = unsafe { f(handler, &mut token) };
        self.check(E, rc)?;
        Ok(token as usize)
    }

    /// True when the consumer exports the optional
    /// `arrowcert_consume_async_cancel`.
    pub fn cancels_async(&self) -> bool {
        self.entries.consume_async_cancel.is_some()
    }

    /// The optional `arrowcert_consume_async_cancel` for a token from
    /// [`Plugin::consume_async_start`] (before its finish): `None` when the
    /// consumer does not export it.
    pub fn async_canceller(&self, token: usize) -> Option<Canceller> {
        self.entries
            .consume_async_cancel
            .map(|f| Canceller { f, token })
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
        const E: &str = "arrowcert_consume_async_finish";
        let Some(f) = self.entries.consume_async_finish else {
            return Some(Err(CallError::Missing(E)));
        };
        crate::abi::breadcrumb::step(E);
        let entries = self.entries;
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("arrowcert-finish".into())
            .spawn(move || {
                let (mut p, mut n) = (std::ptr::null_mut(), 0i64);
                // SAFETY: the token came from start (the plugin checks what
                // it is); the out pointers are writable.
                let rc = unsafe { f(token as *mut c_void, timeout_ms, &mut p, &mut n) };
                let r = if rc == 0 {
                    Ok(entries.take_output(p, n))
                } else {
                    Err(CallError::Failed {
                        entry: E,
                        code: rc,
                        message: entries.last_error(),
                    })
                };
                let _ = tx.send(r);
            });
        if let Err(e) = spawned {
            return Some(Err(CallError::Failed {
                entry: E,
                code: e.raw_os_error().unwrap_or(libc::EAGAIN),
                message: Some(format!("the harness could not start a thread: {e}")),
            }));
        }
        rx.recv_timeout(wait).ok()
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
        if self.entries.consume_async_finish.is_none() {
            return Err(CallError::Missing(FINISH));
        }
        if producer.entries.produce_async.is_none() {
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
