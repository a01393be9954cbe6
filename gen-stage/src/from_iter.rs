//! Producers built from an iterator or a stream (GenStage's
//! `from_enumerable`).

use std::collections::HashSet;
use std::fmt;
use std::future::Future;

use futures::{Stream, StreamExt};
use weir_dispatchers::{Dispatcher, SubscriptionId, SubscriptionOptions};

use crate::stage::ProducerStage;
use crate::{
    Cancellation, DemandMode, Error, Msgs, Noreply, Producer, ProducerContext, ProducerOptions,
    ProducerRef, StageGroup, StopReason, Subscription,
};

/// What a producer built by [`from_iter`] or [`from_stream`] does when a
/// consumer cancels (GenStage's `:on_cancel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnCancel {
    /// Keep running (default).
    #[default]
    Continue,
    /// Stop normally when the last consumer has cancelled.
    Stop,
}

/// Options for [`from_iter_with`] and [`from_stream_with`].
pub struct FromIterOptions<T> {
    producer: ProducerOptions<T>,
    on_cancel: OnCancel,
    group: Option<StageGroup>,
}

impl<T: 'static> FromIterOptions<T> {
    /// The Demand dispatcher, forward demand, keep running when consumers
    /// cancel.
    pub fn new() -> Self {
        Self {
            producer: ProducerOptions::new(),
            on_cancel: OnCancel::Continue,
            group: None,
        }
    }
}

impl<T> FromIterOptions<T> {
    /// The dispatcher.
    pub fn dispatcher(mut self, dispatcher: impl Dispatcher<T> + 'static) -> Self {
        self.producer = self.producer.dispatcher(dispatcher);
        self
    }

    /// The initial demand mode (e.g. accumulate until every consumer has
    /// subscribed).
    pub fn demand(mut self, mode: DemandMode) -> Self {
        self.producer = self.producer.demand(mode);
        self
    }

    /// What to do when consumers cancel.
    pub fn on_cancel(mut self, on_cancel: OnCancel) -> Self {
        self.on_cancel = on_cancel;
        self
    }

    /// Run the producer in `group` instead of on a task of its own.
    pub fn group(mut self, group: &StageGroup) -> Self {
        self.group = Some(group.clone());
        self
    }
}

impl<T: 'static> Default for FromIterOptions<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> fmt::Debug for FromIterOptions<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FromIterOptions")
            .field("producer", &self.producer)
            .field("on_cancel", &self.on_cancel)
            .field("group", &self.group)
            .finish()
    }
}

/// Where the events come from.
trait Source: Send + 'static {
    type Item: Send + 'static;
    /// Up to `n` items; fewer means the source is exhausted.
    fn next_items(&mut self, n: usize) -> impl Future<Output = Vec<Self::Item>> + Send;
}

struct IterSource<I>(I);

impl<I> Source for IterSource<I>
where
    I: Iterator + Send + 'static,
    I::Item: Send + 'static,
{
    type Item = I::Item;

    async fn next_items(&mut self, n: usize) -> Vec<I::Item> {
        self.0.by_ref().take(n).collect()
    }
}

struct StreamSource<S>(S);

impl<S> Source for StreamSource<S>
where
    S: Stream + Send + Unpin + 'static,
    S::Item: Send + 'static,
{
    type Item = S::Item;

    async fn next_items(&mut self, n: usize) -> Vec<S::Item> {
        let mut items = Vec::with_capacity(n.min(4096));
        while items.len() < n {
            match self.0.next().await {
                Some(item) => items.push(item),
                None => break,
            }
        }
        items
    }
}

/// Sent to itself once the source is exhausted: stop after the events
/// already buffered have been dispatched.
#[derive(Debug)]
struct Exhausted;

struct FromSource<S: Source> {
    source: Option<S>,
    on_cancel: OnCancel,
    consumers: HashSet<SubscriptionId>,
}

/// `FromSource`'s one message: [`Exhausted`], to itself.
type SourceMessages = Msgs<(), (), (), Exhausted>;

impl<S: Source> Producer for FromSource<S> {
    type Messages = SourceMessages;
    type Event = S::Item;

