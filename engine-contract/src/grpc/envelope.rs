//! The protobuf envelope around every FlatBuffers message:
//! `message X { bytes flatbuffer = 1; }`.
//!
//! On the wire that is the tag byte `0x0A` (field 1, wire type 2), a varint
//! length and the FlatBuffers bytes. Encoding and decoding are done by hand
//! here, so no protobuf toolchain is involved.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Field 1, wire type 2 (length-delimited).
const FLATBUFFER_TAG: u8 = 0x0A;

/// Why a received frame is not a valid `bytes flatbuffer = 1` message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    /// A varint ran past the end of the frame or past 10 bytes.
    #[error("malformed protobuf varint at byte {position}")]
    MalformedVarint {
        /// Byte offset of the varint in the frame.
        position: usize,
    },
    /// A length-delimited or fixed-size field runs past the end of the frame.
    #[error("protobuf field {field} at byte {position} needs {needed} bytes, {available} left")]
    Truncated {
        /// Protobuf field number.
        field: u64,
        /// Byte offset of the field's value.
        position: usize,
        /// Bytes the field declares.
        needed: u64,
        /// Bytes left in the frame.
        available: usize,
    },
    /// Field 1 is present with a wire type other than length-delimited.
    #[error("protobuf field 1 has wire type {wire_type}, expected 2 (bytes)")]
    FlatbufferFieldWireType {
        /// The wire type found.
        wire_type: u8,
    },
    /// A wire type that protobuf 3 does not allow (groups or undefined).
    #[error("unsupported protobuf wire type {wire_type} for field {field}")]
    UnsupportedWireType {
        /// Protobuf field number.
        field: u64,
        /// The wire type found.
        wire_type: u8,
    },
    /// Field number 0 is reserved by protobuf.
    #[error("protobuf field number 0 at byte {position}")]
    FieldNumberZero {
        /// Byte offset of the key.
        position: usize,
    },
}

/// One gRPC message of the `engine.Engine` service: a protobuf
/// `bytes flatbuffer = 1` envelope.
///
/// An envelope built with [`Envelope::from_flatbuffer`] encodes canonically.
/// A received envelope keeps its raw frame bytes and is parsed on
/// [`Envelope::flatbuffer`], so a malformed frame surfaces as a specific
/// [`EnvelopeError`] to the caller instead of a transport failure.
/// [`Envelope::raw`] sends arbitrary bytes verbatim (for conformance tools
/// and tests that need a misbehaving peer).
///
/// ```
/// use weir_engine_contract::grpc::Envelope;
///
/// let envelope = Envelope::from_flatbuffer(&b"\x01\x02\x03"[..]);
/// assert_eq!(envelope.to_frame().as_ref(), b"\x0A\x03\x01\x02\x03");
/// let received = Envelope::raw(envelope.to_frame());
/// assert_eq!(received.flatbuffer().unwrap().as_ref(), b"\x01\x02\x03");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    repr: Repr,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Repr {
    /// FlatBuffers bytes, framed canonically when encoded.
    Flatbuffer(Bytes),
    /// A whole protobuf frame as received (or to be sent verbatim).
    Raw(Bytes),
}

impl Envelope {
    /// Wraps FlatBuffers bytes.
    pub fn from_flatbuffer(flatbuffer: impl Into<Bytes>) -> Self {
        Self {
            repr: Repr::Flatbuffer(flatbuffer.into()),
        }
    }

    /// A whole protobuf frame, sent verbatim and parsed lazily.
    pub fn raw(frame: impl Into<Bytes>) -> Self {
        Self {
            repr: Repr::Raw(frame.into()),
        }
    }

    /// The FlatBuffers bytes in field 1.
    ///
    /// Unknown fields are skipped; if field 1 occurs more than once the last
    /// occurrence wins; an absent field 1 is empty bytes (protobuf 3 rules).
    pub fn flatbuffer(&self) -> Result<Bytes, EnvelopeError> {
        match &self.repr {
            Repr::Flatbuffer(bytes) => Ok(bytes.clone()),
            Repr::Raw(frame) => parse_frame(frame),
        }
    }

    /// The protobuf frame bytes as they go on the wire.
    pub fn to_frame(&self) -> Bytes {
        match &self.repr {
            Repr::Raw(frame) => frame.clone(),
            Repr::Flatbuffer(bytes) => {
                let mut out = BytesMut::with_capacity(self.encoded_len());
                write_envelope(bytes, &mut out);
                out.freeze()
            }
        }
    }

    /// Length of [`Envelope::to_frame`] without building it.
    pub fn encoded_len(&self) -> usize {
        match &self.repr {
            Repr::Raw(frame) => frame.len(),
            Repr::Flatbuffer(bytes) if bytes.is_empty() => 0,
            Repr::Flatbuffer(bytes) => 1 + varint_len(bytes.len() as u64) + bytes.len(),
        }
    }

    /// Writes the frame into `out`.
    pub(crate) fn write_to(&self, out: &mut impl BufMut) {
        match &self.repr {
            Repr::Raw(frame) => out.put_slice(frame),
            Repr::Flatbuffer(bytes) => write_envelope(bytes, out),
        }
    }
}

/// Protobuf 3 omits a field that holds its default (empty bytes).
fn write_envelope(flatbuffer: &[u8], out: &mut impl BufMut) {
    if flatbuffer.is_empty() {
        return;
    }
    out.put_u8(FLATBUFFER_TAG);
    write_varint(flatbuffer.len() as u64, out);
    out.put_slice(flatbuffer);
}

