//! A consumer's calls: arrays, device arrays and streams handed to it, and
//! what it read back, handed to the plugin's backend ([`super::backend`]).

use super::*;

impl Plugin {
    pub fn consume_device_array(
        &self,
        schema: &mut ArrowSchema,
        array: &mut ArrowDeviceArray,
    ) -> Result<Vec<u8>, CallError> {
        self.backend.consume_device_array(schema, array)
    }

    pub fn consume_device_stream(
        &self,
        stream: &mut ArrowDeviceArrayStream,
    ) -> Result<Vec<u8>, CallError> {
        self.backend.consume_device_stream(stream)
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
        self.backend.consume_array(schema, array, sent)
    }

    pub fn consume_stream(&self, stream: &mut ArrowArrayStream) -> Result<Vec<u8>, CallError> {
        self.backend.consume_stream(stream)
    }

    /// `arrowcert_consume_values`: the plugin's own view of what its last
    /// consume call on this thread read, as JSON text
    /// ([`crate::compare::pyvalues`]), made without its Arrow exporter;
    /// `None` when it has no such view.
    pub fn consumed_values(&self) -> Option<String> {
        self.backend.consumed_values()
    }
}
