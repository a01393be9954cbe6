//! A consumer that runs one task per event (GenStage's ConsumerSupervisor).

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::oneshot;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::handle::answer;
use crate::ids::IdMap;
use crate::{
    AsProducer, Cancellation, Consumer, ConsumerContext, ConsumerDemand, ConsumerHandle,
    ConsumerOptions, DEFAULT_TIMEOUT, Error, Msgs, Noreply, ProducerRef, Reply, ReplyTo,
    StopReason, SubscribeOptions, Subscription, SubscriptionId,
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
    child: ChildId,
    outcome: Result<(), String>,
}

/// A [`ConsumerSupervisor`] request: how many tasks are running.
///
/// `supervisor.call(CountChildren, timeout)` answers the number of children
/// (a plain `usize`); [`count_children`](crate::StageRef::count_children) answers
/// the counts as Elixir's `count_children/1` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountChildren;

/// A child of a [`ConsumerSupervisor`]: one task, started for one event
/// (Elixir identifies it by its pid). Never reused: a task restarted by
/// [`Restart::Transient`] is a new child with a new id, as a restarted
/// process has a new pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChildId(pub u64);

impl fmt::Display for ChildId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "child#{}", self.0)
    }
}

/// What a child is (Elixir's `:worker | :supervisor`). A
/// [`ConsumerSupervisor`]'s children are tasks: always workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ChildType {
    /// A task doing the work for one event.
    Worker,
}

/// One child, as [`which_children`](crate::StageRef::which_children) lists it
/// (Elixir's `{id, pid, type, modules}`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChildInfo<T> {
    /// The child (Elixir's pid; its `id` is always `:undefined` in a
    /// ConsumerSupervisor).
    pub id: ChildId,
    /// Its task is still running. `false` for a task that has finished but
    /// whose exit the supervisor has not handled yet.
    pub alive: bool,
    /// Always [`ChildType::Worker`].
    pub child_type: ChildType,
    /// The subscription whose event started it.
    pub subscription: SubscriptionId,
    /// The event it was started for, when the supervisor keeps it: with
    /// [`Restart::Transient`] (for a restart); `None` with
    /// [`Restart::Temporary`], which hands the event to the task and keeps
    /// nothing (Elixir keeps the arguments of non-temporary children only).
    pub event: Option<T>,
    /// The type name of the function that starts children (Elixir's
    /// `modules`).
    pub function: &'static str,
}

/// The children of a [`ConsumerSupervisor`], counted as Elixir's
/// `count_children/1` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ChildrenCount {
    /// Child specifications: always 1 (the function that starts a task per
    /// event).
    pub specs: usize,
    /// Children whose task is still running.
    pub active: usize,
    /// Children that are supervisors: always 0.
    pub supervisors: usize,
    /// Children that are workers: every child the supervisor holds.
    pub workers: usize,
}

/// A message to a [`ConsumerSupervisor`]'s `handle_info`: a child's exit, or
/// a request from [`which_children`](crate::StageRef::which_children),
/// [`count_children`](crate::StageRef::count_children) or
/// [`terminate_child`](crate::StageRef::terminate_child). Only the supervisor and
/// its children make them.
pub struct SupervisorInfo<T>(Request<T>);

enum Request<T> {
    Exit(ChildExit),
    WhichChildren(oneshot::Sender<Vec<ChildInfo<T>>>),
    CountChildren(oneshot::Sender<ChildrenCount>),
    TerminateChild(ChildId, oneshot::Sender<Result<(), Error>>),
}

impl<T> fmt::Debug for SupervisorInfo<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Request::Exit(exit) => f.debug_tuple("Exit").field(exit).finish(),
            Request::WhichChildren(_) => f.write_str("WhichChildren"),
            Request::CountChildren(_) => f.write_str("CountChildren"),
            Request::TerminateChild(child, _) => {
                f.debug_tuple("TerminateChild").field(child).finish()
            }
        }
    }
}

/// A [`ConsumerSupervisor`]'s messages: calls of [`CountChildren`],
/// answered by the number of children, and [`SupervisorInfo`]s.
pub type SupervisorMessages<T> = Msgs<CountChildren, usize, (), SupervisorInfo<T>>;

