//! A consumer that runs one task per event (GenStage's ConsumerSupervisor).

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::ids::IdMap;
use crate::{
    AsProducer, Cancellation, Consumer, ConsumerContext, ConsumerDemand, ConsumerOptions,
    ConsumerStage, Error, Noreply, ProducerRef, Reply, ReplyTo, StageRef, StopReason,
    SubscribeOptions, Subscription, SubscriptionId,
};

/// Which failed tasks a [`ConsumerSupervisor`] runs again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Restart {
    /// Never: a failed task is logged and its slot freed (default).
    #[default]
    Temporary,
    /// A task that returns `Err` or panics runs again with the same event,
    /// within the restart limit. Its slot is freed only when it succeeds.
    Transient,
}

/// A task finished; sent by the task itself to its supervisor.
#[derive(Debug)]
pub struct ChildExit {
    child: u64,
    outcome: Result<(), String>,
}

/// A [`ConsumerSupervisor`] request: how many tasks are running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountChildren;

struct ProducerDemand {
    /// Tasks running for this producer.
    count: usize,
    /// Finished tasks not yet asked for again.
    pending: usize,
    min: usize,
    max: usize,
}

struct Child<T> {
    subscription: SubscriptionId,
    /// Kept for a transient restart.
    event: Option<T>,
    handle: AbortHandle,
}

/// A consumer that starts one tokio task per event (GenStage's
/// `ConsumerSupervisor`), with at most `max_demand` tasks running per
/// producer: it asks `max_demand` on subscribe (manual demand) and asks
/// again for the finished ones once at least `min_demand` have finished.
///
/// Failed tasks (`Err` or panic) are logged; with [`Restart::Transient`]
/// they run again with the same event, and more than `max_restarts` restarts
/// within `max_seconds` stop the supervisor with `Shutdown`. Stopping the
/// supervisor aborts its tasks.
///
/// ```
/// use gen_stage::{CancelMode, ConsumerSupervisor, SubscribeOptions};
/// use tokio::sync::mpsc;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), gen_stage::Error> {
/// let (done, mut finished) = mpsc::unbounded_channel();
/// let jobs = gen_stage::from_iter(1..=10u64).await?;
/// let _supervisor = ConsumerSupervisor::new(move |n: u64| {
///     let done = done.clone();
///     async move {
///         // One task per event, at most 4 at a time.
///         let _ = done.send(n * n);
///         Ok::<(), std::convert::Infallible>(())
///     }
/// })
/// // Transient: the supervisor outlives the producer's normal stop (a
/// // permanent subscription would stop it, aborting unfinished tasks).
/// .subscribe_to(&jobs, SubscribeOptions::new().max_demand(4).cancel(CancelMode::Transient))
/// .start()
/// .await?;
/// let mut sum = 0;
/// for _ in 0..10 {
///     sum += finished.recv().await.expect("ten tasks");
/// }
/// assert_eq!(sum, 385);
/// # Ok(())
/// # }
/// ```
pub struct ConsumerSupervisor<T, F> {
    child: F,
    restart: Restart,
    max_restarts: usize,
    max_seconds: Duration,
    subscribe_to: Vec<(ProducerRef<T>, SubscribeOptions<T>)>,
    producers: IdMap<SubscriptionId, ProducerDemand>,
    children: HashMap<u64, Child<T>>,
    next_child: u64,
    /// Restart times, in whole seconds since `clock` (as OTP counts them).
    restarts: VecDeque<u64>,
    clock: Instant,
}

impl<T, F, Fut, E> ConsumerSupervisor<T, F>
where
    T: Clone + Send + 'static,
    F: Fn(T) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: fmt::Display + Send + 'static,
{
    /// A supervisor running `child(event)` for each event; temporary
    /// restarts, at most 3 restarts in 5 seconds (GenStage's defaults).
    pub fn new(child: F) -> Self {
        Self {
            child,
            restart: Restart::Temporary,
            max_restarts: 3,
            max_seconds: Duration::from_secs(5),
            subscribe_to: Vec::new(),
            producers: IdMap::default(),
            children: HashMap::new(),
            next_child: 0,
            restarts: VecDeque::new(),
            clock: Instant::now(),
        }
    }

    /// Which failed tasks run again.
    pub fn restart(mut self, restart: Restart) -> Self {
        self.restart = restart;
        self
    }

    /// At most this many restarts within [`max_seconds`](Self::max_seconds).
    pub fn max_restarts(mut self, max_restarts: usize) -> Self {
        self.max_restarts = max_restarts;
        self
    }

    /// The window for [`max_restarts`](Self::max_restarts), counted in whole
    /// seconds as OTP does: with zero, the restarts within the same second
    /// count.
    pub fn max_seconds(mut self, window: Duration) -> Self {
        self.max_seconds = window;
        self
    }

    /// Subscribe to `producer` when started.
    pub fn subscribe_to(
        mut self,
        producer: &impl AsProducer<T>,
        options: SubscribeOptions<T>,
    ) -> Self {
        self.subscribe_to.push((producer.producer_ref(), options));
        self
    }

    /// Start the supervisor as a consumer stage.
    pub async fn start(self) -> Result<StageRef<ConsumerStage<Self>>, Error> {
        crate::start_consumer(self).await
    }

    fn spawn_child(
        &mut self,
        subscription: SubscriptionId,
        event: T,
        me: StageRef<ConsumerStage<Self>>,
    ) {
        let id = self.next_child;
        self.next_child += 1;
        let keep = match self.restart {
            Restart::Transient => Some(event.clone()),
            Restart::Temporary => None,
        };
        let work = (self.child)(event);
        let handle = tokio::spawn(async move {
            let outcome = match AssertUnwindSafe(work).catch_unwind().await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(error)) => Err(error.to_string()),
                Err(panic) => Err(StopReason::from_panic(&*panic).to_string()),
            };
            let _ = me.send_info(ChildExit { child: id, outcome });
        });
        self.children.insert(
            id,
            Child {
                subscription,
                event: keep,
                handle: handle.abort_handle(),
            },
        );
    }

    /// A task is done for good: free its slot, and ask again once
    /// `min_demand` slots are free (GenStage's `maybe_ask`).
    fn child_done(&mut self, subscription: SubscriptionId, ctx: &mut ConsumerContext<'_, Self>) {
        if let Some(demand) = self.producers.get_mut(&subscription) {
            demand.count = demand.count.saturating_sub(1);
            demand.pending += 1;
            if demand.pending >= demand.min.max(1) {
                let _ = ctx.ask(subscription, demand.pending);
                demand.pending = 0;
            }
        }
    }

    /// Records a restart; `false` once the limit is exceeded.
    fn add_restart(&mut self) -> bool {
        let now = self.clock.elapsed().as_secs();
        let period = self.max_seconds.as_secs();
        self.restarts.push_back(now);
        while let Some(&oldest) = self.restarts.front() {
            if now > oldest + period {
                self.restarts.pop_front();
            } else {
                break;
            }
        }
        self.restarts.len() <= self.max_restarts
    }
}

