//! The consumer side of a stage (consumers and producer_consumers):
//! subscriptions to producers, automatic demand, the producer_consumer queue.

use std::sync::Arc;

use tokio::sync::oneshot;
use tracing::Instrument;
use weir_dispatchers::{InfoId, SubscriptionId};

use super::{Core, Flow, ctx};
use crate::demand::AutomaticDemand;
use crate::handle::Mailbox;
use crate::message::{Msg, SubscribeRequest, SubscribeTo};
use crate::shared::{Kind, MonitorId};
use crate::stage::Callbacks;
use crate::status::ProducerSubscriptionStatus;
use crate::{
    CancelMode, Cancellation, ConsumerDemand, ConsumerRef, Error, ProducerRef, StopReason,
    Subscription, new_subscription_id,
};

/// One of this stage's subscriptions to a producer.
pub(crate) struct Upstream<T> {
    pub(crate) producer: ProducerRef<T>,
    pub(crate) subscription: Subscription,
    cancel: CancelMode,
    /// `None`: manual demand.
    demand: Option<AutomaticDemand>,
    pub(super) monitor: Option<MonitorId>,
    /// Sync subscribe: answered on the producer's ack or cancel.
    pending_reply: Option<oneshot::Sender<Result<SubscriptionId, Error>>>,
    span: tracing::Span,
    max_demand: usize,
    min_demand: usize,
    /// The producer acknowledged the subscription.
    acknowledged: bool,
    /// Manual demand: asks made minus events received.
    pub(crate) manual_demand: usize,
}

/// What waits in a producer_consumer's queue for downstream demand.
pub(super) enum Queued<T> {
    Events {
        from: Subscription,
        events: Vec<T>,
    },
    Info(InfoId),
    Cancel {
        mode: CancelMode,
        cancellation: Cancellation,
        subscription: Subscription,
    },
}

/// How an incoming message is handed to `handle_events`.
enum Pieces {
    /// Manual demand (or a subscription cancelled while its events were
    /// queued): as one batch, no ask.
    Manual,
    /// Automatic demand, one piece (the usual case): then ask `ask`.
    One { ask: usize },
    /// Automatic demand, several pieces, each with its ask.
    Many(crate::demand::Batches),
}

/// A Broadcast refusal of a second subscription by the same consumer leaves
/// the consumer running whatever its cancel mode (GenStage's
/// `:already_subscribed`).
fn is_already_subscribed(reason: &StopReason) -> bool {
    matches!(
        reason,
        StopReason::SubscriptionRefused(weir_dispatchers::SubscribeError::AlreadySubscribed { .. })
    )
}

impl<S: Callbacks> Core<S> {
    /// Subscribe this stage to a producer: send the subscription, run
    /// `handle_subscribe`, and in automatic mode ask `max_demand` at once.
    pub(super) async fn subscribe_to(&mut self, request: SubscribeTo<S::In>) -> Flow {
        let SubscribeTo {
            producer,
            options,
            cancel,
            reply,
        } = request;
        let Some(tx) = self.me.upgrade() else {
            if let Some(reply) = reply {
                let _ = reply.send(Err(Error::NotAlive {
                    stage: self.shared.id(),
                }));
            }
            return Ok(());
        };
        let me = ConsumerRef {
            inner: Arc::new(Mailbox {
                tx,
                shared: self.shared.clone(),
            }),
        };
        let sub = new_subscription_id();
        let subscription = Subscription {
            id: sub,
            producer: producer.id(),
            consumer: self.shared.id(),
        };
        let weak = self.me.clone();
        let monitor = producer
            .shared()
            .monitor(Box::new(move |reason: &StopReason| {
                if let Some(tx) = weak.upgrade() {
                    let _ = tx.send(Msg::ProducerDown {
                        sub,
                        reason: reason.clone(),
                    });
                }
            }));
        producer.subscribe(SubscribeRequest {
            sub,
            consumer: me,
            options: options.to_subscription_options(),
            cancel,
        });
        let span = tracing::debug_span!(
            "subscription",
            subscription = %sub,
            producer = %subscription.producer,
            consumer = %subscription.consumer
        );
        span.in_scope(|| {
            tracing::debug!(
                max_demand = options.get_max_demand(),
                min_demand = options.get_min_demand(),
                cancel = ?options.get_cancel(),
                "subscribing to producer"
            )
        });
        self.upstream.insert(
            sub,
            Upstream {
                producer,
                subscription,
                cancel: options.get_cancel(),
                demand: None,
                monitor,
                pending_reply: reply,
                span: span.clone(),
                max_demand: options.get_max_demand(),
                min_demand: options.get_min_demand(),
                acknowledged: false,
                manual_demand: 0,
            },
        );
        let mode = self
            .stage
            .handle_subscribe_producer(subscription, &options, ctx!(self))
            .instrument(span)
            .await?;
        if mode == ConsumerDemand::Automatic
            && let Some(upstream) = self.upstream.get_mut(&sub)
        {
            let demand = AutomaticDemand::new(options.get_max_demand(), options.get_min_demand());
            upstream.producer.ask(sub, demand.initial_ask());
            upstream.demand = Some(demand);
        }
        Ok(())
    }

