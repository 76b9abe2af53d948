//! Arrow IPC stream bytes: how the harness describes data to plugins.

use std::io::Cursor;

use arrow_array::cast::AsArray;
use arrow_array::{make_array, Array, RecordBatch, RecordBatchOptions};
use arrow_buffer::Buffer;
use arrow_data::transform::MutableArrayData;
use arrow_data::ArrayData;
use arrow_ipc::reader::StreamReader;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::SchemaRef;
use arrow_schema::{DataType, IntervalUnit};

use super::{PluginError, PluginResult};
use crate::quiet::quietly;

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

    /// This stream's rows `slice_offset..slice_offset + slice_length`
    /// (`slice_length == -1`: to the end), counted across batches as a
    /// table's slice counts them (the sliced entry points,
    /// docs/PLUGIN_ABI.md): see [`slice_table`].
    pub fn sliced(self, slice_offset: i64, slice_length: i64) -> PluginResult<Decoded> {
        let batches = slice_table(&self.batches, slice_offset, slice_length)?;
        Ok(Decoded {
            schema: self.schema,
            batches,
        })
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

/// Walks the stream's message frames and refuses one whose metadata or
/// body reaches past the end of `bytes` before arrow-ipc reads it: its
/// reader allocates (and zeroes) a message's declared body length, up to
/// 64 MiB, before it finds out the bytes are not there, which a corrupt
/// length from a plugin or a fuzzer makes every call pay.
fn frames_fit(bytes: &[u8]) -> PluginResult<()> {
    let bad = |what: String| Err(PluginError::invalid(format!("IPC stream: {what}")));
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
    };
    let mut at = 0usize;
    while at < bytes.len() {
        // A truncated length is left for the reader (it may read it as the
        // end of the stream).
        let Some(mut len) = word(at) else {
            return Ok(());
        };
        at += 4;
        if len == 0xFFFF_FFFF {
            let Some(l) = word(at) else {
                return Ok(());
            };
            len = l;
            at += 4;
        }
        if len == 0 {
            return Ok(()); // end of stream
        }
        let Some(meta) = bytes.get(at..at + len as usize) else {
            return bad(format!(
                "message metadata of {len} bytes at byte {at} runs past the end ({} bytes)",
                bytes.len()
            ));
        };
        // A message that does not parse is left for the reader to refuse.
        let body = match arrow_ipc::root_as_message(meta) {
            Ok(m) => m.bodyLength(),
            Err(_) => return Ok(()),
        };
        at += len as usize;
        match usize::try_from(body)
            .ok()
            .and_then(|b| at.checked_add(b))
            .filter(|&end| end <= bytes.len())
        {
            Some(end) => at = end,
            None => {
                return bad(format!(
                    "a message body of {body} bytes at byte {at} runs past the end ({} bytes)",
                    bytes.len()
                ))
            }
        }
    }
    Ok(())
}

fn decode_unguarded(bytes: &[u8]) -> PluginResult<Decoded> {
    frames_fit(bytes)?;
    let reader = StreamReader::try_new(Cursor::new(bytes), None)
        .map_err(|e| PluginError::invalid(format!("IPC stream: {e}")))?;
    let schema = reader.schema();
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PluginError::invalid(format!("IPC stream: {e}")))?;
    Ok(Decoded { schema, batches })
}

/// Encodes a schema and batches as IPC stream bytes.
///
/// Every batch is first copied into arrays at offset 0 ([`compacted`]):
/// arrow-ipc 60.1.0's writer mishandles some sliced or empty nested arrays
/// (run-end encoded views at an offset, a dense union under an empty large
/// list) and writes streams its own reader refuses ("Invalid variadic count
/// 1 for Utf8View column", "Buffer count mismatched with metadata"). The
/// copy holds the same values, so what a consumer read is still what it
/// hands back.
pub fn encode(schema: &SchemaRef, batches: &[RecordBatch]) -> PluginResult<Vec<u8>> {
    let mut out = Vec::new();
    let mut writer = StreamWriter::try_new(&mut out, schema)
        .map_err(|e| PluginError::io(format!("IPC writer: {e}")))?;
    for b in batches {
        let b = compacted(b);
        writer
            .write(&b)
            .map_err(|e| PluginError::io(format!("IPC writer: {e}")))?;
    }
    writer
        .finish()
        .map_err(|e| PluginError::io(format!("IPC writer: {e}")))?;
    drop(writer);
    Ok(out)
}

/// `batch` with every column copied into fresh arrays at offset 0 (the same
/// values; dictionaries keep their values as they are). Should the copy
/// panic (it should not on a validated batch), the batch is written as it
/// is.
pub fn compacted(batch: &RecordBatch) -> RecordBatch {
    let copy = || -> Option<RecordBatch> {
        let columns = batch
            .columns()
            .iter()
            .map(|c| {
                let data = day_times_aligned(c.to_data())?;
                let mut m = MutableArrayData::new(vec![&data], false, data.len());
                m.try_extend(0, 0, data.len()).ok()?;
                gc_views(m.freeze()).map(make_array)
            })
            .collect::<Option<Vec<_>>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        RecordBatch::try_new_with_options(batch.schema(), columns, &options).ok()
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(copy))
        .ok()
        .flatten()
        .unwrap_or_else(|| batch.clone())
}

