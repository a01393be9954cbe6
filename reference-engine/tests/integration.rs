//! weir-reference-engine's integration tests, one module per file, built as one test binary (one link instead of one
//! per file). A new file in `tests/` is declared here; the architecture test checks that none is left out.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is a failed test

mod common;

mod bad_inputs;
mod binary;
mod chained_steps;
mod changelog;
mod conformance;
mod cumulating_windows;
mod deep_queries;
mod image;
mod interval_join;
mod operations;
mod order_by;
mod session_windows;
mod sql_functions;
mod temporal_join;
mod top_n;
mod transform_semantics;
mod window_aggregation;
mod window_syntax;
