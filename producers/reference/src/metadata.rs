//! The key/value encoding of `ArrowSchema.metadata`, used for
//! `ArrowAsyncProducer.additional_metadata` ("This is encoded in the same
//! format as ArrowSchema.metadata", CDeviceDataInterface.rst).
//!
//! CDataInterface.rst: "int32: number of key/value pairs (noted N below);
//! then N times: int32: byte length of the following key (noted K below);
//! K bytes: the key name; int32: byte length of the following value (noted V
//! below); V bytes: the value". The integers are in native endianness.

/// Encodes `pairs`. Panics only if a key, value or the count exceeds
/// `i32::MAX`, which the callers (fixed short strings) never do.
pub fn encode(pairs: &[(&str, &str)]) -> Vec<u8> {
    fn len_i32(n: usize) -> [u8; 4] {
        i32::try_from(n)
            .expect("metadata item longer than i32::MAX")
            .to_ne_bytes()
    }
    let mut out = Vec::new();
    out.extend_from_slice(&len_i32(pairs.len()));
    for (key, value) in pairs {
        out.extend_from_slice(&len_i32(key.len()));
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(&len_i32(value.len()));
        out.extend_from_slice(value.as_bytes());
    }
    out
}

/// Decodes what [`encode`] wrote; `None` if the bytes are malformed.
pub fn decode(bytes: &[u8]) -> Option<Vec<(String, String)>> {
    fn take<'a>(bytes: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        if bytes.len() < n {
            return None;
        }
        let (head, tail) = bytes.split_at(n);
        *bytes = tail;
        Some(head)
    }
    fn int(bytes: &mut &[u8]) -> Option<usize> {
        let raw: [u8; 4] = take(bytes, 4)?.try_into().ok()?;
        usize::try_from(i32::from_ne_bytes(raw)).ok()
    }
    fn string(bytes: &mut &[u8]) -> Option<String> {
        let n = int(bytes)?;
        String::from_utf8(take(bytes, n)?.to_vec()).ok()
    }
    let mut rest = bytes;
    let n = int(&mut rest)?;
    let mut pairs = Vec::with_capacity(n.min(64));
    for _ in 0..n {
        let key = string(&mut rest)?;
        let value = string(&mut rest)?;
        pairs.push((key, value));
    }
    Some(pairs)
}

/// Length in bytes of an encoded metadata string that starts at `ptr`.
///
/// # Safety
/// `ptr` must point to a well-formed metadata encoding.
pub unsafe fn encoded_len(ptr: *const u8) -> usize {
    let read_int = |at: usize| -> usize {
        let mut raw = [0u8; 4];
        // SAFETY: the caller guarantees a well-formed encoding, so the four
        // bytes at `at` are inside it.
        unsafe { std::ptr::copy_nonoverlapping(ptr.add(at), raw.as_mut_ptr(), 4) };
        usize::try_from(i32::from_ne_bytes(raw)).unwrap_or(0)
    };
    let n = read_int(0);
    let mut at = 4;
    for _ in 0..(2 * n) {
        at += 4 + read_int(at);
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let pairs = [("arrowcert.batches", "3"), ("k", "")];
        let bytes = encode(&pairs);
        assert_eq!(
            decode(&bytes).unwrap(),
            vec![
                ("arrowcert.batches".to_string(), "3".to_string()),
                ("k".to_string(), String::new())
            ]
        );
        // SAFETY: `bytes` is a well-formed encoding.
        assert_eq!(unsafe { encoded_len(bytes.as_ptr()) }, bytes.len());
    }

    #[test]
    fn empty_and_malformed() {
        assert_eq!(decode(&encode(&[])).unwrap(), vec![]);
        assert_eq!(decode(&[1, 0]), None);
        assert_eq!(decode(&encode(&[("a", "b")])[..9]), None);
    }
}
