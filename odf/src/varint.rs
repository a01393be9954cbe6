//! Unsigned varints as multiformats writes them (LEB128, at most 9 bytes, minimal encoding only).

/// The longest varint multiformats allows (63 bits of payload).
const MAX_LEN: usize = 9;

/// Appends the varint of `value` to `out`.
pub(crate) fn write(mut value: u64, out: &mut Vec<u8>) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Why bytes do not start with a varint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VarintError {
    /// The bytes end inside the varint.
    Truncated,
    /// Longer than 9 bytes, or not the shortest encoding of its value.
    Invalid,
}

/// Reads a varint from the front of `bytes`: the value and the bytes after it.
pub(crate) fn read(bytes: &[u8]) -> Result<(u64, &[u8]), VarintError> {
    let mut value = 0u64;
    for (i, &byte) in bytes.iter().enumerate() {
        if i == MAX_LEN {
            return Err(VarintError::Invalid);
        }
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            // A last byte of zero after the first means a longer encoding than needed.
            if byte == 0 && i > 0 {
                return Err(VarintError::Invalid);
            }
            return Ok((value, &bytes[i + 1..]));
        }
    }
    Err(VarintError::Truncated)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multicodec_codes_round_trip_in_their_multiformats_bytes() {
        for (code, bytes) in [
            (0x16u64, &[0x16u8][..]),
            (0xed, &[0xed, 0x01]),
            (0x30_0016, &[0x96, 0x80, 0xc0, 0x01]),
            (0x40_0000, &[0x80, 0x80, 0x80, 0x02]),
        ] {
            let mut out = Vec::new();
            write(code, &mut out);
            assert_eq!(out, bytes);
            assert_eq!(read(bytes), Ok((code, &[][..])));
        }
    }

    #[test]
    fn overlong_and_truncated_varints_are_rejected() {
        assert_eq!(read(&[0x96, 0x00]), Err(VarintError::Invalid));
        assert_eq!(read(&[0x80; 10]), Err(VarintError::Invalid));
        assert_eq!(read(&[0x96]), Err(VarintError::Truncated));
        assert_eq!(read(&[]), Err(VarintError::Truncated));
    }
}
