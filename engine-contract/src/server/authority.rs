//! [`AuthorityRepair`]: lets a Unix socket engine serve clients whose `:authority` is not a valid
//! URI authority.
//!
//! A stock gRPC client (grpc-core: Python grpcio, C++, Ruby, ...) dialing `unix:/run/engine.sock`
//! sends `:authority: run%2Fengine.sock`, the percent-encoded path. The HTTP/2 layer (h2) refuses a
//! percent sign in a host and resets the stream with PROTOCOL_ERROR before the request reaches any
//! code of ours, so the client sees a reset and the engine logs nothing. On a Unix socket the
//! authority means nothing, so the server accepts any: this sans-IO core sits on the bytes the
//! client sends, decodes each header block (HPACK), replaces an `:authority` that is not a valid
//! authority with `localhost`, and re-encodes the block as literals (so the server's decoder keeps
//! an empty dynamic table and stays in step whatever was rewritten). Every other frame passes
//! through unchanged.

use super::hpack::{self, DEFAULT_TABLE_SIZE, Decoder, HeaderField, HpackError};

/// The client connection preface (RFC 9113, 3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_HEADER: usize = 9;
/// Every HTTP/2 peer accepts frames of this size (the SETTINGS_MAX_FRAME_SIZE floor).
const MAX_OUTPUT_FRAME: usize = 16_384;
/// Largest header block collected across CONTINUATION frames.
const MAX_HEADER_BLOCK: usize = 1 << 20;

const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// What replaces an invalid `:authority`.
pub(crate) const REPLACEMENT_AUTHORITY: &str = "localhost";

/// Why the client's bytes cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RepairError {
    #[error("stream {stream}: undecodable header block: {source}")]
    HeaderBlock { stream: u32, source: HpackError },
    #[error("stream {stream}: malformed HEADERS frame (padding longer than the frame)")]
    BadPadding { stream: u32 },
    #[error(
        "expected a CONTINUATION frame of stream {expected}, got frame type {found} of stream {stream}"
    )]
    MissingContinuation {
        expected: u32,
        found: u8,
        stream: u32,
    },
    #[error("stream {stream}: header block larger than {MAX_HEADER_BLOCK} bytes")]
    HeaderBlockTooLarge { stream: u32 },
}

#[derive(Debug)]
enum State {
    /// Checking the connection preface; bytes of it seen so far.
    Preface(usize),
    /// Reading frames.
    Frames,
    /// Not HTTP/2 with prior knowledge: pass everything through for the server to refuse.
    PassThrough,
}

#[derive(Debug)]
struct PendingBlock {
    stream: u32,
    end_stream: bool,
    fragment: Vec<u8>,
}

/// The client-to-server direction of one connection.
#[derive(Debug)]
pub(crate) struct AuthorityRepair {
    state: State,
    buffer: Vec<u8>,
    decoder: Decoder,
    pending: Option<PendingBlock>,
}

impl Default for AuthorityRepair {
    fn default() -> Self {
        Self {
            state: State::Preface(0),
            buffer: Vec::new(),
            decoder: Decoder::new(DEFAULT_TABLE_SIZE),
            pending: None,
        }
    }
}

/// An `:authority` replaced by [`REPLACEMENT_AUTHORITY`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Repaired {
    pub(crate) stream: u32,
    pub(crate) authority: String,
}

