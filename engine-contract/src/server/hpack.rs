//! HPACK (RFC 7541) as far as the server needs it to read a client's header blocks: a decoder with
//! the static and dynamic tables and Huffman-coded strings, and an encoder that writes every field
//! as a literal without indexing (so the peer's dynamic table stays empty).
//!
//! Sans-IO: bytes in, header fields out. Used by [`super::authority`] to repair `:authority`
//! values that the HTTP/2 layer would reset a stream for.

use std::collections::VecDeque;

/// One header field as decoded, with whether it was marked never-indexed (sensitive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeaderField {
    pub(crate) name: Vec<u8>,
    pub(crate) value: Vec<u8>,
    pub(crate) never_indexed: bool,
}

/// Why a header block could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HpackError {
    #[error("header block ends inside a field")]
    Truncated,
    #[error("integer too large in header block")]
    IntegerOverflow,
    #[error("header table index {index} is out of range")]
    BadIndex { index: usize },
    #[error("invalid Huffman code in header block")]
    BadHuffman,
    #[error("dynamic table size update to {size} bytes exceeds the limit of {limit}")]
    TableSizeTooLarge { size: usize, limit: usize },
}

/// The HPACK static table (RFC 7541, Appendix A); index 1 is the first entry.
const STATIC_TABLE: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// Per-entry overhead of the dynamic table (RFC 7541, 4.1).
const ENTRY_OVERHEAD: usize = 32;

/// Largest dynamic table a client may ask for: the HTTP/2 default. The server never advertises
/// more (`SETTINGS_HEADER_TABLE_SIZE` is left at its default).
pub(crate) const DEFAULT_TABLE_SIZE: usize = 4096;

/// Decodes the header blocks of one connection, in order (the dynamic table spans blocks).
#[derive(Debug)]
pub(crate) struct Decoder {
    dynamic: VecDeque<(Vec<u8>, Vec<u8>)>,
    size: usize,
    max_size: usize,
    limit: usize,
}

impl Decoder {
    /// A decoder whose peer may use a dynamic table of up to `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            dynamic: VecDeque::new(),
            size: 0,
            max_size: limit,
            limit,
        }
    }

    /// Decodes one complete header block.
    pub(crate) fn decode(&mut self, block: &[u8]) -> Result<Vec<HeaderField>, HpackError> {
        let mut input = block;
        let mut fields = Vec::new();
        while let Some(&first) = input.first() {
            if first & 0x80 != 0 {
                let index = integer(&mut input, 7)?;
                let (name, value) = self.entry(index)?;
                fields.push(HeaderField {
                    name,
                    value,
                    never_indexed: false,
                });
            } else if first & 0x40 != 0 {
                let field = self.literal(&mut input, 6, false)?;
                self.insert(field.name.clone(), field.value.clone());
                fields.push(field);
            } else if first & 0x20 != 0 {
                let size = integer(&mut input, 5)?;
                if size > self.limit {
                    return Err(HpackError::TableSizeTooLarge {
                        size,
                        limit: self.limit,
                    });
                }
                self.max_size = size;
                self.evict();
            } else {
                let never_indexed = first & 0x10 != 0;
                fields.push(self.literal(&mut input, 4, never_indexed)?);
            }
        }
        Ok(fields)
    }

    fn literal(
        &self,
        input: &mut &[u8],
        prefix: u8,
        never_indexed: bool,
    ) -> Result<HeaderField, HpackError> {
        let index = integer(input, prefix)?;
        let name = if index == 0 {
            string(input)?
        } else {
            self.entry(index)?.0
        };
        let value = string(input)?;
        Ok(HeaderField {
            name,
            value,
            never_indexed,
        })
    }

    fn entry(&self, index: usize) -> Result<(Vec<u8>, Vec<u8>), HpackError> {
        if index == 0 {
            return Err(HpackError::BadIndex { index });
        }
        if let Some((name, value)) = STATIC_TABLE.get(index - 1) {
            return Ok((name.as_bytes().to_vec(), value.as_bytes().to_vec()));
        }
        self.dynamic
            .get(index - 1 - STATIC_TABLE.len())
            .cloned()
            .ok_or(HpackError::BadIndex { index })
    }

    fn insert(&mut self, name: Vec<u8>, value: Vec<u8>) {
        let size = name.len() + value.len() + ENTRY_OVERHEAD;
        if size > self.max_size {
            // An entry larger than the table empties it (RFC 7541, 4.4).
            self.dynamic.clear();
            self.size = 0;
            return;
        }
        self.size += size;
        self.dynamic.push_front((name, value));
        self.evict();
    }

    fn evict(&mut self) {
        while self.size > self.max_size {
            match self.dynamic.pop_back() {
                Some((name, value)) => self.size -= name.len() + value.len() + ENTRY_OVERHEAD,
                None => self.size = 0,
            }
        }
    }
}

