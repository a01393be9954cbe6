//! Consume producers as a `futures::Stream` (GenStage's `stream/2`).

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use weir_dispatchers::SubscriptionId;

use crate::demand::AutomaticDemand;
use crate::ids::IdMap;
use crate::protocol::{RawConsumer, ToConsumer};
use crate::{
    CancelMode, Cancellation, DemandMode, Error, ProducerRef, StopReason, SubscribeOptions,
    new_subscription_id,
};

/// Options for [`stream_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamOptions {
    demand: Option<DemandMode>,
}

impl StreamOptions {
    /// The defaults: set producers to [`DemandMode::Forward`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Set each subscribed producer to `mode` once subscribed (default:
    /// [`DemandMode::Forward`], which releases a producer started in
    /// accumulate mode, as GenStage's stream does).
    pub fn demand(mut self, mode: DemandMode) -> Self {
        self.demand = Some(mode);
        self
    }
}

struct StreamSubscription<T> {
    producer: ProducerRef<T>,
    cancel: CancelMode,
    demand: AutomaticDemand,
}

/// Events from one or more producers as a [`Stream`], with GenStage's
/// automatic demand (each subscription asks `max_demand` at once and more as
/// pieces of `max_demand - min_demand` events are consumed).
///
/// It ends when its subscriptions have ended normally: a permanent
/// subscription ending with any transient reason (normal, shutdown) ends the
/// whole stream, a transient or temporary one just leaves it. A permanent or
/// transient subscription ending otherwise (the producer crashed, refused,
/// was not alive) yields one [`Error::SubscriptionCancelled`] and ends the
/// stream. Dropping the stream cancels its subscriptions.
pub struct EventStream<T> {
    raw: RawConsumer<T>,
    subscriptions: IdMap<SubscriptionId, StreamSubscription<T>>,
    current: std::vec::IntoIter<T>,
    /// The ask due once `current` is consumed.
    ask_after_current: Option<(SubscriptionId, usize)>,
    pieces: VecDeque<(Vec<T>, SubscriptionId, usize)>,
    error: Option<Error>,
    done: bool,
}

// The stream is never pinned structurally: every field is moved freely.
impl<T> Unpin for EventStream<T> {}

/// Consume `subscriptions` as a stream of events; see [`EventStream`].
/// Invalid options are refused before anything is subscribed.
///
/// ```
/// use futures::StreamExt;
/// use weir_gen_stage::{CancelMode, SubscribeOptions};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), weir_gen_stage::Error> {
/// let evens = weir_gen_stage::from_iter((0..10u32).filter(|n| n % 2 == 0)).await?;
/// let odds = weir_gen_stage::from_iter((0..10u32).filter(|n| n % 2 == 1)).await?;
/// let transient = || SubscribeOptions::new().cancel(CancelMode::Transient);
/// let mut all: Vec<u32> = weir_gen_stage::stream([(evens, transient()), (odds, transient())])?
///     .map(|e| e.expect("an event"))
///     .collect()
///     .await;
/// all.sort();
/// assert_eq!(all, (0..10).collect::<Vec<_>>());
/// # Ok(())
/// # }
/// ```
pub fn stream<T: Send + 'static>(
    subscriptions: impl IntoIterator<Item = (ProducerRef<T>, SubscribeOptions<T>)>,
) -> Result<EventStream<T>, Error> {
    stream_with(subscriptions, StreamOptions::default())
}

/// [`stream`] with options.
pub fn stream_with<T: Send + 'static>(
    subscriptions: impl IntoIterator<Item = (ProducerRef<T>, SubscribeOptions<T>)>,
    options: StreamOptions,
) -> Result<EventStream<T>, Error> {
    let subscriptions: Vec<_> = subscriptions.into_iter().collect();
    for (_, subscribe) in &subscriptions {
        subscribe.validate()?;
    }
    let mut stream = EventStream {
        raw: RawConsumer::new(),
        subscriptions: IdMap::default(),
        current: Vec::new().into_iter(),
        ask_after_current: None,
        pieces: VecDeque::new(),
        error: None,
        done: false,
    };
    let mode = options.demand.unwrap_or(DemandMode::Forward);
    for (producer, subscribe) in subscriptions {
        let sub = new_subscription_id();
        let demand = AutomaticDemand::new(subscribe.get_max_demand(), subscribe.get_min_demand());
        stream
            .raw
            .subscribe(&producer, sub, subscribe.to_subscription_options());
        stream.raw.ask(&producer, sub, demand.initial_ask());
        let _ = producer.async_set_demand_mode(mode);
        stream.subscriptions.insert(
            sub,
            StreamSubscription {
                producer,
                cancel: subscribe.get_cancel(),
                demand,
            },
        );
    }
    Ok(stream)
}

