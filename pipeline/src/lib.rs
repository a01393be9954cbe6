#![doc = include_str!("../README.md")]

mod batch;
mod batcher;
mod demand;
mod error;
mod handlers;
mod message;
mod metrics;
mod pipeline;
mod processor;
mod rate_limit;
mod supervisor;
mod test_producer;
mod topology;

pub use weir_gen_stage as gen_stage;

pub use batch::{Batch, BatchInfo, BatchTrigger};
pub use error::Error;
pub use message::{
    Acknowledger, BatchMode, ConfigureAckError, DEFAULT_BATCH_KEY, DEFAULT_BATCHER, Message,
    Metadata, NoopAcknowledger, Status, ack_messages,
};
pub use metrics::{BatchSizes, PipelineMetrics, StageMetrics, StageRole};
pub use pipeline::{Batcher, Pipeline, PipelineBuilder};
pub use rate_limit::{RateLimiting, RateLimitingMetrics};
pub use topology::{Topology, TopologyBatcher, TopologyProcessors, TopologyProducer, all_running};
