#![doc = include_str!("../README.md")]
//!
//! # The crate's API
//!
//! GenStage dispatchers as pure, sans-IO state machines.
//!
//! A dispatcher owns a producer's view of its consumers: who subscribed, how
//! much each one asked for, and who gets which events. This crate holds the
//! [`Dispatcher`] contract and GenStage's three built-in dispatchers:
//!
//! - [`DemandDispatcher`]: each batch goes to the consumer with the largest
//!   outstanding demand (work sharing).
//! - [`BroadcastDispatcher`]: every event goes to every consumer, at the pace
//!   of the slowest one, optionally filtered per consumer by a selector.
//! - [`PartitionDispatcher`]: events are hashed into partitions, one consumer
//!   per partition.
//!
//! Nothing here knows about tasks, channels or time: a dispatcher takes calls
//! and pushes what should happen into an [`Outbox`]. The `gen-stage` crate
//! carries it out; the same state machine can sit behind an ABI (dispatcher
//! plugins) or be tested exhaustively without a runtime.
//!
//! # Example
//!
//! ```
//! use weir_dispatchers::{ConsumerId, Dispatcher, Emit, Outbox, PartitionDispatcher, Subscriber,
//!                   SubscriptionId, SubscriptionOptions};
//!
//! // Two partitions: even numbers to partition 0, odd numbers to partition 1.
//! let mut dispatcher = PartitionDispatcher::with_hash(2, |n: u64| Some((n, (n % 2) as usize)));
//! let mut out = Outbox::new();
//! let even = Subscriber { subscription: SubscriptionId(1), consumer: ConsumerId(1) };
//! let odd = Subscriber { subscription: SubscriptionId(2), consumer: ConsumerId(2) };
//! dispatcher.subscribe(even, &SubscriptionOptions::new(10, 5).partition(0), &mut out).unwrap();
//! dispatcher.subscribe(odd, &SubscriptionOptions::new(10, 5).partition(1), &mut out).unwrap();
//! dispatcher.ask(even.subscription, 10, &mut out);
//! dispatcher.ask(odd.subscription, 10, &mut out);
//!
//! let leftover = dispatcher.dispatch(vec![1, 2, 3, 4], &mut out);
//! assert!(leftover.is_empty());
//! let sent: Vec<_> = out.drain().collect();
//! assert!(sent.contains(&Emit::Events { to: even.subscription, events: vec![2, 4] }));
//! assert!(sent.contains(&Emit::Events { to: odd.subscription, events: vec![1, 3] }));
//! ```

mod broadcast;
mod demand;
mod dispatcher;
mod error;
mod ids;
mod options;
mod outbox;
mod partition;

pub use broadcast::BroadcastDispatcher;
pub use demand::DemandDispatcher;
pub use dispatcher::Dispatcher;
pub use error::SubscribeError;
pub use ids::{ConsumerId, InfoId, Subscriber, SubscriptionId};
pub use options::{PartitionKey, Selector, SubscriptionOptions};
pub use outbox::{Emit, Outbox, Warning};
pub use partition::PartitionDispatcher;