/// `data` with the values of every day-time interval array in it 8-byte
/// aligned. arrow-rs 60.1.0 lays `IntervalDayTime` out as two `i32`s
/// (alignment 4, which its FFI importer keeps), but arrow-data's
/// `MutableArrayData` reads those values as `i64` and panics on a buffer at
/// an address that is 4 mod 8: a producer's valid, 4-aligned buffer (the
/// spec asks for no more: "it is RECOMMENDED ... 8 or 64 bytes") then left
/// the copy above to fall back to the uncopied batch (regression: a
/// reference -> reference run failed when a varied encoding placed a
/// day-time list's values so).
fn day_times_aligned(data: ArrayData) -> Option<ArrayData> {
    let misaligned = |d: &ArrayData| {
        matches!(d.data_type(), DataType::Interval(IntervalUnit::DayTime))
            && d.buffers().iter().any(|b| b.as_ptr().align_offset(8) != 0)
    };
    fn any(d: &ArrayData, f: &dyn Fn(&ArrayData) -> bool) -> bool {
        f(d) || d.child_data().iter().any(|c| any(c, f))
    }
    if !any(&data, &misaligned) {
        return Some(data);
    }
    let buffers = if misaligned(&data) {
        data.buffers()
            .iter()
            .map(|b| Buffer::from_slice_ref(b.as_slice()))
            .collect()
    } else {
        data.buffers().to_vec()
    };
    let children = data
        .child_data()
        .iter()
        .cloned()
        .map(day_times_aligned)
        .collect::<Option<Vec<_>>>()?;
    data.into_builder()
        .buffers(buffers)
        .child_data(children)
        .build()
        .ok()
}

/// `data` with every binary or utf8 view array in it holding only the
/// variadic buffers its views point into: the copy above keeps them all,
/// and arrow-ipc 60.1.0 counts them in `variadicBufferCounts` but leaves
/// out those of an empty array.
fn gc_views(data: ArrayData) -> Option<ArrayData> {
    match data.data_type() {
        DataType::Utf8View if data.buffers().len() > 1 => {
            Some(make_array(data).as_string_view().gc().to_data())
        }
        DataType::BinaryView if data.buffers().len() > 1 => {
            Some(make_array(data).as_binary_view().gc().to_data())
        }
        _ if data.child_data().is_empty() => Some(data),
        _ => {
            let children = data
                .child_data()
                .iter()
                .cloned()
                .map(gc_views)
                .collect::<Option<Vec<_>>>()?;
            data.into_builder().child_data(children).build().ok()
        }
    }
}

