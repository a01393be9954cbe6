#![doc = include_str!("../README.md")]
pub mod buffer;
mod closures;
mod consumer;
mod consumer_supervisor;
mod context;
pub mod demand;
pub mod drain;
mod error;
mod from_iter;
mod group;
mod handle;
mod ids;
mod mailbox;
mod message;
mod messages;
mod options;
mod producer;
mod producer_consumer;
pub mod protocol;
mod reason;
mod reply;
mod run;
mod shared;
mod stage;
pub mod status;
mod stream;
mod subscription;
mod sync;

#[cfg(all(test, loom))]
mod loom_group;
#[cfg(all(test, loom))]
mod loom_mailbox;

pub use weir_dispatchers as dispatchers;
pub use weir_dispatchers::{
    BroadcastDispatcher, DemandDispatcher, Dispatcher, PartitionDispatcher, PartitionKey,
    SubscribeError, SubscriptionId, SubscriptionOptions,
};

pub use buffer::{BufferKeep, BufferSize};
pub use closures::{FilterMap, FlatMap, ForEach, Map, filter_map, flat_map, for_each, map};
pub use consumer::{Consumer, ConsumerContext, start_consumer, start_consumer_with};
pub use consumer_supervisor::{
    ChildExit, ChildId, ChildInfo, ChildType, ChildrenCount, ConsumerSupervisor, CountChildren,
    Restart, SupervisorHandle, SupervisorInfo, SupervisorMessages,
};
pub use context::Context;
pub use drain::{AnyStage, Drain, DrainOutcome, DrainReport, StageDrain, Undelivered};
pub use error::Error;
pub use from_iter::{
    FromIterOptions, OnCancel, from_iter, from_iter_with, from_stream, from_stream_with,
};
pub use group::StageGroup;
pub use handle::{
    AsProducer, ConsumerHandle, ConsumerRef, DEFAULT_TIMEOUT, ProducerConsumerHandle,
    ProducerHandle, ProducerRef, StageRef,
};
pub use ids::{StageId, new_subscription_id};
pub use messages::{
    CallOf, Calls, CallsAndCasts, CallsAndInfos, CastOf, Casts, CastsAndInfos, InfoOf, Infos,
    Messages, Msgs, ReplyOf,
};
pub use options::{ConsumerOptions, DemandMode, ProducerConsumerOptions, ProducerOptions};
pub use producer::{Producer, ProducerContext, start_producer, start_producer_with};
pub use producer_consumer::{
    ProducerConsumer, ProducerConsumerContext, start_producer_consumer,
    start_producer_consumer_with,
};
pub use reason::{Cancellation, StopReason};
pub use reply::{Noreply, Reply, ReplyTo};
pub use stage::{
    ConsumerStage, ConsumesEvents, ProducerConsumerStage, ProducerStage, ProducesEvents, Stage,
};
pub use status::{
    BufferStatus, ConsumerSubscriptionStatus, ProducerStatus, ProducerSubscriptionStatus,
    StageKind, StageStatus,
};
pub use stream::{EventStream, StreamOptions, stream, stream_with};
pub use subscription::{CancelMode, ConsumerDemand, SubscribeOptions, Subscription};
