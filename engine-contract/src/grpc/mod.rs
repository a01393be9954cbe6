//! The gRPC binding: service `engine.Engine`, every method server-streaming,
//! every message a protobuf `bytes flatbuffer = 1` envelope.

mod codec;
mod envelope;

pub use codec::{EnvelopeDecoder, EnvelopeEncoder, FlatbufferCodec};
pub use envelope::{Envelope, EnvelopeError};

/// The tonic client and server generated from the manual service definition
/// in `build.rs`: untyped (every message an [`Envelope`]).
///
/// The typed [`crate::EngineClient`] and [`crate::serve`] sit on top; use
/// these directly only to send or answer arbitrary frames (conformance
/// tools, tests of misbehaving peers).
pub mod raw {
    #![allow(
        missing_docs,
        missing_debug_implementations,
        clippy::all,
        clippy::pedantic,
        rust_2018_idioms
    )]
    include!(concat!(env!("OUT_DIR"), "/engine.Engine.rs"));
}
