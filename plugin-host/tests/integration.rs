//! weir-plugin-host's integration tests, one module per file, built as one test binary (one link instead of one
//! per file). A new file in `tests/` is declared here; the architecture test checks that none is left out.

mod support;

mod demand_contract;
mod faults;
mod key_affinity;
mod loading;
mod metrics;