impl<T: Send + 'static> EventStream<T> {
    /// How many subscriptions are still running.
    pub fn subscriptions(&self) -> usize {
        self.subscriptions.len()
    }

    fn handle(&mut self, msg: ToConsumer<T>) {
        match msg {
            ToConsumer::Ack { .. } => {}
            ToConsumer::Events {
                subscription,
                events,
            } => {
                let Some(sub) = self.subscriptions.get_mut(&subscription) else {
                    // Sent before our cancellation was processed.
                    return;
                };
                let batches = sub.demand.receive(events.len());
                if batches.excess() > 0 {
                    tracing::error!(
                        %subscription,
                        excess = batches.excess(),
                        "stream has received {} events in excess",
                        batches.excess()
                    );
                }
                if batches.len() == 1 {
                    let ask = batches.map(|b| b.ask).sum();
                    self.pieces.push_back((events, subscription, ask));
                    return;
                }
                let mut events = events.into_iter();
                for batch in batches {
                    let piece: Vec<T> = events.by_ref().take(batch.size).collect();
                    self.pieces.push_back((piece, subscription, batch.ask));
                }
            }
            ToConsumer::Cancel {
                subscription,
                reason,
            } => {
                self.end_subscription(subscription, Cancellation::Cancel(reason));
            }
            ToConsumer::Down {
                subscription,
                reason,
            } => {
                self.end_subscription(subscription, Cancellation::Down(reason));
            }
        }
    }

    fn end_subscription(&mut self, subscription: SubscriptionId, cancellation: Cancellation) {
        let Some(sub) = self.subscriptions.remove(&subscription) else {
            return;
        };
        self.raw.forget(subscription);
        let reason = cancellation.reason();
        let ends_stream = match sub.cancel {
            CancelMode::Permanent => true,
            CancelMode::Transient => !reason.is_transient_shutdown(),
            CancelMode::Temporary => false,
        };
        if !ends_stream {
            return;
        }
        if !reason.is_transient_shutdown() {
            self.error = Some(Error::SubscriptionCancelled {
                subscription,
                producer: sub.producer.id(),
                cancellation,
            });
        }
        self.done = true;
        self.cancel_all();
    }

    fn cancel_all(&mut self) {
        for (subscription, sub) in self.subscriptions.drain() {
            self.raw
                .cancel(&sub.producer, subscription, StopReason::Normal);
            self.raw.forget(subscription);
        }
    }
}

impl<T: Send + 'static> Stream for EventStream<T> {
    type Item = Result<T, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(error) = this.error.take() {
                return Poll::Ready(Some(Err(error)));
            }
            if let Some(event) = this.current.next() {
                return Poll::Ready(Some(Ok(event)));
            }
            if let Some((subscription, n)) = this.ask_after_current.take()
                && let Some(sub) = this.subscriptions.get(&subscription)
            {
                this.raw.ask(&sub.producer, subscription, n);
            }
            if let Some((piece, subscription, ask)) = this.pieces.pop_front() {
                this.current = piece.into_iter();
                this.ask_after_current = (ask > 0).then_some((subscription, ask));
                continue;
            }
            if this.done || this.subscriptions.is_empty() {
                this.done = true;
                return Poll::Ready(None);
            }
            match this.raw.poll_recv(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    this.done = true;
                    return Poll::Ready(None);
                }
                Poll::Ready(Some(msg)) => this.handle(msg),
            }
        }
    }
}

impl<T> Drop for EventStream<T> {
    fn drop(&mut self) {
        for (subscription, sub) in self.subscriptions.drain() {
            sub.producer.inner.cancel(subscription, StopReason::Normal);
        }
    }
}

impl<T> fmt::Debug for EventStream<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventStream")
            .field("subscriptions", &self.subscriptions.len())
            .field("pieces", &self.pieces.len())
            .field("done", &self.done)
            .finish()
    }
}
