#![doc = include_str!("../README.md")]

mod batch;
mod batcher;
mod error;
mod handlers;
mod message;
mod pipeline;
mod processor;
mod test_producer;

pub use gen_stage;

pub use batch::{Batch, BatchInfo, BatchTrigger};
pub use error::Error;
pub use message::{
    Acknowledger, DEFAULT_BATCH_KEY, DEFAULT_BATCHER, Message, NoopAcknowledger, Status,
    ack_messages,
};
pub use pipeline::{Batcher, Pipeline, PipelineBuilder};
