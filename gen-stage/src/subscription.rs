//! Subscription options (as the consumer gives them) and their validation.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use weir_dispatchers::{PartitionKey, Selector, SubscriptionId, SubscriptionOptions};

use crate::{Error, StageId, StopReason};

/// What a consumer does when one of its subscriptions ends (GenStage's
/// `:cancel` option).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CancelMode {
    /// The consumer stops with the same reason (default).
    #[default]
    Permanent,
    /// The consumer stops unless the reason is normal or shutdown.
    Transient,
    /// The consumer never stops because of this subscription.
    Temporary,
}

impl CancelMode {
    /// Whether a subscription in this mode ending with `reason` stops its
    /// consumer.
    ///
    /// ```
    /// use weir_gen_stage::{CancelMode, StopReason};
    ///
    /// assert!(CancelMode::Permanent.stops_consumer(&StopReason::Normal));
    /// assert!(!CancelMode::Transient.stops_consumer(&StopReason::Shutdown));
    /// assert!(CancelMode::Transient.stops_consumer(&StopReason::custom("oops")));
    /// assert!(!CancelMode::Temporary.stops_consumer(&StopReason::custom("oops")));
    /// ```
    pub fn stops_consumer(self, reason: &StopReason) -> bool {
        match self {
            CancelMode::Permanent => true,
            CancelMode::Transient => !reason.is_transient_shutdown(),
            CancelMode::Temporary => false,
        }
    }
}

/// How a consumer (or producer_consumer) asks for events on a subscription,
/// chosen by its `handle_subscribe`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConsumerDemand {
    /// The runtime asks `max_demand` on subscribe and more as batches are
    /// handled (see [`demand`](crate::demand)).
    #[default]
    Automatic,
    /// Nothing is asked automatically; each incoming message is handed over
    /// as one batch and the stage asks with
    /// [`Context::ask`](crate::Context::ask) or
    /// [`ConsumerRef::ask`](crate::ConsumerRef::ask).
    Manual,
}

/// One subscription, seen from either side (GenStage's `from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Subscription {
    /// The subscription's id.
    pub id: SubscriptionId,
    /// The producer side.
    pub producer: StageId,
    /// The consumer side.
    pub consumer: StageId,
}

impl fmt::Display for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} -> {})", self.id, self.producer, self.consumer)
    }
}

/// The options a consumer subscribes with (GenStage's `sync_subscribe`
/// options): demand bounds, cancel mode, and what the producer's dispatcher
/// needs (`partition`, `selector`, extra options).
///
/// ```
/// use weir_gen_stage::{CancelMode, SubscribeOptions};
///
/// let options = SubscribeOptions::<u64>::new()
///     .max_demand(100)
///     .cancel(CancelMode::Transient)
///     .extra("tag", "metrics");
/// assert_eq!(options.get_max_demand(), 100);
/// assert_eq!(options.get_min_demand(), 50); // max_demand / 2 unless set
/// assert!(options.validate().is_ok());
///
/// let error = SubscribeOptions::<u64>::new().min_demand(2000).validate().unwrap_err();
/// assert_eq!(
///     error.to_string(),
///     "invalid option `min_demand`: expected a value equal to or less than 999, got: 2000"
/// );
/// ```
pub struct SubscribeOptions<T> {
    max_demand: usize,
    min_demand: Option<usize>,
    cancel: CancelMode,
    partition: Option<PartitionKey>,
    selector: Option<Selector<T>>,
    extra: BTreeMap<String, serde_json::Value>,
}

impl<T> SubscribeOptions<T> {
    /// GenStage's defaults: `max_demand` 1000, `min_demand` half of it,
    /// `Permanent`.
    pub fn new() -> Self {
        Self {
            max_demand: 1000,
            min_demand: None,
            cancel: CancelMode::Permanent,
            partition: None,
            selector: None,
            extra: BTreeMap::new(),
        }
    }

    /// The most events asked and not received at any time (at least 1).
    pub fn max_demand(mut self, max_demand: usize) -> Self {
        self.max_demand = max_demand;
        self
    }

    /// Ask again when the outstanding demand falls to this (below
    /// `max_demand`; default `max_demand / 2`).
    pub fn min_demand(mut self, min_demand: usize) -> Self {
        self.min_demand = Some(min_demand);
        self
    }

    /// What the consumer does when the subscription ends.
    pub fn cancel(mut self, cancel: CancelMode) -> Self {
        self.cancel = cancel;
        self
    }

    /// Partition dispatcher: the partition to consume.
    pub fn partition(mut self, partition: impl Into<PartitionKey>) -> Self {
        self.partition = Some(partition.into());
        self
    }

