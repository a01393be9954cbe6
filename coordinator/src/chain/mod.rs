//! The dataset metadata chain: events, their FlatBuffers encoding, the chain's rules and its storage.
pub mod codec;
pub mod event;
pub mod fb;
pub mod store;
pub mod validate;
