//! The tonic [`Codec`] for the `engine.Engine` service: frames are
//! [`Envelope`]s, written and read byte for byte (no protobuf runtime).

use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

use super::envelope::{Envelope, take_frame};

/// Encodes and decodes [`Envelope`] frames.
///
/// Decoding never fails: the raw frame is kept and parsed when the caller
/// asks for the FlatBuffers bytes, so a malformed frame becomes a specific
/// error at the operation level (InvalidQuery on the server, a garbage
/// response error on the client) instead of a transport error.
#[derive(Debug, Clone, Copy, Default)]
pub struct FlatbufferCodec;

impl Codec for FlatbufferCodec {
    type Encode = Envelope;
    type Decode = Envelope;
    type Encoder = EnvelopeEncoder;
    type Decoder = EnvelopeDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        EnvelopeEncoder
    }

    fn decoder(&mut self) -> Self::Decoder {
        EnvelopeDecoder
    }
}

/// Writes an [`Envelope`]'s frame bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct EnvelopeEncoder;

impl Encoder for EnvelopeEncoder {
    type Item = Envelope;
    type Error = Status;

    fn encode(&mut self, item: Envelope, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.write_to(dst);
        Ok(())
    }
}

/// Reads a frame into an [`Envelope`] without interpreting it.
#[derive(Debug, Clone, Copy, Default)]
pub struct EnvelopeDecoder;

impl Decoder for EnvelopeDecoder {
    type Item = Envelope;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Envelope>, Status> {
        Ok(Some(Envelope::raw(take_frame(src))))
    }
}
