//! weir-cli's integration tests, one module per file, built as one test binary (one link instead of one
//! per file). A new file in `tests/` is declared here; the architecture test checks that none is left out.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is a failed test

mod common;
#[path = "../../engine-runtime/tests/support/moto.rs"]
mod moto;
#[path = "support_http/mod.rs"]
mod support_http;

mod architecture;
mod ballista;
mod contract;
mod docker;
mod engine_binary;
mod errors;
mod exit_codes;
mod faults;
mod http_fetch;
mod ingest;
mod interrupted;
mod json_output;
mod kamu_examples;
mod kamu_habits;
mod kamu_manifests;
mod lifecycle;
mod lock;
mod object_exchange;
mod odf_compat;
mod plugins;
mod progress;
mod pull;
mod push;
mod push_faults;
mod signals;
mod sources;
mod sql;
mod sql_shell;
mod storage;
mod temporal;
mod upgrade;
mod verify;