impl AuthorityRepair {
    /// Takes bytes from the client, appends what the server should read to `out`, and returns
    /// the authorities replaced. Incomplete frames wait for more bytes.
    pub(crate) fn feed(
        &mut self,
        bytes: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Vec<Repaired>, RepairError> {
        let mut repaired = Vec::new();
        let mut bytes = bytes;
        if let State::Preface(seen) = self.state {
            let wanted = PREFACE.len() - seen;
            let take = wanted.min(bytes.len());
            if bytes[..take] != PREFACE[seen..seen + take] {
                self.state = State::PassThrough;
            } else {
                out.extend_from_slice(&bytes[..take]);
                bytes = &bytes[take..];
                self.state = if take == wanted {
                    State::Frames
                } else {
                    State::Preface(seen + take)
                };
            }
        }
        match self.state {
            State::PassThrough => {
                out.extend_from_slice(bytes);
                return Ok(repaired);
            }
            State::Preface(_) => return Ok(repaired),
            State::Frames => {}
        }
        self.buffer.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(header) = self.buffer.get(start..start + FRAME_HEADER) {
            let length =
                usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
            let (kind, flags) = (header[3], header[4]);
            let stream =
                u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & 0x7fff_ffff;
            let end = start + FRAME_HEADER + length;
            let Some(payload) = self.buffer.get(start + FRAME_HEADER..end) else {
                break;
            };
            let payload = payload.to_vec();
            let frame = &self.buffer[start..end];
            if let Some(pending) = &mut self.pending {
                if kind != CONTINUATION || stream != pending.stream {
                    return Err(RepairError::MissingContinuation {
                        expected: pending.stream,
                        found: kind,
                        stream,
                    });
                }
                pending.fragment.extend_from_slice(&payload);
                if pending.fragment.len() > MAX_HEADER_BLOCK {
                    return Err(RepairError::HeaderBlockTooLarge { stream });
                }
                if flags & END_HEADERS != 0
                    && let Some(block) = self.pending.take()
                {
                    repaired.extend(self.rewrite(block, out)?);
                }
            } else if kind == HEADERS {
                let fragment = headers_fragment(&payload, flags, stream)?.to_vec();
                let block = PendingBlock {
                    stream,
                    end_stream: flags & END_STREAM != 0,
                    fragment,
                };
                if flags & END_HEADERS != 0 {
                    repaired.extend(self.rewrite(block, out)?);
                } else {
                    self.pending = Some(block);
                }
            } else {
                out.extend_from_slice(frame);
            }
            start = end;
        }
        self.buffer.drain(..start);
        Ok(repaired)
    }

    /// Decodes a complete header block, repairs `:authority`, and writes it out as HEADERS (and
    /// CONTINUATION) frames.
    fn rewrite(
        &mut self,
        block: PendingBlock,
        out: &mut Vec<u8>,
    ) -> Result<Vec<Repaired>, RepairError> {
        let stream = block.stream;
        let mut fields = self
            .decoder
            .decode(&block.fragment)
            .map_err(|source| RepairError::HeaderBlock { stream, source })?;
        let mut repaired = Vec::new();
        for field in &mut fields {
            if is_invalid_authority(field) {
                repaired.push(Repaired {
                    stream,
                    authority: String::from_utf8_lossy(&field.value).into_owned(),
                });
                field.value = REPLACEMENT_AUTHORITY.as_bytes().to_vec();
            }
        }
        let encoded = hpack::encode(&fields);
        let mut chunks = encoded.chunks(MAX_OUTPUT_FRAME).peekable();
        let mut first = true;
        if chunks.peek().is_none() {
            // An empty block is still one HEADERS frame.
            write_frame(out, HEADERS, end_flags(block.end_stream, true), stream, &[]);
        }
        while let Some(chunk) = chunks.next() {
            let last = chunks.peek().is_none();
            if first {
                write_frame(
                    out,
                    HEADERS,
                    end_flags(block.end_stream, last),
                    stream,
                    chunk,
                );
                first = false;
            } else {
                let flags = if last { END_HEADERS } else { 0 };
                write_frame(out, CONTINUATION, flags, stream, chunk);
            }
        }
        Ok(repaired)
    }
}

fn end_flags(end_stream: bool, end_headers: bool) -> u8 {
    (if end_stream { END_STREAM } else { 0 }) | (if end_headers { END_HEADERS } else { 0 })
}

fn is_invalid_authority(field: &HeaderField) -> bool {
    field.name == b":authority" && http::uri::Authority::try_from(field.value.as_slice()).is_err()
}

/// The header block fragment of a HEADERS frame, without padding and priority fields.
fn headers_fragment(payload: &[u8], flags: u8, stream: u32) -> Result<&[u8], RepairError> {
    let mut fragment = payload;
    let mut padding = 0;
    if flags & PADDED != 0 {
        let (&length, rest) = fragment
            .split_first()
            .ok_or(RepairError::BadPadding { stream })?;
        padding = usize::from(length);
        fragment = rest;
    }
    if flags & PRIORITY != 0 {
        fragment = fragment
            .get(5..)
            .ok_or(RepairError::BadPadding { stream })?;
    }
    let keep = fragment
        .len()
        .checked_sub(padding)
        .ok_or(RepairError::BadPadding { stream })?;
    Ok(&fragment[..keep])
}

fn write_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let length = payload.len();
    out.extend_from_slice(&[
        (length >> 16) as u8,
        (length >> 8) as u8,
        length as u8,
        kind,
        flags,
    ]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
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

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        write_frame(&mut out, kind, flags, stream, payload);
        out
    }

