//! weir-odf's integration tests, one module per file, built as one test binary (one link instead of one
//! per file). A new file in `tests/` is declared here; the architecture test checks that none is left out.

mod architecture;
mod logical_hash;
mod malformed;
mod round_trip;
mod serde;
mod sha3_backends;
mod vectors;