/// Encodes `fields` as literals without indexing (never-indexed ones stay never-indexed), names
/// and values as plain strings.
pub(crate) fn encode(fields: &[HeaderField]) -> Vec<u8> {
    let mut out = Vec::new();
    for field in fields {
        out.push(if field.never_indexed { 0x10 } else { 0x00 });
        encode_string(&mut out, &field.name);
        encode_string(&mut out, &field.value);
    }
    out
}

fn encode_string(out: &mut Vec<u8>, bytes: &[u8]) {
    encode_integer(out, 0x00, 7, bytes.len());
    out.extend_from_slice(bytes);
}

fn encode_integer(out: &mut Vec<u8>, flags: u8, prefix: u8, value: usize) {
    let max = (1usize << prefix) - 1;
    if value < max {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | max as u8);
    let mut rest = value - max;
    while rest >= 0x80 {
        out.push((rest as u8 & 0x7f) | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Reads an integer with an `prefix`-bit prefix (RFC 7541, 5.1).
fn integer(input: &mut &[u8], prefix: u8) -> Result<usize, HpackError> {
    let (&first, rest) = input.split_first().ok_or(HpackError::Truncated)?;
    *input = rest;
    let max = (1usize << prefix) - 1;
    let mut value = usize::from(first) & max;
    if value < max {
        return Ok(value);
    }
    let mut shift = 0u32;
    loop {
        let (&byte, rest) = input.split_first().ok_or(HpackError::Truncated)?;
        *input = rest;
        // Header fields here are at most a few MiB; 28 bits of continuation is plenty.
        if shift > 21 {
            return Err(HpackError::IntegerOverflow);
        }
        value += usize::from(byte & 0x7f) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
}

/// Reads a string literal, Huffman-decoding it when flagged (RFC 7541, 5.2).
fn string(input: &mut &[u8]) -> Result<Vec<u8>, HpackError> {
    let huffman = input.first().is_some_and(|b| b & 0x80 != 0);
    let length = integer(input, 7)?;
    if input.len() < length {
        return Err(HpackError::Truncated);
    }
    let (bytes, rest) = input.split_at(length);
    *input = rest;
    if huffman {
        huffman_decode(bytes)
    } else {
        Ok(bytes.to_vec())
    }
}

/// Code lengths of the HPACK Huffman code (RFC 7541, Appendix B) for bytes 0-255; EOS (256) has
/// 30 bits. The code is canonical: codes follow from the lengths, in (length, symbol) order.
const CODE_LENGTHS: [u8; 256] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
];

/// The longest code (EOS).
const MAX_CODE_LENGTH: usize = 30;
const EOS: u16 = 256;

/// A canonical Huffman decoding table: for each code length, the first code, how many symbols
/// have it and where they start in `symbols` (ordered by length, then value).
#[derive(Debug)]
struct Canonical {
    first_code: [u32; MAX_CODE_LENGTH + 1],
    count: [u32; MAX_CODE_LENGTH + 1],
    offset: [usize; MAX_CODE_LENGTH + 1],
    symbols: [u16; 257],
}

const fn code_length(symbol: usize) -> usize {
    if symbol == EOS as usize {
        MAX_CODE_LENGTH
    } else {
        CODE_LENGTHS[symbol] as usize
    }
}

const CANONICAL: Canonical = {
    let mut count = [0u32; MAX_CODE_LENGTH + 1];
    let mut symbol = 0;
    while symbol < 257 {
        count[code_length(symbol)] += 1;
        symbol += 1;
    }
    let mut first_code = [0u32; MAX_CODE_LENGTH + 1];
    let mut offset = [0usize; MAX_CODE_LENGTH + 1];
    let mut code = 0u32;
    let mut position = 0usize;
    let mut length = 1;
    while length <= MAX_CODE_LENGTH {
        code <<= 1;
        first_code[length] = code;
        offset[length] = position;
        code += count[length];
        position += count[length] as usize;
        length += 1;
    }
    let mut symbols = [0u16; 257];
    let mut next = offset;
    let mut symbol = 0;
    while symbol < 257 {
        let length = code_length(symbol);
        symbols[next[length]] = symbol as u16;
        next[length] += 1;
        symbol += 1;
    }
    Canonical {
        first_code,
        count,
        offset,
        symbols,
    }
};

fn huffman_decode(bytes: &[u8]) -> Result<Vec<u8>, HpackError> {
    let table = &CANONICAL;
    let mut out = Vec::with_capacity(bytes.len() * 8 / 5);
    let mut code = 0u32;
    let mut length = 0usize;
    // Whether every bit of the code in progress is 1 (a valid end-of-string padding).
    let mut all_ones = true;
    for byte in bytes {
        for shift in (0..8).rev() {
            let bit = u32::from((byte >> shift) & 1);
            code = (code << 1) | bit;
            length += 1;
            all_ones &= bit == 1;
            if length > MAX_CODE_LENGTH {
                return Err(HpackError::BadHuffman);
            }
            let index = code.wrapping_sub(table.first_code[length]);
            if code >= table.first_code[length] && index < table.count[length] {
                let symbol = table.symbols[table.offset[length] + index as usize];
                if symbol == EOS {
                    return Err(HpackError::BadHuffman);
                }
                out.push(symbol as u8);
                code = 0;
                length = 0;
                all_ones = true;
            }
        }
    }
    // Padding: fewer than 8 bits, all ones (a prefix of EOS).
    if length >= 8 || !all_ones {
        return Err(HpackError::BadHuffman);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(name: &str, value: &str) -> HeaderField {
        HeaderField {
            name: name.as_bytes().to_vec(),
            value: value.as_bytes().to_vec(),
            never_indexed: false,
        }
    }

    fn hex(text: &str) -> Vec<u8> {
        let text: String = text.split_whitespace().collect();
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn rfc_7541_c3_requests_without_huffman_share_the_dynamic_table() {
        let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
        let first = decoder
            .decode(&hex("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d"))
            .unwrap();
        assert_eq!(
            first,
            [
                field(":method", "GET"),
                field(":scheme", "http"),
                field(":path", "/"),
                field(":authority", "www.example.com"),
            ]
        );
        let second = decoder
            .decode(&hex("8286 84be 5808 6e6f 2d63 6163 6865"))
            .unwrap();
        assert_eq!(second[3], field(":authority", "www.example.com"));
        assert_eq!(second[4], field("cache-control", "no-cache"));
    }

    #[test]
    fn rfc_7541_c4_requests_with_huffman_decode() {
        let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
        let first = decoder
            .decode(&hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"))
            .unwrap();
        assert_eq!(first[3], field(":authority", "www.example.com"));
        let second = decoder
            .decode(&hex("8286 84be 5886 a8eb 1064 9cbf"))
            .unwrap();
        assert_eq!(second[4], field("cache-control", "no-cache"));
        let third = decoder
            .decode(&hex(
                "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
            ))
            .unwrap();
        assert_eq!(third[1], field(":scheme", "https"));
        assert_eq!(third[2], field(":path", "/index.html"));
        assert_eq!(third[3], field(":authority", "www.example.com"));
        assert_eq!(third[4], field("custom-key", "custom-value"));
    }

    #[test]
    fn encoded_fields_decode_to_the_same_fields() {
        let mut sensitive = field("authorization", "secret");
        sensitive.never_indexed = true;
        let long_value = "x".repeat(300);
        let fields = vec![
            field(":authority", "localhost"),
            sensitive,
            field("grpc-timeout", &long_value),
        ];
        let block = encode(&fields);
        assert_eq!(Decoder::new(0).decode(&block).unwrap(), fields);
    }

    #[test]
    fn malformed_blocks_are_errors_not_panics() {
        let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
        assert_eq!(
            decoder.decode(&[0x80]),
            Err(HpackError::BadIndex { index: 0 })
        );
        assert_eq!(
            decoder.decode(&[0xff, 0x00]),
            Err(HpackError::BadIndex { index: 127 })
        );
        assert_eq!(
            decoder.decode(&[0x40, 0x05, b'a']),
            Err(HpackError::Truncated)
        );
        assert_eq!(
            decoder.decode(&[0x3f, 0xff, 0xff, 0xff, 0xff, 0x7f]),
            Err(HpackError::IntegerOverflow)
        );
        assert!(matches!(
            decoder.decode(&[0x3f, 0xe1, 0x7f]),
            Err(HpackError::TableSizeTooLarge { .. })
        ));
        // Huffman padding of zeros is invalid.
        assert_eq!(
            decoder.decode(&[0x00, 0x81, 0x00, 0x00]),
            Err(HpackError::BadHuffman)
        );
    }

    #[test]
    fn table_size_update_evicts_entries() {
        let mut decoder = Decoder::new(DEFAULT_TABLE_SIZE);
        decoder
            .decode(&hex("418c f1e3 c2e5 f23a 6ba0 ab90 f4ff"))
            .unwrap();
        assert!(decoder.decode(&[0xbe]).is_ok());
        decoder.decode(&[0x20]).unwrap();
        assert_eq!(
            decoder.decode(&[0xbe]),
            Err(HpackError::BadIndex { index: 62 })
        );
    }
}