    async fn handle_demand(
        &mut self,
        demand: usize,
        ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<S::Item> {
        let Some(source) = self.source.as_mut() else {
            return Noreply::none();
        };
        let items = source.next_items(demand).await;
        if items.len() < demand {
            self.source = None;
            ctx.async_info(Exhausted);
        }
        Noreply::Emit(items)
    }

    async fn handle_subscribe(
        &mut self,
        subscription: Subscription,
        _options: &SubscriptionOptions<S::Item>,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Result<(), StopReason> {
        self.consumers.insert(subscription.id);
        Ok(())
    }

    async fn handle_cancel(
        &mut self,
        _cancellation: Cancellation,
        subscription: Subscription,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<S::Item> {
        let known = self.consumers.remove(&subscription.id);
        if known && self.on_cancel == OnCancel::Stop && self.consumers.is_empty() {
            return Noreply::Stop(StopReason::Normal);
        }
        Noreply::none()
    }

    async fn handle_info(
        &mut self,
        _info: Exhausted,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<S::Item> {
        Noreply::Stop(StopReason::Normal)
    }
}

async fn start_source<S: Source>(
    source: S,
    options: FromIterOptions<S::Item>,
) -> Result<ProducerRef<S::Item>, Error> {
    let stage = FromSource {
        source: Some(source),
        on_cancel: options.on_cancel,
        consumers: HashSet::new(),
    };
    let stage = crate::run::start_in(
        ProducerStage::new(stage),
        options.group.as_ref(),
        Some(options.producer.into()),
    )
    .await?;
    Ok(stage.producer())
}

/// A producer emitting the items of `iter`, exactly as many as demanded per
/// ask, that stops normally once its last events have been dispatched
/// (GenStage's `from_enumerable`).
///
/// The iterator runs inside the producer's task: a slow iterator holds the
/// producer up, as in GenStage.
///
/// ```
/// use futures::StreamExt;
/// use weir_gen_stage::SubscribeOptions;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), weir_gen_stage::Error> {
/// let letters = weir_gen_stage::from_iter(['a', 'b', 'c']).await?;
/// let all: Vec<char> = weir_gen_stage::stream([(letters.clone(), SubscribeOptions::new())])?
///     .map(|e| e.expect("an event"))
///     .collect()
///     .await;
/// assert_eq!(all, vec!['a', 'b', 'c']);
/// assert_eq!(letters.stopped().await, weir_gen_stage::StopReason::Normal);
/// # Ok(())
/// # }
/// ```
pub async fn from_iter<I>(iter: I) -> Result<ProducerRef<I::Item>, Error>
where
    I: IntoIterator,
    I::IntoIter: Send + 'static,
    I::Item: Send + 'static,
{
    from_iter_with(iter, FromIterOptions::new()).await
}

/// [`from_iter`] with options (dispatcher, demand mode, on-cancel).
pub async fn from_iter_with<I>(
    iter: I,
    options: FromIterOptions<I::Item>,
) -> Result<ProducerRef<I::Item>, Error>
where
    I: IntoIterator,
    I::IntoIter: Send + 'static,
    I::Item: Send + 'static,
{
    start_source(IterSource(iter.into_iter()), options).await
}

/// A producer emitting the items of `stream`: each ask is answered with
/// exactly the demanded count (waiting for the stream as needed) until the
/// stream ends; then the producer stops normally once its last events have
/// been dispatched.
///
/// ```
/// use futures::StreamExt;
/// use weir_gen_stage::SubscribeOptions;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), weir_gen_stage::Error> {
/// let source = weir_gen_stage::from_stream(futures::stream::iter(1..=3u8)).await?;
/// let all: Vec<u8> = weir_gen_stage::stream([(source, SubscribeOptions::new())])?
///     .map(|e| e.expect("an event"))
///     .collect()
///     .await;
/// assert_eq!(all, vec![1, 2, 3]);
/// # Ok(())
/// # }
/// ```
pub async fn from_stream<S>(stream: S) -> Result<ProducerRef<S::Item>, Error>
where
    S: Stream + Send + Unpin + 'static,
    S::Item: Send + 'static,
{
    from_stream_with(stream, FromIterOptions::new()).await
}

/// [`from_stream`] with options.
pub async fn from_stream_with<S>(
    stream: S,
    options: FromIterOptions<S::Item>,
) -> Result<ProducerRef<S::Item>, Error>
where
    S: Stream + Send + Unpin + 'static,
    S::Item: Send + 'static,
{
    start_source(StreamSource(stream), options).await
}