impl<T, F, Fut, E> Consumer for ConsumerSupervisor<T, F>
where
    T: Clone + Send + 'static,
    F: Fn(T) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: fmt::Display + Send + 'static,
{
    type Event = T;
    type Call = CountChildren;
    type Reply = usize;
    type Cast = ();
    type Info = ChildExit;

    async fn init(
        &mut self,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Result<ConsumerOptions<T>, StopReason> {
        let mut options = ConsumerOptions::new();
        for (producer, subscribe) in self.subscribe_to.drain(..) {
            options = options.subscribe_to(&producer, subscribe);
        }
        Ok(options)
    }

    async fn handle_subscribe(
        &mut self,
        subscription: Subscription,
        options: &SubscribeOptions<T>,
        ctx: &mut ConsumerContext<'_, Self>,
    ) -> Result<ConsumerDemand, StopReason> {
        let max = options.get_max_demand();
        let _ = ctx.ask(subscription.id, max);
        self.producers.insert(
            subscription.id,
            ProducerDemand {
                count: 0,
                pending: 0,
                min: options.get_min_demand(),
                max,
            },
        );
        Ok(ConsumerDemand::Manual)
    }

    async fn handle_events(
        &mut self,
        events: Vec<T>,
        from: Subscription,
        ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        let Some(me) = ctx.stage_ref() else {
            return Noreply::none();
        };
        let started = events.len();
        for event in events {
            self.spawn_child(from.id, event, me.clone());
        }
        if let Some(demand) = self.producers.get_mut(&from.id) {
            if demand.count + started > demand.max {
                tracing::error!(
                    subscription = %from.id,
                    excess = demand.count + started - demand.max,
                    "consumer supervisor has received events in excess"
                );
            }
            demand.count += started;
        }
        Noreply::none()
    }

    async fn handle_cancel(
        &mut self,
        _cancellation: Cancellation,
        subscription: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        self.producers.remove(&subscription.id);
        Noreply::none()
    }

    async fn handle_call(
        &mut self,
        _request: CountChildren,
        _from: ReplyTo<usize>,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Reply<usize> {
        Reply::reply(self.children.len())
    }

    async fn handle_info(
        &mut self,
        exit: ChildExit,
        ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        let Some(child) = self.children.remove(&exit.child) else {
            return Noreply::none();
        };
        let error = match exit.outcome {
            Ok(()) => {
                self.child_done(child.subscription, ctx);
                return Noreply::none();
            }
            Err(error) => error,
        };
        match (self.restart, child.event) {
            (Restart::Transient, Some(event)) => {
                if !self.add_restart() {
                    tracing::error!(
                        child = exit.child,
                        %error,
                        max_restarts = self.max_restarts,
                        "consumer supervisor reached its maximum restart intensity; shutting down"
                    );
                    self.child_done(child.subscription, ctx);
                    return Noreply::Stop(StopReason::Shutdown);
                }
                tracing::warn!(child = exit.child, %error, "child failed; restarting it");
                match ctx.stage_ref() {
                    Some(me) => self.spawn_child(child.subscription, event, me),
                    None => self.child_done(child.subscription, ctx),
                }
            }
            _ => {
                tracing::warn!(child = exit.child, %error, "child failed");
                self.child_done(child.subscription, ctx);
            }
        }
        Noreply::none()
    }

    async fn terminate(&mut self, _reason: &StopReason, _ctx: &mut ConsumerContext<'_, Self>) {
        for (_, child) in self.children.drain() {
            child.handle.abort();
        }
    }
}

impl<T, F> fmt::Debug for ConsumerSupervisor<T, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConsumerSupervisor")
            .field("restart", &self.restart)
            .field("max_restarts", &self.max_restarts)
            .field("max_seconds", &self.max_seconds)
            .field("children", &self.children.len())
            .finish()
    }
}
