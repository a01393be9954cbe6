//! GenStage for Rust: demand-driven back-pressure between producer,
//! producer_consumer and consumer stages on tokio.
//!
//! A **producer** emits events only when its consumers ask for them; a
//! **consumer** asks (automatically, `max_demand` at a time, or manually);
//! a **producer_consumer** does both. Each stage is a tokio task behind a
//! typed handle; stages talk through one mailbox each, moving events as
//! `Vec<T>` batches. This is Elixir's
//! [GenStage](https://hexdocs.pm/gen_stage) with the same observable
//! behaviour (which events reach which consumer, in which batches, when
//! demand is asked, when a stage stops), typed events, and the
//! [`dispatchers`] crate deciding who gets what.
//!
//! # Example
//!
//! A producer of numbers, a producer_consumer doubling them, and two
//! consumers sharing the work through the Demand dispatcher:
//!
//! ```
//! use gen_stage::{
//!     Consumer, ConsumerContext, Noreply, Producer, ProducerConsumer, ProducerConsumerContext,
//!     ProducerContext, SubscribeOptions, Subscription,
//! };
//! use tokio::sync::mpsc;
//!
//! struct Numbers { next: u64, last: u64 }
//!
//! impl Producer for Numbers {
//!     type Event = u64;
//!     type Call = ();
//!     type Reply = ();
//!     type Cast = ();
//!     type Info = ();
//!
//!     async fn handle_demand(&mut self, demand: usize, _ctx: &mut ProducerContext<'_, Self>) -> Noreply<u64> {
//!         let end = (self.next + demand as u64).min(self.last + 1);
//!         let events = (self.next..end).collect();
//!         self.next = end;
//!         Noreply::Emit(events)
//!     }
//! }
//!
//! struct Doubler;
//!
//! impl ProducerConsumer for Doubler {
//!     type In = u64;
//!     type Out = u64;
//!     type Call = ();
//!     type Reply = ();
//!     type Cast = ();
//!     type Info = ();
//!
//!     async fn handle_events(&mut self, events: Vec<u64>, _from: Subscription,
//!                            _ctx: &mut ProducerConsumerContext<'_, Self>) -> Noreply<u64> {
//!         Noreply::Emit(events.into_iter().map(|n| n * 2).collect())
//!     }
//! }
//!
//! struct Collector(mpsc::UnboundedSender<u64>);
//!
//! impl Consumer for Collector {
//!     type Event = u64;
//!     type Call = ();
//!     type Reply = ();
//!     type Cast = ();
//!     type Info = ();
//!
//!     async fn handle_events(&mut self, events: Vec<u64>, _from: Subscription,
//!                            _ctx: &mut ConsumerContext<'_, Self>) -> Noreply {
//!         for event in events {
//!             let _ = self.0.send(event);
//!         }
//!         Noreply::none()
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), gen_stage::Error> {
//! let numbers = gen_stage::start_producer(Numbers { next: 1, last: 100 }).await?;
//! let doubler = gen_stage::start_producer_consumer(Doubler).await?;
//! doubler.subscribe(&numbers, SubscribeOptions::new().max_demand(10)).await?;
//!
//! let (tx, mut rx) = mpsc::unbounded_channel();
//! for _ in 0..2 {
//!     let collector = gen_stage::start_consumer(Collector(tx.clone())).await?;
//!     collector.subscribe(&doubler, SubscribeOptions::new().max_demand(5)).await?;
//! }
//! let mut sum = 0;
//! for _ in 0..100 {
//!     sum += rx.recv().await.expect("100 events");
//! }
//! assert_eq!(sum, 2 * 5050);
//! # Ok(())
//! # }
//! ```
//!
//! # Dispatchers
//!
//! A producer's dispatcher decides which consumer gets which events
//! ([`ProducerOptions::dispatcher`]). The [`DemandDispatcher`] (the
//! default, above) shares the work. The [`BroadcastDispatcher`] sends every
//! event to every consumer, filtered per subscription by a selector:
//!
//! ```
//! use futures::StreamExt;
//! use gen_stage::{BroadcastDispatcher, DemandMode, FromIterOptions, StreamOptions, SubscribeOptions};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), gen_stage::Error> {
//! // Accumulate until both consumers are subscribed: a late subscriber
//! // would miss earlier events.
//! let options = FromIterOptions::new()
//!     .dispatcher(BroadcastDispatcher::new())
//!     .demand(DemandMode::Accumulate);
//! let numbers = gen_stage::from_iter_with(0..6u32, options).await?;
//! let all = gen_stage::stream_with(
//!     [(numbers.clone(), SubscribeOptions::new())],
//!     StreamOptions::new().demand(DemandMode::Accumulate),
//! )?;
//! // This stream switches the producer to forward: everything flows.
//! let evens = gen_stage::stream([(numbers, SubscribeOptions::new().selector(|n: &u32| n % 2 == 0))])?;
//! let (all, evens) = futures::join!(all.collect::<Vec<_>>(), evens.collect::<Vec<_>>());
//! let all: Vec<u32> = all.into_iter().map(|e| e.expect("an event")).collect();
//! let evens: Vec<u32> = evens.into_iter().map(|e| e.expect("an event")).collect();
//! assert_eq!(all, vec![0, 1, 2, 3, 4, 5]);
//! assert_eq!(evens, vec![0, 2, 4]);
//! # Ok(())
//! # }
//! ```
//!
//! The [`PartitionDispatcher`] hashes each event to one partition, one
//! consumer per partition:
//!
//! ```
//! use futures::StreamExt;
//! use gen_stage::{DemandMode, FromIterOptions, PartitionDispatcher, StreamOptions, SubscribeOptions};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), gen_stage::Error> {
//! let by_parity = PartitionDispatcher::with_hash(2, |n: u32| Some((n, (n % 2) as usize)));
//! let options = FromIterOptions::new().dispatcher(by_parity).demand(DemandMode::Accumulate);
//! let numbers = gen_stage::from_iter_with(0..10u32, options).await?;
//! let even = gen_stage::stream_with(
//!     [(numbers.clone(), SubscribeOptions::new().partition(0))],
//!     StreamOptions::new().demand(DemandMode::Accumulate),
//! )?;
//! let odd = gen_stage::stream([(numbers, SubscribeOptions::new().partition(1))])?;
//! let (even, odd) = futures::join!(even.collect::<Vec<_>>(), odd.collect::<Vec<_>>());
//! let even: Vec<u32> = even.into_iter().map(|e| e.expect("an event")).collect();
//! let odd: Vec<u32> = odd.into_iter().map(|e| e.expect("an event")).collect();
//! assert_eq!(even, vec![0, 2, 4, 6, 8]);
//! assert_eq!(odd, vec![1, 3, 5, 7, 9]);
//! # Ok(())
//! # }
//! ```
//!
//! # Where stages run
//!
//! Each stage started with [`start_producer`] and its siblings is a tokio
//! task of its own, so the stages of a pipeline run in parallel on a
//! multi-thread runtime, and every hop wakes the next stage through tokio's
//! scheduler (often on the other worker). A [`StageGroup`] runs several
//! stages on one task instead: a hop between two of them runs on the worker
//! running the group and never goes through tokio's scheduler, which makes a pipeline of cheap stages
//! with small batches several times faster (see `docs/benchmarks.md`), at
//! the cost of running them one at a time. Start the cheap stages of a
//! pipeline in one group, CPU-heavy stages on their own tasks; both kinds
//! subscribe to each other as usual.
//!
//! # Map
//!
//! - Stages: [`Producer`], [`ProducerConsumer`], [`Consumer`]; start them
//!   with [`start_producer`], [`start_producer_consumer`],
//!   [`start_consumer`] (or their `start` methods), or in a [`StageGroup`].
//! - Handles: [`StageRef`], [`ProducerRef`], [`ConsumerRef`].
//! - Subscriptions: [`SubscribeOptions`], [`CancelMode`], [`ConsumerDemand`];
//!   the automatic demand algorithm in [`demand`], the producer buffer in
//!   [`buffer`].
//! - Helpers: [`stream`] (consume producers as a `futures::Stream`),
//!   [`from_iter`] / [`from_stream`] (producers from iterators and streams),
//!   [`ConsumerSupervisor`] (one task per event), and the raw protocol ends
//!   in [`protocol`].
//! - Introspection: [`StageRef::status`] (a [`StageStatus`]) on every
//!   handle; [`ConsumerSupervisor`]'s
//!   [`which_children`](StageRef::which_children),
//!   [`count_children`](StageRef::count_children) and
//!   [`terminate_child`](StageRef::terminate_child).
//! - Stop reasons and cancellations: [`StopReason`], [`Cancellation`]; a
//!   panicking callback stops its stage with [`StopReason::Panicked`].
//!
//! # Where Weir differs from GenStage
//!
//! - Events are typed and move as `Vec<T>` batches; nothing is copied or
//!   serialised (the Broadcast dispatcher clones, by definition).
//! - A subscription the dispatcher cannot accept is refused with a cancel
//!   reason ([`StopReason::SubscriptionRefused`]); the producer keeps running.
//! - `buffer_size` 0 is refused when the stage starts.
//! - Partition queues count toward the producer's buffer size and estimate.
//! - A synchronous subscribe ([`ConsumerRef::subscribe`]) waits for the
//!   producer's acknowledgement (or refusal); the protocol carries an ack.
//! - A panicking callback stops its stage with [`StopReason::Panicked`],
//!   propagated by cancel mode; the runtime keeps running.
//! - A stage that nothing can reach any more (no handle, no subscription)
//!   stops with [`StopReason::Normal`] instead of idling forever.
//! - Stages are tokio tasks behind typed handles: no names, no links, no
//!   code reload, no hibernation.

/// The README's examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

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

pub use dispatchers;
pub use dispatchers::{
    BroadcastDispatcher, DemandDispatcher, Dispatcher, PartitionDispatcher, PartitionKey,
    SubscribeError, SubscriptionId, SubscriptionOptions,
};

pub use buffer::{BufferKeep, BufferSize};
pub use closures::{FilterMap, FlatMap, ForEach, Map, filter_map, flat_map, for_each, map};
pub use consumer::{Consumer, ConsumerContext, start_consumer, start_consumer_with};
pub use consumer_supervisor::{
    ChildExit, ChildId, ChildInfo, ChildType, ChildrenCount, ConsumerSupervisor, CountChildren,
    Restart, SupervisorInfo,
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
