//! Stages built from closures, for the common shapes: a consumer that runs
//! a function on every event ([`for_each`]), producer_consumers that map
//! ([`map`]), filter and map ([`filter_map`]) or expand ([`flat_map`])
//! events. With [`from_iter`](crate::from_iter) as the producer, a
//! pipeline needs no trait implementation at all:
//!
//! ```
//! use weir_gen_stage::SubscribeOptions;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), weir_gen_stage::Error> {
//! let numbers = weir_gen_stage::from_iter(1..=10u64).await?;
//! let squares = weir_gen_stage::map(|n: u64| n * n).await?;
//! squares.subscribe(&numbers, SubscribeOptions::new()).await?;
//! let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
//! let sink = weir_gen_stage::for_each(move |n: u64| {
//!     let _ = tx.send(n);
//! })
//! .await?;
//! sink.subscribe(&squares, SubscribeOptions::new()).await?;
//! // Each stage stops after its producer (permanent subscriptions).
//! sink.stopped().await;
//! let mut sum = 0;
//! while let Some(n) = rx.recv().await {
//!     sum += n;
//! }
//! assert_eq!(sum, 385);
//! # Ok(())
//! # }
//! ```
//!
//! The stage types ([`ForEach`], [`Map`], [`FilterMap`], [`FlatMap`]) are
//! ordinary [`Consumer`]s and [`ProducerConsumer`]s: start them in a
//! [`StageGroup`](crate::StageGroup), or with options (a dispatcher,
//! initial subscriptions) through
//! [`start_consumer_with`](crate::start_consumer_with) and
//! [`start_producer_consumer_with`](crate::start_producer_consumer_with).

use std::fmt;
use std::marker::PhantomData;

use crate::{
    Consumer, ConsumerContext, ConsumerHandle, Error, Noreply, ProducerConsumer,
    ProducerConsumerContext, ProducerConsumerHandle, Subscription,
};

/// A consumer calling a function on every event ([`for_each`]).
pub struct ForEach<T, F> {
    f: F,
    _events: PhantomData<fn(T)>,
}

impl<T, F> ForEach<T, F>
where
    T: Send + 'static,
    F: FnMut(T) + Send + 'static,
{
    /// The stage, to start with [`start_consumer`](crate::start_consumer),
    /// its `_with` variant or in a group.
    pub fn new(f: F) -> Self {
        Self {
            f,
            _events: PhantomData,
        }
    }
}

impl<T, F> Consumer for ForEach<T, F>
where
    T: Send + 'static,
    F: FnMut(T) + Send + 'static,
{
    type Messages = ();
    type Event = T;

    async fn handle_events(
        &mut self,
        events: Vec<T>,
        _from: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        events.into_iter().for_each(&mut self.f);
        Noreply::none()
    }
}

/// Start a consumer calling `f` on every event, in order, in its own task.
/// Subscribe it to producers as any consumer.
pub async fn for_each<T, F>(f: F) -> Result<ConsumerHandle<ForEach<T, F>>, Error>
where
    T: Send + 'static,
    F: FnMut(T) + Send + 'static,
{
    crate::start_consumer(ForEach::new(f)).await
}

/// A producer_consumer emitting `f(event)` for every event ([`map`]).
pub struct Map<In, Out, F> {
    f: F,
    _events: PhantomData<fn(In) -> Out>,
}

impl<In, Out, F> Map<In, Out, F>
where
    In: Send + 'static,
    Out: Send + 'static,
    F: FnMut(In) -> Out + Send + 'static,
{
    /// The stage, to start with
    /// [`start_producer_consumer`](crate::start_producer_consumer), its
    /// `_with` variant or in a group.
    pub fn new(f: F) -> Self {
        Self {
            f,
            _events: PhantomData,
        }
    }
}

