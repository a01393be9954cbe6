//! What a plugin learns about a new subscription.

use abi_stable::StableAbi;
use abi_stable::std_types::RString;

use crate::{ConsumerId, SubscriptionId};

/// A consumer subscribes: who, with which demand bounds, and every other
/// subscription option as a JSON object.
///
/// `options` holds the options the host does not type (GenStage passes the
/// whole keyword list to its dispatcher): `partition` when one was given
/// (a number or a string) and every extra option, e.g.
/// `{"partition": 0, "affinity": "billing"}`. It is always a JSON object,
/// `{}` when there is nothing.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct SubscribeRequest {
    /// The new subscription.
    pub subscription: SubscriptionId,
    /// The consumer that holds it.
    pub consumer: ConsumerId,
    /// The consumer's `max_demand` for this subscription.
    pub max_demand: u64,
    /// The consumer's `min_demand` for this subscription.
    pub min_demand: u64,
    /// The remaining subscription options, as a JSON object.
    pub options: RString,
}

impl SubscribeRequest {
    /// A request with the given demand bounds and no further options.
    ///
    /// ```
    /// use weir_plugin_interface::{ConsumerId, SubscribeRequest, SubscriptionId};
    ///
    /// let request = SubscribeRequest::new(SubscriptionId(1), ConsumerId(7), 10, 5);
    /// assert_eq!(request.options.as_str(), "{}");
    /// ```
    pub fn new(
        subscription: SubscriptionId,
        consumer: ConsumerId,
        max_demand: u64,
        min_demand: u64,
    ) -> Self {
        Self {
            subscription,
            consumer,
            max_demand,
            min_demand,
            options: RString::from("{}"),
        }
    }

    /// Replace the JSON options object.
    pub fn with_options(mut self, options_json: impl Into<RString>) -> Self {
        self.options = options_json.into();
        self
    }
}
