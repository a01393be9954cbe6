#![doc = include_str!("../README.md")]
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod cluster;
mod engine;
mod error;
mod executor;
mod job_store;
mod local;
mod scheduler;

pub use cluster::SchedulerAddress;
pub use engine::{ClusterConfig, distributed_engine};
pub use error::DistributedError;
pub use executor::{ExecutorOptions, run_executor};
pub use local::LocalCluster;
pub use scheduler::{Scheduler, SchedulerOptions};

/// The reference engine this engine shares its planning with.
pub use weir_reference_engine as reference_engine;
