//! What a plugin answers: routing runs, upstream demand, warnings and released infos.

use abi_stable::StableAbi;
use abi_stable::std_types::{ROption, RString, RVec};

use crate::{InfoId, SubscriptionId};

/// A run of consecutive events in a dispatch: the next `count` events of the
/// batch go to `to`, or stay with the host (`to` is `RNone`: leftover events,
/// which the host buffers in order).
#[repr(C)]
#[derive(StableAbi, Copy, Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// Where the events go: a subscription, or `RNone` to keep them.
    pub to: ROption<SubscriptionId>,
    /// How many consecutive events (never 0 when built through [`Decision`]).
    pub count: u64,
}

/// A condition the host should log (plugins do no I/O of their own).
#[repr(u8)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub enum PluginWarning {
    /// A consumer asked for more than the dispatcher expects (GenStage's
    /// "expects a maximum demand of ..." warning).
    AskLargerThanMaxDemand {
        /// The subscription that asked.
        subscription: SubscriptionId,
        /// What it asked.
        asked: u64,
        /// The maximum the dispatcher expects.
        expected: u64,
    },
    /// Anything else worth a warning, as text.
    Message {
        /// The text to log.
        text: RString,
    },
}

/// A plugin's answer to one call.
///
/// The host hands the same `Decision` to every call, cleared, so its vectors
/// keep their capacity and a steady-state dispatch allocates nothing.
///
/// - `runs` (only from `dispatch`): which consecutive events of the batch go
///   where, in order. Events after the last run are leftover too, so a
///   dispatcher that places the first 7 of 10 events only pushes runs
///   covering 7.
/// - `upstream_demand`: how many more events the producer should obtain.
/// - `warnings`: for the host's log.
/// - `released_infos` (only from `info`): info messages the host may deliver
///   now.
///
/// # Example
///
/// ```
/// use weir_plugin_interface::{Decision, SubscriptionId};
///
/// let mut decision = Decision::default();
/// decision.send(SubscriptionId(1), 3);
/// decision.send(SubscriptionId(1), 2); // merged with the run before
/// decision.keep(1);
/// decision.send(SubscriptionId(2), 4);
/// assert_eq!(decision.runs.len(), 3);
/// assert_eq!(decision.routed(), 10);
/// assert_eq!(decision.kept(), 1);
/// ```
#[repr(C)]
#[derive(StableAbi, Clone, Debug, Default, PartialEq)]
pub struct Decision {
    /// Routing of the dispatched batch, in order.
    pub runs: RVec<Run>,
    /// Upstream demand: how many more events the producer should obtain.
    pub upstream_demand: u64,
    /// Warnings for the host's log, in order.
    pub warnings: RVec<PluginWarning>,
    /// Info messages released by this call, in order.
    pub released_infos: RVec<InfoId>,
}

impl Decision {
    /// Send the next `count` events to `to`. Merges with the previous run when
    /// it goes to the same subscription; `count == 0` is ignored.
    #[inline]
    pub fn send(&mut self, to: SubscriptionId, count: u64) {
        self.push_run(ROption::RSome(to), count);
    }

    /// Keep the next `count` events on the host (leftover, buffered in order).
    /// `count == 0` is ignored.
    #[inline]
    pub fn keep(&mut self, count: u64) {
        self.push_run(ROption::RNone, count);
    }

    /// Add `n` to the upstream demand of this call.
    #[inline]
    pub fn ask_upstream(&mut self, n: u64) {
        self.upstream_demand = self.upstream_demand.saturating_add(n);
    }

    /// Report a warning.
    #[inline]
    pub fn warn(&mut self, warning: PluginWarning) {
        self.warnings.push(warning);
    }

    /// Release an info message now.
    #[inline]
    pub fn release(&mut self, info: InfoId) {
        self.released_infos.push(info);
    }

    /// How many events the runs cover (sent and kept).
    pub fn routed(&self) -> u64 {
        self.runs.iter().map(|run| run.count).sum()
    }

    /// How many events the runs explicitly keep on the host.
    pub fn kept(&self) -> u64 {
        self.runs
            .iter()
            .filter(|run| run.to.is_none())
            .map(|run| run.count)
            .sum()
    }

    /// Empty everything, keeping the capacity.
    #[inline]
    pub fn clear(&mut self) {
        self.runs.clear();
        self.upstream_demand = 0;
        self.warnings.clear();
        self.released_infos.clear();
    }

    #[inline]
    fn push_run(&mut self, to: ROption<SubscriptionId>, count: u64) {
        if count == 0 {
            return;
        }
        if let Some(last) = self.runs.last_mut()
            && last.to == to
        {
            last.count += count;
            return;
        }
        self.runs.push(Run { to, count });
    }
}
