//! weir-engine-runtime's integration tests, one module per file, built as one test binary (one link instead of one
//! per file). A new file in `tests/` is declared here; the architecture test checks that none is left out.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is a failed test

mod support;

mod container;
mod in_process;
mod owner_signals;
mod podman;
mod process;
mod scoped_credentials;
mod staging;