/// The handle of a running [`ConsumerSupervisor`].
pub type SupervisorHandle<T, F> = ConsumerHandle<ConsumerSupervisor<T, F>>;

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
/// Its handle lists its children ([`which_children`](crate::StageRef::which_children)),
/// counts them ([`count_children`](crate::StageRef::count_children)) and stops one
/// ([`terminate_child`](crate::StageRef::terminate_child)), as Elixir's
/// `ConsumerSupervisor` functions of the same names do.
///
/// ```
/// use weir_gen_stage::{CancelMode, ConsumerSupervisor, SubscribeOptions};
/// use tokio::sync::mpsc;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), weir_gen_stage::Error> {
/// let (done, mut finished) = mpsc::unbounded_channel();
/// let jobs = weir_gen_stage::from_iter(1..=10u64).await?;
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
    children: HashMap<ChildId, Child<T>>,
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
    pub async fn start(self) -> Result<SupervisorHandle<T, F>, Error> {
        crate::start_consumer(self).await
    }

    fn spawn_child(&mut self, subscription: SubscriptionId, event: T, me: SupervisorHandle<T, F>) {
        let id = ChildId(self.next_child);
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
            let _ = me.send_info(SupervisorInfo(Request::Exit(ChildExit {
                child: id,
                outcome,
            })));
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

    /// The children, in the order they were started.
    fn which_children(&self) -> Vec<ChildInfo<T>> {
        let mut children: Vec<ChildInfo<T>> = self
            .children
            .iter()
            .map(|(&id, child)| ChildInfo {
                id,
                alive: !child.handle.is_finished(),
                child_type: ChildType::Worker,
                subscription: child.subscription,
                event: child.event.clone(),
                function: std::any::type_name::<F>(),
            })
            .collect();
        children.sort_by_key(|child| child.id);
        children
    }

    fn count_children(&self) -> ChildrenCount {
        ChildrenCount {
            specs: 1,
            active: self
                .children
                .values()
                .filter(|child| !child.handle.is_finished())
                .count(),
            supervisors: 0,
            workers: self.children.len(),
        }
    }

    /// Stops a child's task; its slot is freed as when a child exits, so
    /// its demand goes back to the producer (Elixir's `terminate_child/2`).
    /// A transient child is not restarted.
    fn terminate_child(
        &mut self,
        id: ChildId,
        ctx: &mut ConsumerContext<'_, Self>,
    ) -> Result<(), Error> {
        let Some(child) = self.children.remove(&id) else {
            return Err(Error::UnknownChild {
                stage: ctx.id(),
                child: id,
            });
        };
        child.handle.abort();
        tracing::debug!(child = %id, "child terminated");
        self.child_done(child.subscription, ctx);
        Ok(())
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
    type Messages = SupervisorMessages<T>;
    type Event = T;

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
        info: SupervisorInfo<T>,
        ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        let exit = match info.0 {
            Request::Exit(exit) => exit,
            Request::WhichChildren(reply) => {
                let _ = reply.send(self.which_children());
                return Noreply::none();
            }
            Request::CountChildren(reply) => {
                let _ = reply.send(self.count_children());
                return Noreply::none();
            }
            Request::TerminateChild(child, reply) => {
                let _ = reply.send(self.terminate_child(child, ctx));
                return Noreply::none();
            }
        };
        // A child terminated by `terminate_child` is gone: its exit, if it
        // sent one before it was aborted, finds nothing.
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
                        child = %exit.child,
                        %error,
                        max_restarts = self.max_restarts,
                        "consumer supervisor reached its maximum restart intensity; shutting down"
                    );
                    self.child_done(child.subscription, ctx);
                    return Noreply::Stop(StopReason::Shutdown);
                }
                tracing::warn!(child = %exit.child, %error, "child failed; restarting it");
                match ctx.stage_ref() {
                    Some(me) => self.spawn_child(child.subscription, event, me),
                    None => self.child_done(child.subscription, ctx),
                }
            }
            _ => {
                tracing::warn!(child = %exit.child, %error, "child failed");
                self.child_done(child.subscription, ctx);
            }
        }
        Noreply::none()
    }

    fn in_flight(&self) -> usize {
        self.children.len()
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

impl<T, F, Fut, E> SupervisorHandle<T, F>
where
    T: Clone + Send + 'static,
    F: Fn(T) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: fmt::Display + Send + 'static,
{
    async fn supervisor_request<A>(
        &self,
        request: impl FnOnce(oneshot::Sender<A>) -> Request<T>,
    ) -> Result<A, Error> {
        let (tx, rx) = oneshot::channel();
        self.send_info(SupervisorInfo(request(tx)))?;
        answer(self.shared(), rx, DEFAULT_TIMEOUT).await
    }

    /// The supervisor's children, oldest first (Elixir's
    /// `ConsumerSupervisor.which_children/1`). Answered by the supervisor
    /// between two callbacks, like [`status`](crate::StageRef::status).
    pub async fn which_children(&self) -> Result<Vec<ChildInfo<T>>, Error> {
        self.supervisor_request(Request::WhichChildren).await
    }

    /// The supervisor's children counted as Elixir's
    /// `ConsumerSupervisor.count_children/1` does: one spec, the children
    /// still running (`active`), and every child as a worker.
    pub async fn count_children(&self) -> Result<ChildrenCount, Error> {
        self.supervisor_request(Request::CountChildren).await
    }

    /// Stops `child`'s task (Elixir's `ConsumerSupervisor.terminate_child/2`):
    /// it is aborted, not restarted, and its slot is freed as when a child
    /// exits, so its demand goes back to the producer (asked for once
    /// `min_demand` slots are free). [`Error::UnknownChild`] if the
    /// supervisor has no such child (it has finished, or never was).
    pub async fn terminate_child(&self, child: ChildId) -> Result<(), Error> {
        self.supervisor_request(|reply| Request::TerminateChild(child, reply))
            .await?
    }
}
