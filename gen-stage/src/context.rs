//! What callbacks can do besides returning: ask and cancel, reach their own
//! stage.

use std::fmt;
use std::sync::Arc;

use weir_dispatchers::SubscriptionId;

use crate::handle::Mailbox;
use crate::ids::IdMap;
use crate::mailbox::WeakSender;
use crate::message::Msg;
use crate::run::Upstream;
use crate::shared::StageShared;
use crate::stage::Stage;
use crate::{Error, StageId, StageRef, StopReason, Subscription};

/// Handed to every callback: the stage's identity and its subscriptions to
/// producers.
///
/// Use the aliases [`ProducerContext`](crate::ProducerContext),
/// [`ConsumerContext`](crate::ConsumerContext) and
/// [`ProducerConsumerContext`](crate::ProducerConsumerContext) in signatures.
pub struct Context<'a, S: Stage> {
    pub(crate) shared: &'a Arc<StageShared>,
    pub(crate) me: &'a WeakSender<Msg<S>>,
    pub(crate) upstream: &'a mut IdMap<SubscriptionId, Upstream<S::In>>,
}

impl<S: Stage> fmt::Debug for Context<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("stage", &self.shared.id())
            .field("subscriptions", &self.upstream.len())
            .finish()
    }
}

impl<S: Stage> Context<'_, S> {
    /// This stage's id.
    pub fn id(&self) -> StageId {
        self.shared.id()
    }

    /// A handle to this stage (e.g. for a task that will cast to it later).
    /// `None` once nothing but the stage itself holds its mailbox, which only
    /// happens while it is stopping.
    pub fn stage_ref(&self) -> Option<StageRef<S>> {
        self.me.upgrade().map(|tx| StageRef {
            mailbox: Mailbox {
                tx,
                shared: self.shared.clone(),
            },
        })
    }

    fn send_to_self(&self, msg: Msg<S>) -> bool {
        match self.me.upgrade() {
            Some(tx) => tx.send(msg).is_ok(),
            None => false,
        }
    }

    /// Queue an info message through this stage, behind the events buffered
    /// so far, including those this callback is about to return (GenStage's
    /// `async_info(self(), msg)`). Returns `false` if the stage is stopping.
    pub fn async_info(&self, info: S::Info) -> bool {
        self.send_to_self(Msg::InfoThrough { info, ack: None })
    }

    /// Send an info message to this stage's `handle_info`, after the
    /// messages already in its mailbox (`send(self(), msg)`).
    pub fn send_info(&self, info: S::Info) -> bool {
        self.send_to_self(Msg::Info(info))
    }

    /// Manual demand: ask the producer of `subscription` for `n` more events
    /// (GenStage's `ask/3`). `0` does nothing.
    pub fn ask(&mut self, subscription: SubscriptionId, n: usize) -> Result<(), Error> {
        match self.upstream.get_mut(&subscription) {
            Some(upstream) => {
                if n > 0 {
                    upstream.manual_demand = upstream.manual_demand.saturating_add(n);
                    upstream.producer.ask(subscription, n);
                }
                Ok(())
            }
            None => Err(Error::UnknownSubscription {
                stage: self.id(),
                subscription,
            }),
        }
    }

    /// Cancel this stage's subscription to a producer (GenStage's
    /// `cancel({producer, subscription}, reason)`). The producer confirms,
    /// and then `handle_cancel` runs and the cancel mode applies.
    pub fn cancel(
        &mut self,
        subscription: SubscriptionId,
        reason: StopReason,
    ) -> Result<(), Error> {
        match self.upstream.get(&subscription) {
            Some(upstream) => {
                upstream.producer.inner.cancel(subscription, reason);
                Ok(())
            }
            None => Err(Error::UnknownSubscription {
                stage: self.id(),
                subscription,
            }),
        }
    }

    /// This stage's subscriptions to producers.
    pub fn producer_subscriptions(&self) -> impl Iterator<Item = Subscription> + '_ {
        self.upstream.values().map(|u| u.subscription)
    }
}
