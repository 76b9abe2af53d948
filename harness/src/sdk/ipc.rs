//! Arrow IPC stream bytes: how the harness describes data to plugins.

use std::io::Cursor;

use arrow_array::RecordBatch;
use arrow_ipc::reader::StreamReader;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::SchemaRef;

use super::{PluginError, PluginResult};

/// A decoded IPC stream: its schema and every record batch.
#[derive(Debug, Clone)]
pub struct Decoded {
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
}

impl Decoded {
    /// The batch at `batch_index` and the validated row range the producer
    /// entry points ask for (`slice_length == -1`: the whole batch from
    /// `slice_offset`), as `(batch, offset, length)`.
    pub fn range(
        &self,
        batch_index: i64,
        slice_offset: i64,
        slice_length: i64,
    ) -> PluginResult<(&RecordBatch, usize, usize)> {
        let batch = usize::try_from(batch_index)
            .ok()
            .and_then(|i| self.batches.get(i))
            .ok_or_else(|| {
                PluginError::invalid(format!(
                    "batch_index {batch_index} out of range: the stream has {} batches",
                    self.batches.len()
                ))
            })?;
        let rows = batch.num_rows() as i64;
        let length = if slice_length == -1 {
            rows - slice_offset
        } else {
            slice_length
        };
        if slice_offset < 0 || length < 0 || slice_offset + length > rows {
            return Err(PluginError::invalid(format!(
                "slice {slice_offset}+{slice_length} out of range for a batch of {rows} rows"
            )));
        }
        Ok((batch, slice_offset as usize, length as usize))
    }

    /// The batch at `batch_index`, sliced as [`Decoded::range`] says.
    pub fn batch(
        &self,
        batch_index: i64,
        slice_offset: i64,
        slice_length: i64,
    ) -> PluginResult<RecordBatch> {
        let (batch, offset, length) = self.range(batch_index, slice_offset, slice_length)?;
        Ok(batch.slice(offset, length))
    }
}

/// Decodes IPC stream bytes.
///
/// Malformed bytes (a consumer's output is untrusted) can make arrow-ipc
/// panic rather than return an error (seen: a negative body length
/// slicing a buffer); such a panic is caught and becomes an error here.
pub fn decode(bytes: &[u8]) -> PluginResult<Decoded> {
    match quietly(|| decode_unguarded(bytes)) {
        Ok(r) => r,
        Err(why) => Err(PluginError::invalid(format!(
            "IPC stream: the reader failed on malformed input: {why}"
        ))),
    }
}

thread_local! {
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// True while [`quietly`] runs on this thread: a panic hook should not
/// report a panic then, because it is caught and turned into an error.
pub fn panics_expected() -> bool {
    QUIET.with(|q| q.get())
}

/// Runs `f`, turning a panic into `Err` with its message.
pub fn quietly<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    let before = QUIET.with(|q| q.replace(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    QUIET.with(|q| q.set(before));
    r.map_err(|e| {
        e.downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| e.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into())
    })
}

fn decode_unguarded(bytes: &[u8]) -> PluginResult<Decoded> {
    let reader = StreamReader::try_new(Cursor::new(bytes), None)
        .map_err(|e| PluginError::invalid(format!("IPC stream: {e}")))?;
    let schema = reader.schema();
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PluginError::invalid(format!("IPC stream: {e}")))?;
    Ok(Decoded { schema, batches })
}

/// Encodes a schema and batches as IPC stream bytes.
pub fn encode(schema: &SchemaRef, batches: &[RecordBatch]) -> PluginResult<Vec<u8>> {
    let mut out = Vec::new();
    let mut writer = StreamWriter::try_new(&mut out, schema)
        .map_err(|e| PluginError::io(format!("IPC writer: {e}")))?;
    for b in batches {
        writer
            .write(b)
            .map_err(|e| PluginError::io(format!("IPC writer: {e}")))?;
    }
    writer
        .finish()
        .map_err(|e| PluginError::io(format!("IPC writer: {e}")))?;
    drop(writer);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int32Array, RecordBatch, StringArray};

    /// Consumers' output is untrusted: corrupt bytes give an error, never
    /// a panic out of `decode` (regression: Arrow C++ and pyarrow wrote a
    /// negative body length for an empty sliced batch, and arrow-ipc's
    /// reader panicked inside the harness).
    #[test]
    fn corrupt_streams_are_errors_not_panics() {
        let batch = RecordBatch::try_from_iter([
            ("i", Arc::new(Int32Array::from(vec![1, 2, 3])) as ArrayRef),
            (
                "s",
                Arc::new(StringArray::from(vec!["a", "bb", "ccc"])) as ArrayRef,
            ),
        ])
        .unwrap();
        let good = super::encode(&batch.schema(), &[batch]).unwrap();
        assert!(super::decode(&good).is_ok());
        let (mut errors, mut caught) = (0, 0);
        for i in 0..good.len() {
            for v in [0x00u8, 0xff, 0x80, 0x7f] {
                let mut bad = good.clone();
                bad[i] = v;
                if let Err(e) = super::decode(&bad) {
                    errors += 1;
                    caught += e.message.contains("malformed input") as usize;
                }
            }
            let _ = super::decode(&good[..i]);
        }
        assert!(errors > 0);
        // Some of these made arrow-ipc panic: the guard is exercised.
        assert!(caught > 0, "no corruption reached a reader panic");
    }
}
