//! weir-gen-stage's integration tests, one module per file, built as one test binary (one link instead of one
//! per file). A new file in `tests/` is declared here; the architecture test checks that none is left out.

mod harness;
mod support;

mod automatic_demand;
mod buffer;
mod calls;
mod cancel_modes;
mod closure_stages;
mod consumer_supervisor;
mod demand_mode;
mod drain;
mod from_iter;
mod genstage_buffer;
mod genstage_consumer_callbacks;
mod genstage_consumer_supervisor;
mod genstage_demand_batching;
mod genstage_demand_modes;
mod genstage_dispatchers;
mod genstage_info_ordering;
mod genstage_producer_buffer;
mod genstage_producer_callbacks;
mod genstage_producer_consumer_callbacks;
mod genstage_protocol_errors;
mod genstage_stream;
mod genstage_subscriptions;
mod group;
mod panics;
mod producer_consumer;
mod protocol;
mod semantics;
mod start_options;
mod status;
mod stream;
mod undelivered;
