//! Calling a consumer's entry points: arrays, device arrays and streams
//! handed to it, and what it read back.

use super::*;

impl Plugin {
    pub fn consume_device_array(
        &self,
        schema: &mut ArrowSchema,
        array: &mut ArrowDeviceArray,
    ) -> Result<Vec<u8>, CallError> {
        const E: &str = "arrowcert_consume_device_array";
        if let (None, Some(f)) = (
            self.entries.consume_device_array,
            self.entries.consume_device_array_s,
        ) {
            const V: &str = "arrowcert_consume_device_array_to_stream";
            crate::abi::breadcrumb::step(V);
            let mut read = <ArrowArrayStream as crate::abi::Plain>::zeroed();
            // SAFETY: all three pointers are valid for the whole call; the
            // structures were filled by a producer and are live.
            let rc = unsafe { f(schema, array, &mut read) };
            return self.read_back(V, rc, &mut read);
        }
        let f = self
            .entries
            .consume_device_array
            .ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        let (mut p, mut n) = (std::ptr::null_mut(), 0i64);
        // SAFETY: all four pointers are valid for the whole call; the
        // structures were filled by a producer and are live.
        let rc = unsafe { f(schema, array, &mut p, &mut n) };
        self.check(E, rc)?;
        Ok(self.take_output(p, n))
    }

    pub fn consume_device_stream(
        &self,
        stream: &mut ArrowDeviceArrayStream,
    ) -> Result<Vec<u8>, CallError> {
        const E: &str = "arrowcert_consume_device_stream";
        if let (None, Some(f)) = (
            self.entries.consume_device_stream,
            self.entries.consume_device_stream_s,
        ) {
            const V: &str = "arrowcert_consume_device_stream_to_stream";
            crate::abi::breadcrumb::step(V);
            let mut read = <ArrowArrayStream as crate::abi::Plain>::zeroed();
            // SAFETY: both pointers are valid for the whole call.
            let rc = unsafe { f(stream, &mut read) };
            return self.read_back(V, rc, &mut read);
        }
        let f = self
            .entries
            .consume_device_stream
            .ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        let (mut p, mut n) = (std::ptr::null_mut(), 0i64);
        // SAFETY: all pointers are valid for the whole call.
        let rc = unsafe { f(stream, &mut p, &mut n) };
        self.check(E, rc)?;
        Ok(self.take_output(p, n))
    }

    /// `arrowcert_consume_array`. `sent` is what the harness handed over,
    /// logically: a plugin never sees it; the integration adapter has the
    /// library compare what it imports with it (the libraries' import entry
    /// points judge against a JSON file instead of reporting what they read).
    pub fn consume_array(
        &self,
        schema: &mut ArrowSchema,
        array: &mut ArrowArray,
        sent: &arrow_array::RecordBatch,
    ) -> Result<Vec<u8>, CallError> {
        if let Some(l) = &self.integration {
            return l.consume_array(schema, array, sent);
        }
        const E: &str = "arrowcert_consume_array";
        if let (None, Some(f)) = (self.entries.consume_array, self.entries.consume_array_s) {
            const V: &str = "arrowcert_consume_array_to_stream";
            crate::abi::breadcrumb::step(V);
            let mut read = <ArrowArrayStream as crate::abi::Plain>::zeroed();
            // SAFETY: all three pointers are valid for the whole call.
            let rc = unsafe { f(schema, array, &mut read) };
            return self.read_back(V, rc, &mut read);
        }
        let f = self.entries.consume_array.ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        let (mut p, mut n) = (std::ptr::null_mut(), 0i64);
        // SAFETY: all pointers are valid for the whole call.
        let rc = unsafe { f(schema, array, &mut p, &mut n) };
        self.check(E, rc)?;
        Ok(self.take_output(p, n))
    }

    pub fn consume_stream(&self, stream: &mut ArrowArrayStream) -> Result<Vec<u8>, CallError> {
        const E: &str = "arrowcert_consume_stream";
        if let (None, Some(f)) = (self.entries.consume_stream, self.entries.consume_stream_s) {
            const V: &str = "arrowcert_consume_stream_to_stream";
            crate::abi::breadcrumb::step(V);
            let mut read = <ArrowArrayStream as crate::abi::Plain>::zeroed();
            // SAFETY: both pointers are valid for the whole call.
            let rc = unsafe { f(stream, &mut read) };
            return self.read_back(V, rc, &mut read);
        }
        let f = self.entries.consume_stream.ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        let (mut p, mut n) = (std::ptr::null_mut(), 0i64);
        // SAFETY: all pointers are valid for the whole call.
        let rc = unsafe { f(stream, &mut p, &mut n) };
        self.check(E, rc)?;
        Ok(self.take_output(p, n))
    }

    /// `arrowcert_consume_values`: the plugin's own view of what its last
    /// consume call on this thread read, as JSON text
    /// ([`crate::compare::pyvalues`]), made without its Arrow exporter;
    /// `None` when it has no such view.
    pub fn consumed_values(&self) -> Option<String> {
        let f = self.entries.consume_values?;
        // SAFETY: declared type (`const char* (void)`), no arguments; the
        // result is NULL or a NUL-terminated string valid until the next
        // call on this thread, copied at once.
        let p = unsafe { f() };
        if p.is_null() {
            return None;
        }
        // SAFETY: non-NULL and NUL-terminated per the contract.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }
}