impl<In, Out, F> ProducerConsumer for Map<In, Out, F>
where
    In: Send + 'static,
    Out: Send + 'static,
    F: FnMut(In) -> Out + Send + 'static,
{
    type Messages = ();
    type In = In;
    type Out = Out;

    async fn handle_events(
        &mut self,
        events: Vec<In>,
        _from: Subscription,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<Out> {
        Noreply::Emit(events.into_iter().map(&mut self.f).collect())
    }
}

/// Start a producer_consumer emitting `f(event)` for every event it
/// receives, in its own task.
pub async fn map<In, Out, F>(f: F) -> Result<ProducerConsumerHandle<Map<In, Out, F>>, Error>
where
    In: Send + 'static,
    Out: Send + 'static,
    F: FnMut(In) -> Out + Send + 'static,
{
    crate::start_producer_consumer(Map::new(f)).await
}

/// A producer_consumer emitting the `Some`s of `f(event)` ([`filter_map`]).
pub struct FilterMap<In, Out, F> {
    f: F,
    _events: PhantomData<fn(In) -> Out>,
}

impl<In, Out, F> FilterMap<In, Out, F>
where
    In: Send + 'static,
    Out: Send + 'static,
    F: FnMut(In) -> Option<Out> + Send + 'static,
{
    /// The stage (see [`Map::new`]).
    pub fn new(f: F) -> Self {
        Self {
            f,
            _events: PhantomData,
        }
    }
}

impl<In, Out, F> ProducerConsumer for FilterMap<In, Out, F>
where
    In: Send + 'static,
    Out: Send + 'static,
    F: FnMut(In) -> Option<Out> + Send + 'static,
{
    type Messages = ();
    type In = In;
    type Out = Out;

    async fn handle_events(
        &mut self,
        events: Vec<In>,
        _from: Subscription,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<Out> {
        Noreply::Emit(events.into_iter().filter_map(&mut self.f).collect())
    }
}

/// Start a producer_consumer emitting `out` for every event for which `f`
/// returns `Some(out)`, dropping the others, in its own task.
pub async fn filter_map<In, Out, F>(
    f: F,
) -> Result<ProducerConsumerHandle<FilterMap<In, Out, F>>, Error>
where
    In: Send + 'static,
    Out: Send + 'static,
    F: FnMut(In) -> Option<Out> + Send + 'static,
{
    crate::start_producer_consumer(FilterMap::new(f)).await
}

/// A producer_consumer emitting every item of `f(event)` ([`flat_map`]).
pub struct FlatMap<In, I, F> {
    f: F,
    _events: PhantomData<fn(In) -> I>,
}

impl<In, I, F> FlatMap<In, I, F>
where
    In: Send + 'static,
    I: IntoIterator,
    I::Item: Send + 'static,
    F: FnMut(In) -> I + Send + 'static,
{
    /// The stage (see [`Map::new`]).
    pub fn new(f: F) -> Self {
        Self {
            f,
            _events: PhantomData,
        }
    }
}

impl<In, I, F> ProducerConsumer for FlatMap<In, I, F>
where
    In: Send + 'static,
    I: IntoIterator + 'static,
    I::Item: Send + 'static,
    F: FnMut(In) -> I + Send + 'static,
{
    type Messages = ();
    type In = In;
    type Out = I::Item;

    async fn handle_events(
        &mut self,
        events: Vec<In>,
        _from: Subscription,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<I::Item> {
        Noreply::Emit(events.into_iter().flat_map(&mut self.f).collect())
    }
}

/// Start a producer_consumer emitting every item of `f(event)` for every
/// event it receives (none, one or many: it may emit more than its
/// consumers asked for, and buffers the rest), in its own task.
pub async fn flat_map<In, I, F>(f: F) -> Result<ProducerConsumerHandle<FlatMap<In, I, F>>, Error>
where
    In: Send + 'static,
    I: IntoIterator + 'static,
    I::Item: Send + 'static,
    F: FnMut(In) -> I + Send + 'static,
{
    crate::start_producer_consumer(FlatMap::new(f)).await
}

macro_rules! debug_by_name {
    ($($stage:ident),*) => {$(
        impl<A, B, F> fmt::Debug for $stage<A, B, F> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(stringify!($stage))
            }
        }
    )*};
}

debug_by_name!(Map, FilterMap, FlatMap);

impl<T, F> fmt::Debug for ForEach<T, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ForEach")
    }
}
