//! Flow control between the consumer and the producer thread: credits from
//! `request`, the cancel flag and a request error, behind one mutex, with a
//! condition variable that wakes the producer thread.
//!
//! Nothing here calls a handler callback; `request` and `cancel` only record
//! and notify, which is what lets the consumer call them from inside its
//! callbacks: `request` "MUST NOT synchronously call on_next_task or
//! on_error to avoid recursive and reentrant callbacks".

use std::sync::{Condvar, Mutex, MutexGuard};

#[derive(Debug, Default)]
struct State {
    /// Tasks the consumer asked for and has not received yet (saturating).
    credits: u64,
    cancelled: bool,
    /// A request error not yet reported through `on_error`.
    error: Option<String>,
}

/// What the producer thread should do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// One credit was taken: deliver one task.
    Deliver,
    /// The consumer cancelled: stop and release the handler, no `on_error`.
    Cancelled,
    /// The consumer misused `request`: report it through `on_error`.
    Failed(String),
}

/// Shared by the producer thread and the `ArrowAsyncProducer` callbacks.
#[derive(Debug, Default)]
pub struct Flow {
    state: Mutex<State>,
    wake: Condvar,
}

impl Flow {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // No code holding this lock can panic, but never propagate poisoning
        // into an FFI callback either.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `request(n)`: "registers the given number of additional
    /// arrays/batches to be produced"; "It is invalid to call this function
    /// with a value of n that is <= 0. Producers should error (e.g. call
    /// on_error) if receiving such a value"; "After cancel is called,
    /// additional calls to this function must be a NOP".
    pub fn request(&self, n: i64) {
        let mut state = self.lock();
        if state.cancelled {
            return;
        }
        if n <= 0 {
            state.error.get_or_insert_with(|| {
                format!(
                    "ArrowAsyncProducer.request called with n = {n}: \"It is invalid to call \
                     this function with a value of n that is <= 0\""
                )
            });
        } else {
            state.credits = state.credits.saturating_add(n.unsigned_abs());
        }
        drop(state);
        self.wake.notify_all();
    }

    /// `cancel`: "Calls to cancel must be idempotent and thread-safe".
    pub fn cancel(&self) {
        self.lock().cancelled = true;
        self.wake.notify_all();
    }

    /// The stop condition, if any. A request error recorded before cancel
    /// wins (it was an error of a live stream); after cancel none is recorded.
    fn stop(state: &mut State) -> Option<Next> {
        if let Some(message) = state.error.take() {
            return Some(Next::Failed(message));
        }
        state.cancelled.then_some(Next::Cancelled)
    }

    /// Blocks until a task may be delivered (taking one credit) or the flow
    /// stops. This is the back-pressure: "A producer should only call the
    /// appropriate on_next_task callback up to a maximum of the total sum of
    /// calls to this method before propagating back-pressure / waiting."
    /// `cancel` and `request` wake it.
    pub fn wait_for_credit(&self) -> Next {
        let mut state = self.lock();
        loop {
            if let Some(stop) = Self::stop(&mut state) {
                return stop;
            }
            if state.credits > 0 {
                state.credits -= 1;
                return Next::Deliver;
            }
            state = self.wake.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The stop condition without waiting (before the end-of-stream call).
    pub fn poll_stop(&self) -> Option<Next> {
        Self::stop(&mut self.lock())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn credits_are_counted() {
        let flow = Flow::new();
        flow.request(2);
        assert_eq!(flow.wait_for_credit(), Next::Deliver);
        assert_eq!(flow.wait_for_credit(), Next::Deliver);
        assert_eq!(flow.poll_stop(), None);
    }

    #[test]
    fn bad_request_is_an_error_once() {
        let flow = Flow::new();
        flow.request(1);
        flow.request(0);
        flow.request(-3);
        assert!(matches!(flow.wait_for_credit(), Next::Failed(m) if m.contains("n = 0")));
    }

    #[test]
    fn request_after_cancel_is_a_nop() {
        let flow = Flow::new();
        flow.cancel();
        flow.cancel();
        flow.request(0);
        flow.request(5);
        assert_eq!(flow.wait_for_credit(), Next::Cancelled);
    }

    #[test]
    fn cancel_wakes_a_waiting_producer() {
        let flow = Arc::new(Flow::new());
        let waiter = {
            let flow = flow.clone();
            std::thread::spawn(move || flow.wait_for_credit())
        };
        std::thread::sleep(Duration::from_millis(50));
        flow.cancel();
        assert_eq!(waiter.join().unwrap(), Next::Cancelled);
    }

    #[test]
    fn huge_requests_saturate() {
        let flow = Flow::new();
        flow.request(i64::MAX);
        flow.request(i64::MAX);
        flow.request(i64::MAX);
        assert_eq!(flow.wait_for_credit(), Next::Deliver);
    }
}