    /// The producer accepted: answer a sync subscribe.
    pub(super) fn on_ack(&mut self, sub: SubscriptionId) {
        let Some(upstream) = self.upstream.get_mut(&sub) else {
            return;
        };
        upstream.acknowledged = true;
        if let Some(reply) = upstream.pending_reply.take() {
            let _ = reply.send(Ok(sub));
        }
    }

    /// The consumer side's part of [`StageStatus`](crate::StageStatus): its
    /// subscriptions to producers, in id order, and the events a
    /// producer_consumer holds for downstream demand.
    pub(super) fn consumer_status(&self) -> (Vec<ProducerSubscriptionStatus>, usize) {
        let mut producers: Vec<ProducerSubscriptionStatus> = self
            .upstream
            .values()
            .map(|upstream| ProducerSubscriptionStatus {
                subscription: upstream.subscription,
                mode: match upstream.demand {
                    Some(_) => ConsumerDemand::Automatic,
                    None => ConsumerDemand::Manual,
                },
                pending_demand: match &upstream.demand {
                    Some(demand) => demand.outstanding(),
                    None => upstream.manual_demand,
                },
                max_demand: upstream.max_demand,
                min_demand: upstream.min_demand,
                cancel: upstream.cancel,
                acknowledged: upstream.acknowledged,
            })
            .collect();
        producers.sort_by_key(|p| p.subscription.id.0);
        let queued = self
            .pc_queue
            .iter()
            .map(|queued| match queued {
                Queued::Events { events, .. } => events.len(),
                Queued::Info(_) | Queued::Cancel { .. } => 0,
            })
            .sum();
        (producers, queued)
    }

    /// Events arrived from a producer.
    pub(super) async fn on_events(
        &mut self,
        sub: SubscriptionId,
        events: Vec<S::In>,
        from: Option<ProducerRef<S::In>>,
    ) -> Flow {
        // A producer_consumer hands events over at once only when nothing
        // waits before them and downstream asked; otherwise they queue.
        let direct = S::KIND != Kind::ProducerConsumer
            || (self.pc_queue.is_empty()
                && self.producer.as_ref().is_some_and(|p| p.pc_demand > 0));
        // One look-up of the subscription for the whole event path.
        let Some(upstream) = self.upstream.get_mut(&sub) else {
            match from {
                Some(producer) => {
                    producer.inner.cancel(sub, StopReason::UnknownSubscription);
                }
                None => tracing::debug!(subscription = %sub, "events for an unknown subscription"),
            }
            return Ok(());
        };
        let subscription = upstream.subscription;
        if direct {
            let pieces = Self::pieces(upstream, events.len());
            // The usual case inline: one piece, then its ask (no
            // `hand_over` future to build and poll).
            if let Pieces::One { ask } = pieces {
                self.count_handled(events.len());
                let result = self
                    .stage
                    .handle_events(events, subscription, ctx!(self))
                    .await;
                self.noreply(result)?;
                self.ask_producer(sub, ask);
                return Ok(());
            }
            return self.hand_over(subscription, events, pieces).await;
        }
        self.pc_queue.push_back(Queued::Events {
            from: subscription,
            events,
        });
        self.take_pc_events().await
    }

    /// How `count` events of `upstream` are handed to `handle_events`
    /// (updates its automatic demand as if they had been).
    #[inline]
    fn pieces(upstream: &mut Upstream<S::In>, count: usize) -> Pieces {
        let Upstream {
            demand: Some(demand),
            span,
            ..
        } = upstream
        else {
            upstream.manual_demand = upstream.manual_demand.saturating_sub(count);
            return Pieces::Manual;
        };
        let (pieces, excess) = if count > 0 && count <= demand.piece_size() {
            let (ask, excess) = demand.receive_piece(count);
            (Pieces::One { ask }, excess)
        } else {
            let batches = demand.receive(count);
            let excess = batches.excess();
            (Pieces::Many(batches), excess)
        };
        if excess > 0 {
            span.in_scope(|| {
                tracing::error!(excess, "consumer has received {} events in excess", excess)
            });
        }
        pieces
    }

    /// Hand events to `handle_events`: in automatic mode cut into pieces,
    /// asking after each piece as the demand algorithm says; in manual mode
    /// (or for a subscription cancelled while its events were queued) as one
    /// batch.
    async fn deliver_events(&mut self, from: Subscription, events: Vec<S::In>) -> Flow {
        let pieces = match self.upstream.get_mut(&from.id) {
            Some(upstream) => Self::pieces(upstream, events.len()),
            None => Pieces::Manual,
        };
        self.hand_over(from, events, pieces).await
    }