    /// Broadcast dispatcher: only the events this accepts.
    pub fn selector(mut self, selector: impl Fn(&T) -> bool + Send + Sync + 'static) -> Self {
        self.selector = Some(Arc::new(selector));
        self
    }

    /// Any further option, handed to the producer's `handle_subscribe` and
    /// its dispatcher untouched.
    pub fn extra(mut self, key: impl Into<String>, value: impl Into<serde_json::Value>) -> Self {
        self.extra.insert(key.into(), value.into());
        self
    }

    /// The `max_demand`.
    pub fn get_max_demand(&self) -> usize {
        self.max_demand
    }

    /// The `min_demand`: as set, or `max_demand / 2`.
    pub fn get_min_demand(&self) -> usize {
        self.min_demand.unwrap_or(self.max_demand / 2)
    }

    /// The cancel mode.
    pub fn get_cancel(&self) -> CancelMode {
        self.cancel
    }

    /// The partition, if any.
    pub fn get_partition(&self) -> Option<&PartitionKey> {
        self.partition.as_ref()
    }

    /// The extra options.
    pub fn get_extra(&self) -> &BTreeMap<String, serde_json::Value> {
        &self.extra
    }

    /// Checks the demand bounds as GenStage does: `max_demand` at least 1,
    /// `min_demand` at most `max_demand - 1`.
    pub fn validate(&self) -> Result<(), Error> {
        if self.max_demand < 1 {
            return Err(Error::InvalidOption {
                option: "max_demand",
                value: self.max_demand.to_string(),
                expected: "a value equal to or greater than 1".to_owned(),
            });
        }
        let min = self.get_min_demand();
        if min > self.max_demand - 1 {
            return Err(Error::InvalidOption {
                option: "min_demand",
                value: min.to_string(),
                expected: format!("a value equal to or less than {}", self.max_demand - 1),
            });
        }
        Ok(())
    }

    /// The options as the producer and its dispatcher see them.
    pub fn to_subscription_options(&self) -> SubscriptionOptions<T> {
        SubscriptionOptions {
            max_demand: self.max_demand,
            min_demand: self.get_min_demand(),
            partition: self.partition.clone(),
            selector: self.selector.clone(),
            extra: self.extra.clone(),
        }
    }
}

impl<T> Default for SubscribeOptions<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Clone for SubscribeOptions<T> {
    fn clone(&self) -> Self {
        Self {
            max_demand: self.max_demand,
            min_demand: self.min_demand,
            cancel: self.cancel,
            partition: self.partition.clone(),
            selector: self.selector.clone(),
            extra: self.extra.clone(),
        }
    }
}

impl<T> fmt::Debug for SubscribeOptions<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubscribeOptions")
            .field("max_demand", &self.max_demand)
            .field("min_demand", &self.get_min_demand())
            .field("cancel", &self.cancel)
            .field("partition", &self.partition)
            .field("selector", &self.selector.as_ref().map(|_| "<fn>"))
            .field("extra", &self.extra)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_1000_and_500_permanent() {
        let options = SubscribeOptions::<()>::new();
        assert_eq!(options.get_max_demand(), 1000);
        assert_eq!(options.get_min_demand(), 500);
        assert_eq!(options.get_cancel(), CancelMode::Permanent);
    }

    #[test]
    fn max_demand_zero_is_refused_naming_option_and_value() {
        let error = SubscribeOptions::<()>::new().max_demand(0).validate();
        assert_eq!(
            error.map_err(|e| e.to_string()),
            Err(
                "invalid option `max_demand`: expected a value equal to or greater than 1, got: 0"
                    .to_owned()
            )
        );
    }

    #[test]
    fn min_demand_equal_to_max_demand_is_refused() {
        let error = SubscribeOptions::<()>::new()
            .max_demand(10)
            .min_demand(10)
            .validate();
        assert!(matches!(
            error,
            Err(Error::InvalidOption {
                option: "min_demand",
                ..
            })
        ));
    }

    #[test]
    fn max_demand_one_defaults_min_demand_to_zero() {
        let options = SubscribeOptions::<()>::new().max_demand(1);
        assert_eq!(options.get_min_demand(), 0);
        assert!(options.validate().is_ok());
    }

    #[test]
    fn dispatcher_sees_resolved_demand_and_extras() {
        let options = SubscribeOptions::<u8>::new()
            .max_demand(10)
            .partition(3)
            .extra("k", 1)
            .to_subscription_options();
        assert_eq!((options.max_demand, options.min_demand), (10, 5));
        assert_eq!(options.partition, Some(PartitionKey::Index(3)));
        assert_eq!(options.extra.get("k"), Some(&serde_json::Value::from(1)));
    }
}
