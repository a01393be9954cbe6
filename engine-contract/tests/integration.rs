//! weir-engine-contract's integration tests, one module per file, built as one test binary (one link instead of one
//! per file). A new file in `tests/` is declared here; the architecture test checks that none is left out.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is a failed test

mod architecture;
mod conformance;
mod decode_never_panics;
mod grpc;
mod grpcio_client;
mod model_roundtrip;
mod wire_vectors;