/// Rows `slice_offset..slice_offset + slice_length` of the table these
/// batches make (`slice_length == -1`: to its end), counted across batch
/// boundaries, as pyarrow's `Table.slice`, polars' `DataFrame.slice` and
/// SQL's `LIMIT length OFFSET offset` count them: each batch keeps the part
/// of it that lies in the range (`RecordBatch::slice`, no copy); batches
/// wholly outside the range are left out. A range past the end is refused
/// (EINVAL).
pub fn slice_table(
    batches: &[RecordBatch],
    slice_offset: i64,
    slice_length: i64,
) -> PluginResult<Vec<RecordBatch>> {
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    let range = usize::try_from(slice_offset).ok().and_then(|o| {
        let l = match slice_length {
            -1 => rows.checked_sub(o)?,
            l => usize::try_from(l).ok()?,
        };
        (o.checked_add(l)? <= rows).then_some((o, l))
    });
    let Some((offset, length)) = range else {
        return Err(PluginError::invalid(format!(
            "slice {slice_offset}+{slice_length} out of range for a table of {rows} rows"
        )));
    };
    let (start, end) = (offset, offset + length);
    let mut out = Vec::new();
    let mut at = 0;
    for b in batches {
        let (from, to) = (at.max(start), (at + b.num_rows()).min(end));
        if from < to {
            out.push(b.slice(from - at, to - from));
        }
        at += b.num_rows();
    }
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
        // A body cut short is refused from its declared length, before
        // arrow-ipc allocates it.
        let cut = &good[..good.len() - 16];
        let e = super::decode(cut).unwrap_err();
        assert!(e.message.contains("runs past the end"), "{e:?}");
    }

    /// arrow-ipc 60.1.0 alone writes these slices as streams its reader
    /// refuses; `encode` must write them readably with the same values
    /// (regression: reference -> reference roundtrips of generated
    /// scenarios failed on them).
    #[test]
    fn slices_arrow_ipc_mishandles_encode_readably() {
        use arrow_array::builder::UnionBuilder;
        use arrow_array::types::Int32Type;
        use arrow_array::{Array, Int64Array, RunArray, StringViewArray};

        let views = StringViewArray::from(vec![Some("a value longer than twelve bytes"), None]);
        let ree = RunArray::try_new(&Int64Array::from(vec![1i64, 2]), &views).unwrap();
        let mut union = UnionBuilder::new_dense();
        union.append::<Int32Type>("a", 7).unwrap();
        let union = union.build().unwrap();
        let lists = arrow_array::LargeListArray::new(
            Arc::new(arrow_schema::Field::new_list_field(
                union.data_type().clone(),
                true,
            )),
            arrow_buffer::OffsetBuffer::new(vec![0i64, 1, 1].into()),
            Arc::new(union),
            None,
        );
        let batch = RecordBatch::try_from_iter([
            ("ree", Arc::new(ree) as ArrayRef),
            ("lists", Arc::new(lists) as ArrayRef),
        ])
        .unwrap();
        for (offset, len) in [(1, 0), (1, 1), (2, 0), (0, 0)] {
            let sliced = batch.slice(offset, len);
            let bytes = super::encode(&batch.schema(), std::slice::from_ref(&sliced)).unwrap();
            let back = super::decode(&bytes).unwrap_or_else(|e| panic!("{offset}+{len}: {e:?}"));
            assert_eq!(back.batches, vec![sliced], "{offset}+{len}");
        }
    }

    /// A day-time interval buffer that is 4-aligned but not 8-aligned is
    /// valid input: the copy still happens, and the stream reads back the
    /// same values (regression for `day_times_aligned`).
    #[test]
    fn day_time_values_at_four_mod_eight_are_copied() {
        use arrow_array::{Array, IntervalDayTimeArray, LargeListArray, StructArray};
        use arrow_buffer::{Buffer, IntervalDayTime, OffsetBuffer};
        use arrow_data::ArrayData;
        use arrow_schema::{DataType, Field, IntervalUnit};

        let values: Vec<IntervalDayTime> = (0..3).map(|i| IntervalDayTime::new(i, -i)).collect();
        let mut bytes = vec![0u8; 4];
        for v in &values {
            bytes.extend_from_slice(&v.days.to_le_bytes());
            bytes.extend_from_slice(&v.milliseconds.to_le_bytes());
        }
        // An aligned allocation, sliced 4 bytes in: 4 mod 8.
        let buffer = Buffer::from_slice_ref(&bytes).slice(4);
        assert_eq!(buffer.as_ptr().align_offset(8), 4);
        let data = ArrayData::builder(DataType::Interval(IntervalUnit::DayTime))
            .len(3)
            .add_buffer(buffer)
            .build()
            .unwrap();
        let day_times = IntervalDayTimeArray::from(data);
        assert_eq!(day_times.values().as_ref(), values.as_slice());
        let item = Arc::new(Field::new_list_field(day_times.data_type().clone(), true));
        let lists = LargeListArray::new(
            item,
            OffsetBuffer::new(vec![0i64, 2, 3].into()),
            Arc::new(day_times),
            None,
        );
        let column = StructArray::from(vec![(
            Arc::new(Field::new("l", lists.data_type().clone(), true)),
            Arc::new(lists) as ArrayRef,
        )]);
        let batch = RecordBatch::try_from_iter([("s", Arc::new(column) as ArrayRef)]).unwrap();
        let bytes = super::encode(&batch.schema(), std::slice::from_ref(&batch)).unwrap();
        let back = super::decode(&bytes).unwrap();
        assert_eq!(back.batches, vec![batch.clone()]);
        // The copy itself did not fall back to the batch as it was: its
        // day-time values now sit at an 8-aligned address.
        let copied = super::compacted(&batch);
        assert_eq!(copied, batch);
        let values =
            copied.column(0).to_data().child_data()[0].child_data()[0].buffers()[0].clone();
        assert_eq!(values.as_ptr().align_offset(8), 0);
    }

    #[test]
    fn a_table_slice_spans_batches() {
        use super::slice_table;
        use arrow_array::cast::AsArray;
        use arrow_schema::DataType;
        let schema =
            std::sync::Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
                "a",
                DataType::Int32,
                false,
            )]));
        let batch = |v: Vec<i32>| {
            RecordBatch::try_new(
                schema.clone(),
                vec![std::sync::Arc::new(Int32Array::from(v))],
            )
            .unwrap()
        };
        let batches = vec![batch(vec![0, 1, 2]), batch(vec![]), batch(vec![3, 4, 5, 6])];
        let values = |b: &[RecordBatch]| -> Vec<i32> {
            b.iter()
                .flat_map(|b| {
                    b.column(0)
                        .as_primitive::<arrow_array::types::Int32Type>()
                        .values()
                        .to_vec()
                })
                .collect()
        };
        let s = slice_table(&batches, 2, 3).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(values(&s), vec![2, 3, 4]);
        assert_eq!(values(&slice_table(&batches, 5, -1).unwrap()), vec![5, 6]);
        assert!(slice_table(&batches, 4, 0).unwrap().is_empty());
        assert!(slice_table(&batches, 7, 0).unwrap().is_empty());
        assert!(slice_table(&batches, 6, 2).is_err());
        assert!(slice_table(&batches, -1, 2).is_err());
        assert!(slice_table(&batches, 8, -1).is_err());
    }
}
