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
pub fn decode(bytes: &[u8]) -> PluginResult<Decoded> {
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
