//! weir-pipeline's integration tests, one module per file, built as one test binary (one link instead of one
//! per file). A new file in `tests/` is declared here; the architecture test checks that none is left out.

#[macro_use]
mod common;

mod ack_options;
mod acks;
mod batch_modes;
mod batching;
mod demand;
mod drain;
mod exactly_once;
mod metrics;
mod partition;
mod prepare_messages;
mod rate_limiting;
mod shutdown;
mod start;
mod supervision;
mod topology;
mod transformer;