    /// What grpc-core sends for `unix:/tmp/sniff.sock` (literal with incremental indexing, new
    /// names, plain strings).
    fn grpcio_block() -> Vec<u8> {
        let mut block = b"\x40\x05:path\x1e/engine.Engine/ExecuteRawQuery".to_vec();
        block.extend_from_slice(b"\x40\x0a:authority\x10tmp%2Fsniff.sock\x83\x86");
        block
    }

    /// Frames out of `bytes` (after the preface): (type, flags, stream, payload).
    fn frames(mut bytes: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
        let mut frames = Vec::new();
        while bytes.len() >= FRAME_HEADER {
            let length =
                usize::from(bytes[0]) << 16 | usize::from(bytes[1]) << 8 | usize::from(bytes[2]);
            let stream = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]);
            frames.push((bytes[3], bytes[4], stream, bytes[9..9 + length].to_vec()));
            bytes = &bytes[9 + length..];
        }
        frames
    }

    fn connection(parts: &[&[u8]]) -> Vec<u8> {
        let mut bytes = PREFACE.to_vec();
        for part in parts {
            bytes.extend_from_slice(part);
        }
        bytes
    }

    #[test]
    fn a_percent_encoded_authority_becomes_localhost_and_other_frames_pass() {
        let settings = frame(0x4, 0, 0, &[]);
        let headers = frame(HEADERS, END_HEADERS, 1, &grpcio_block());
        let data = frame(0x0, END_STREAM, 1, b"\x00\x00\x00\x00\x02\x0a\x00");
        let input = connection(&[&settings, &headers, &data]);
        let mut repair = AuthorityRepair::default();
        let mut out = Vec::new();
        let repaired = repair.feed(&input, &mut out).unwrap();
        assert_eq!(
            repaired,
            [Repaired {
                stream: 1,
                authority: "tmp%2Fsniff.sock".into()
            }]
        );
        assert_eq!(&out[..PREFACE.len()], PREFACE);
        let frames = frames(&out[PREFACE.len()..]);
        assert_eq!(frames.len(), 3);
        assert_eq!(frames[0], (0x4, 0, 0, Vec::new()));
        assert_eq!(
            frames[2],
            (0x0, END_STREAM, 1, b"\x00\x00\x00\x00\x02\x0a\x00".to_vec())
        );
        let (kind, flags, stream, block) = &frames[1];
        assert_eq!((*kind, *flags, *stream), (HEADERS, END_HEADERS, 1));
        let decoded = Decoder::new(0).decode(block).unwrap();
        assert_eq!(
            decoded,
            [
                field(":path", "/engine.Engine/ExecuteRawQuery"),
                field(":authority", "localhost"),
                field(":method", "POST"),
                field(":scheme", "http"),
            ]
        );
    }

    #[test]
    fn a_second_request_indexing_the_bad_authority_is_repaired_too() {
        let first = frame(HEADERS, END_HEADERS, 1, &grpcio_block());
        // 0xbe: dynamic index 62, the latest entry (:authority); 0xbf: :path.
        let second = frame(
            HEADERS,
            END_HEADERS | END_STREAM,
            3,
            &[0xbf, 0xbe, 0x83, 0x86],
        );
        let mut repair = AuthorityRepair::default();
        let mut out = Vec::new();
        let repaired = repair
            .feed(&connection(&[&first, &second]), &mut out)
            .unwrap();
        assert_eq!(repaired.len(), 2);
        let frames = frames(&out[PREFACE.len()..]);
        assert_eq!(frames[1].1, END_HEADERS | END_STREAM);
        let mut decoder = Decoder::new(0);
        decoder.decode(&frames[0].3).unwrap();
        let decoded = decoder.decode(&frames[1].3).unwrap();
        assert_eq!(decoded[0], field(":path", "/engine.Engine/ExecuteRawQuery"));
        assert_eq!(decoded[1], field(":authority", "localhost"));
    }

    #[test]
    fn a_valid_authority_is_kept_and_bytes_may_arrive_one_at_a_time() {
        let mut block = b"\x41\x0e127.0.0.1:5544".to_vec();
        block.extend_from_slice(b"\x83\x86\x84");
        let headers = frame(HEADERS, 0, 1, &block[..4]);
        let continuation = frame(CONTINUATION, END_HEADERS, 1, &block[4..]);
        let input = connection(&[&headers, &continuation]);
        let mut repair = AuthorityRepair::default();
        let mut out = Vec::new();
        for byte in &input {
            assert!(
                repair
                    .feed(std::slice::from_ref(byte), &mut out)
                    .unwrap()
                    .is_empty()
            );
        }
        let frames = frames(&out[PREFACE.len()..]);
        assert_eq!(frames.len(), 1, "the block is re-sent as one HEADERS frame");
        let decoded = Decoder::new(0).decode(&frames[0].3).unwrap();
        assert_eq!(decoded[0], field(":authority", "127.0.0.1:5544"));
    }

    #[test]
    fn padding_and_priority_are_dropped_and_large_blocks_are_split() {
        let big = "v".repeat(40_000);
        let mut block = vec![0x00, 0x01, b'x'];
        block.push(0x7f);
        let mut length = Vec::new();
        // 7-bit prefix continuation of 40 000 - 127.
        let mut rest = big.len() - 127;
        while rest >= 0x80 {
            length.push((rest as u8 & 0x7f) | 0x80);
            rest >>= 7;
        }
        length.push(rest as u8);
        block.extend_from_slice(&length);
        block.extend_from_slice(big.as_bytes());
        let mut payload = vec![3u8];
        payload.extend_from_slice(&[0, 0, 0, 0, 16]);
        payload.extend_from_slice(&block);
        payload.extend_from_slice(&[0, 0, 0]);
        let headers = frame(HEADERS, END_HEADERS | PADDED | PRIORITY, 5, &payload);
        let mut repair = AuthorityRepair::default();
        let mut out = Vec::new();
        repair.feed(&connection(&[&headers]), &mut out).unwrap();
        let frames = frames(&out[PREFACE.len()..]);
        assert_eq!(frames.len(), 3);
        assert_eq!((frames[0].0, frames[0].1), (HEADERS, 0));
        assert_eq!((frames[1].0, frames[1].1), (CONTINUATION, 0));
        assert_eq!((frames[2].0, frames[2].1), (CONTINUATION, END_HEADERS));
        let joined: Vec<u8> = frames.iter().flat_map(|f| f.3.clone()).collect();
        assert_eq!(Decoder::new(0).decode(&joined).unwrap(), [field("x", &big)]);
    }

    #[test]
    fn a_client_that_is_not_http2_passes_through_untouched() {
        let mut repair = AuthorityRepair::default();
        let mut out = Vec::new();
        repair.feed(b"GET / HTTP/1.1\r\n\r\n", &mut out).unwrap();
        assert_eq!(out, b"GET / HTTP/1.1\r\n\r\n");
    }

    #[test]
    fn broken_header_blocks_are_errors() {
        let headers = frame(HEADERS, END_HEADERS, 1, &[0x80]);
        let mut out = Vec::new();
        let error = AuthorityRepair::default()
            .feed(&connection(&[&headers]), &mut out)
            .unwrap_err();
        assert!(
            matches!(error, RepairError::HeaderBlock { stream: 1, .. }),
            "{error}"
        );

        let headers = frame(HEADERS, 0, 1, &[0x82]);
        let data = frame(0x0, 0, 1, &[]);
        let error = AuthorityRepair::default()
            .feed(&connection(&[&headers, &data]), &mut out)
            .unwrap_err();
        assert!(
            matches!(error, RepairError::MissingContinuation { .. }),
            "{error}"
        );
    }
}
