//! Options a consumer gives when it subscribes, as the dispatcher sees them.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A Broadcast selector: which events this subscription wants. Rejected events
/// do not consume its demand.
pub type Selector<T> = Arc<dyn Fn(&T) -> bool + Send + Sync>;

/// Names a partition of the Partition dispatcher: by index (`0..count`) or by
/// name (for named partitions).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PartitionKey {
    /// Partition `i` of a dispatcher created with a partition count.
    Index(usize),
    /// A named partition.
    Name(String),
}

impl fmt::Display for PartitionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartitionKey::Index(i) => write!(f, "{i}"),
            PartitionKey::Name(n) => write!(f, "{n:?}"),
        }
    }
}

impl From<usize> for PartitionKey {
    fn from(i: usize) -> Self {
        PartitionKey::Index(i)
    }
}

impl From<&str> for PartitionKey {
    fn from(n: &str) -> Self {
        PartitionKey::Name(n.to_owned())
    }
}

impl From<String> for PartitionKey {
    fn from(n: String) -> Self {
        PartitionKey::Name(n)
    }
}

/// The subscription options a dispatcher receives (GenStage passes the whole
/// keyword list; the ones dispatchers use are typed here, the rest are in
/// [`extra`](Self::extra)).
pub struct SubscriptionOptions<T> {
    /// The consumer's `max_demand` for this subscription.
    pub max_demand: usize,
    /// The consumer's `min_demand` for this subscription.
    pub min_demand: usize,
    /// Partition dispatcher: which partition this consumer takes.
    pub partition: Option<PartitionKey>,
    /// Broadcast dispatcher: which events this consumer wants.
    pub selector: Option<Selector<T>>,
    /// Any further options, handed through untouched (to the producer's
    /// `handle_subscribe` and to dispatcher plugins).
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl<T> SubscriptionOptions<T> {
    /// Options with the given demand bounds and nothing else.
    pub fn new(max_demand: usize, min_demand: usize) -> Self {
        Self {
            max_demand,
            min_demand,
            partition: None,
            selector: None,
            extra: BTreeMap::new(),
        }
    }

    /// Set the partition.
    pub fn partition(mut self, partition: impl Into<PartitionKey>) -> Self {
        self.partition = Some(partition.into());
        self
    }

    /// Set the selector.
    pub fn selector(mut self, selector: impl Fn(&T) -> bool + Send + Sync + 'static) -> Self {
        self.selector = Some(Arc::new(selector));
        self
    }

    /// Add an extra option.
    pub fn extra(mut self, key: impl Into<String>, value: impl Into<serde_json::Value>) -> Self {
        self.extra.insert(key.into(), value.into());
        self
    }
}

impl<T> Default for SubscriptionOptions<T> {
    /// GenStage's defaults: `max_demand` 1000, `min_demand` 500.
    fn default() -> Self {
        Self::new(1000, 500)
    }
}

impl<T> Clone for SubscriptionOptions<T> {
    fn clone(&self) -> Self {
        Self {
            max_demand: self.max_demand,
            min_demand: self.min_demand,
            partition: self.partition.clone(),
            selector: self.selector.clone(),
            extra: self.extra.clone(),
        }
    }
}

impl<T> fmt::Debug for SubscriptionOptions<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubscriptionOptions")
            .field("max_demand", &self.max_demand)
            .field("min_demand", &self.min_demand)
            .field("partition", &self.partition)
            .field("selector", &self.selector.as_ref().map(|_| "<fn>"))
            .field("extra", &self.extra)
            .finish()
    }
}