fn write_varint(mut value: u64, out: &mut impl BufMut) {
    while value >= 0x80 {
        out.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

fn varint_len(value: u64) -> usize {
    let bits = 64 - value.max(1).leading_zeros() as usize;
    bits.div_ceil(7)
}

fn read_varint(frame: &[u8], position: &mut usize) -> Result<u64, EnvelopeError> {
    let start = *position;
    let mut value: u64 = 0;
    for shift in 0..10 {
        let Some(&byte) = frame.get(*position) else {
            return Err(EnvelopeError::MalformedVarint { position: start });
        };
        *position += 1;
        // The tenth byte may only contribute the top bit of a u64.
        if shift == 9 && byte > 1 {
            return Err(EnvelopeError::MalformedVarint { position: start });
        }
        value |= u64::from(byte & 0x7F) << (7 * shift);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(EnvelopeError::MalformedVarint { position: start })
}

fn parse_frame(frame: &Bytes) -> Result<Bytes, EnvelopeError> {
    let mut position = 0usize;
    let mut flatbuffer = Bytes::new();
    while position < frame.len() {
        let key_position = position;
        let key = read_varint(frame, &mut position)?;
        let field = key >> 3;
        let wire_type = (key & 0x7) as u8;
        if field == 0 {
            return Err(EnvelopeError::FieldNumberZero {
                position: key_position,
            });
        }
        let skip = match wire_type {
            0 => {
                read_varint(frame, &mut position)?;
                0
            }
            1 => 8,
            5 => 4,
            2 => read_varint(frame, &mut position)?,
            _ => return Err(EnvelopeError::UnsupportedWireType { field, wire_type }),
        };
        if field == 1 && wire_type != 2 {
            return Err(EnvelopeError::FlatbufferFieldWireType { wire_type });
        }
        let available_now = frame.len() - position;
        if skip > available_now as u64 {
            return Err(EnvelopeError::Truncated {
                field,
                position,
                needed: skip,
                available: available_now,
            });
        }
        // Bounded by the check above, so the cast cannot truncate.
        let end = position + skip as usize;
        if field == 1 {
            flatbuffer = frame.slice(position..end);
        }
        position = end;
    }
    Ok(flatbuffer)
}

/// Reads a whole frame from a gRPC decode buffer.
pub(crate) fn take_frame(src: &mut impl Buf) -> Bytes {
    src.copy_to_bytes(src.remaining())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_is_tag_varint_length_then_bytes() {
        let payload = vec![7u8; 300];
        let frame = Envelope::from_flatbuffer(payload.clone()).to_frame();
        assert_eq!(&frame[..3], &[0x0A, 0xAC, 0x02]);
        assert_eq!(&frame[3..], &payload[..]);
        assert_eq!(
            frame.len(),
            Envelope::from_flatbuffer(payload).encoded_len()
        );
    }

    #[test]
    fn empty_flatbuffer_is_an_empty_frame() {
        let envelope = Envelope::from_flatbuffer(Bytes::new());
        assert!(envelope.to_frame().is_empty());
        assert_eq!(envelope.encoded_len(), 0);
        assert_eq!(Envelope::raw(Bytes::new()).flatbuffer(), Ok(Bytes::new()));
    }

    #[test]
    fn unknown_fields_are_skipped_and_last_field_1_wins() {
        // field 2 varint 150, field 1 "ab", field 3 fixed32, field 1 "c"
        let frame = [
            0x10, 0x96, 0x01, 0x0A, 0x02, b'a', b'b', 0x1D, 1, 2, 3, 4, 0x0A, 0x01, b'c',
        ];
        let envelope = Envelope::raw(Bytes::copy_from_slice(&frame));
        assert_eq!(envelope.flatbuffer().unwrap().as_ref(), b"c");
    }

    #[test]
    fn truncated_length_is_reported() {
        let envelope = Envelope::raw(Bytes::from_static(&[0x0A, 0x05, 1, 2]));
        assert_eq!(
            envelope.flatbuffer(),
            Err(EnvelopeError::Truncated {
                field: 1,
                position: 2,
                needed: 5,
                available: 2
            })
        );
    }

    #[test]
    fn field_1_as_varint_is_rejected() {
        let envelope = Envelope::raw(Bytes::from_static(&[0x08, 0x05]));
        assert_eq!(
            envelope.flatbuffer(),
            Err(EnvelopeError::FlatbufferFieldWireType { wire_type: 0 })
        );
    }

    #[test]
    fn group_wire_type_is_rejected() {
        let envelope = Envelope::raw(Bytes::from_static(&[0x0B]));
        assert_eq!(
            envelope.flatbuffer(),
            Err(EnvelopeError::UnsupportedWireType {
                field: 1,
                wire_type: 3
            })
        );
    }

    #[test]
    fn overlong_varint_is_rejected() {
        let envelope = Envelope::raw(Bytes::from_static(&[0xFF; 11]));
        assert_eq!(
            envelope.flatbuffer(),
            Err(EnvelopeError::MalformedVarint { position: 0 })
        );
    }

    #[test]
    fn huge_declared_length_does_not_overflow() {
        let mut frame = vec![0x0A];
        write_varint(u64::MAX, &mut frame);
        let envelope = Envelope::raw(frame);
        assert!(matches!(
            envelope.flatbuffer(),
            Err(EnvelopeError::Truncated { field: 1, .. })
        ));
    }

    #[test]
    fn varint_len_matches_written_length() {
        for value in [
            0u64,
            1,
            127,
            128,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            let mut out = Vec::new();
            write_varint(value, &mut out);
            assert_eq!(out.len(), varint_len(value), "value {value}");
            let mut position = 0;
            assert_eq!(read_varint(&out, &mut position), Ok(value));
        }
    }
}