    /// [`deliver_events`](Self::deliver_events) once the pieces are known.
    async fn hand_over(&mut self, from: Subscription, events: Vec<S::In>, pieces: Pieces) -> Flow {
        let sub = from.id;
        match pieces {
            Pieces::Manual => {
                self.count_handled(events.len());
                let result = self.stage.handle_events(events, from, ctx!(self)).await;
                self.noreply(result)
            }
            Pieces::One { ask } => {
                self.count_handled(events.len());
                let result = self.stage.handle_events(events, from, ctx!(self)).await;
                self.noreply(result)?;
                self.ask_producer(sub, ask);
                Ok(())
            }
            Pieces::Many(batches) => {
                let mut events = events.into_iter();
                for batch in batches {
                    let piece: Vec<S::In> = events.by_ref().take(batch.size).collect();
                    self.count_handled(piece.len());
                    let result = self.stage.handle_events(piece, from, ctx!(self)).await;
                    self.noreply(result)?;
                    self.ask_producer(sub, batch.ask);
                }
                Ok(())
            }
        }
    }

    #[inline]
    fn ask_producer(&self, sub: SubscriptionId, n: usize) {
        if n > 0
            && let Some(upstream) = self.upstream.get(&sub)
        {
            upstream.producer.ask(sub, n);
        }
    }

    /// Producer_consumers: hand queued events over while downstream demand
    /// is positive; infos and cancellations queued behind events run in
    /// their turn.
    pub(super) async fn take_pc_events(&mut self) -> Flow {
        loop {
            let demand = self.producer.as_ref().map_or(0, |p| p.pc_demand);
            if demand == 0 {
                return Ok(());
            }
            let Some(queued) = self.pc_queue.pop_front() else {
                return Ok(());
            };
            match queued {
                Queued::Events { from, events } => self.deliver_events(from, events).await?,
                Queued::Info(id) => self.buffer_or_dispatch_info(id),
                Queued::Cancel {
                    mode,
                    cancellation,
                    subscription,
                } => self.invoke_cancel(mode, cancellation, subscription).await?,
            }
        }
    }

    /// A subscription to a producer ended (cancelled, refused, or the
    /// producer went away).
    pub(super) async fn consumer_cancel(
        &mut self,
        sub: SubscriptionId,
        cancellation: Cancellation,
    ) -> Flow {
        let Some(upstream) = self.upstream.remove(&sub) else {
            return Ok(());
        };
        if let Some(monitor) = upstream.monitor {
            upstream.producer.shared().demonitor(monitor);
        }
        upstream
            .span
            .in_scope(|| tracing::debug!(%cancellation, "subscription to producer ended"));
        if let Some(reply) = upstream.pending_reply {
            let _ = reply.send(Err(Error::SubscriptionRefused {
                producer: upstream.subscription.producer,
                cancellation: cancellation.clone(),
            }));
        }
        if S::KIND == Kind::ProducerConsumer && !self.pc_queue.is_empty() {
            self.pc_queue.push_back(Queued::Cancel {
                mode: upstream.cancel,
                cancellation,
                subscription: upstream.subscription,
            });
            return Ok(());
        }
        self.invoke_cancel(upstream.cancel, cancellation, upstream.subscription)
            .await
    }

    /// `handle_cancel`, then the cancel mode decides whether to stop.
    async fn invoke_cancel(
        &mut self,
        mode: CancelMode,
        cancellation: Cancellation,
        subscription: Subscription,
    ) -> Flow {
        let reason = cancellation.reason().clone();
        let result = self
            .stage
            .handle_cancel(cancellation, subscription, ctx!(self))
            .await;
        self.noreply(result)?;
        // A draining stage stops only once drained, whatever its
        // subscriptions' cancel modes.
        if mode.stops_consumer(&reason) && !is_already_subscribed(&reason) && self.drain.is_none() {
            tracing::info!(
                producer = %subscription.producer,
                subscription = %subscription.id,
                %reason,
                "consumer is stopping after its subscription ended"
            );
            return Err(reason);
        }
        Ok(())
    }

    /// A handle asks to cancel one of this stage's subscriptions: pass it to
    /// the producer, which confirms with a cancel.
    pub(super) fn cancel_upstream(&mut self, sub: SubscriptionId, reason: StopReason) {
        if let Some(upstream) = self.upstream.get(&sub) {
            upstream.producer.inner.cancel(sub, reason);
        }
    }

    /// A handle asks for manual demand.
    pub(super) fn manual_ask(
        &mut self,
        sub: SubscriptionId,
        n: usize,
        reply: Option<oneshot::Sender<Result<(), Error>>>,
    ) {
        let result = match self.upstream.get_mut(&sub) {
            Some(upstream) => {
                if n > 0 {
                    upstream.manual_demand = upstream.manual_demand.saturating_add(n);
                    upstream.producer.ask(sub, n);
                }
                Ok(())
            }
            None => Err(Error::UnknownSubscription {
                stage: self.shared.id(),
                subscription: sub,
            }),
        };
        if let Some(reply) = reply {
            let _ = reply.send(result);
        }
    }
}
