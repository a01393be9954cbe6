//! Stage groups: several stages run by one tokio task.
//!
//! A stage started with [`start_producer`](crate::start_producer) and its
//! siblings is a tokio task of its own, and every message that finds it
//! parked wakes it through tokio's scheduler; on a multi-thread runtime that
//! wake-up often crosses to the other worker. A [`StageGroup`] runs its
//! stages inside one tokio task with a small scheduler of its own: a stage
//! of the group that wakes another only puts it on the group's ready list,
//! so a hop of a pipeline started in one group runs on the worker that is
//! running the group, and costs no trip through tokio.
//!
//! The group task polls its ready stages in the order they were woken, and
//! yields to tokio when the task's cooperative budget is spent (each
//! mailbox receive takes one unit) or after [`POLLS_PER_TURN`] stage polls,
//! so a busy group shares its worker as a busy stage does. It ends when its
//! last stage has stopped and no [`StageGroup`] handle is left.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::{Mutex, coop};

use crate::stage::{ConsumerStage, ProducerConsumerStage, ProducerStage};
use crate::{
    Consumer, ConsumerOptions, Error, Producer, ProducerConsumer, ProducerConsumerOptions,
    ProducerOptions, StageRef,
};

/// The most stage polls in one poll of the group task: a stage that wakes
/// itself without spending tokio's budget (a hand-written yield, a spin on
/// a flag) cannot keep the group from yielding to its worker's other tasks.
/// (3 under loom, so that small models reach it.)
pub(crate) const POLLS_PER_TURN: usize = if cfg!(loom) { 3 } else { 128 };

/// A stage's task, as the group holds it.
pub(crate) type StageTask = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Stages that share one tokio task.
///
/// Start stages in a group with [`StageGroup::start_producer`],
/// [`StageGroup::start_producer_consumer`] and
/// [`StageGroup::start_consumer`]. They follow the same protocol as stages
/// started on their own tasks, with the same handles and stop reasons (a
/// panic stops only the stage that panicked); what changes is where they
/// run:
///
/// - a message between two stages of a group wakes the receiver without
///   going through tokio's scheduler, on the worker that is running the
///   group (tokio may move the group task as a whole between workers, as
///   any task): a pipeline of cheap stages with small batches (low
///   `max_demand`) runs several times faster, above all on a multi-thread
///   runtime;
/// - the group's stages never run in parallel with each other: a callback
///   that computes for long holds up the whole group. Put CPU-heavy stages
///   on their own tasks (or in separate groups), and cheap ones together;
/// - they share one tokio task: one task id, one set of task-locals, one
///   cooperative budget per poll.
///
/// Stages of a group subscribe to, call and cancel stages outside it (and
/// the other way round) as usual. The group's task is spawned on the tokio
/// runtime of the first stage started in it; every stage of the group runs
/// there. Handles are cheap to clone; the group's task ends once its last
/// stage has stopped and every handle is dropped.
///
/// # Example
///
/// ```
/// use weir_gen_stage::{
///     Consumer, ConsumerContext, Noreply, Producer, ProducerContext, ProducerOptions,
///     StageGroup, StopReason, SubscribeOptions, Subscription,
/// };
///
/// struct Counter(u64);
///
/// impl Producer for Counter {
///     type Messages = ();
///     type Event = u64;
///
///     async fn init(
///         &mut self,
///         _ctx: &mut ProducerContext<'_, Self>,
///     ) -> Result<ProducerOptions<u64>, StopReason> {
///         Ok(ProducerOptions::new())
///     }
///
///     async fn handle_demand(&mut self, demand: usize, _ctx: &mut ProducerContext<'_, Self>) -> Noreply<u64> {
///         let events = (self.0..self.0 + demand as u64).collect();
///         self.0 += demand as u64;
///         Noreply::Emit(events)
///     }
/// }
///
/// /// Stops normally once it has seen `left` events.
/// struct Take {
///     left: usize,
///     seen: tokio::sync::mpsc::UnboundedSender<u64>,
/// }
///
/// impl Consumer for Take {
///     type Messages = ();
///     type Event = u64;
///
///     async fn handle_events(
///         &mut self,
///         events: Vec<u64>,
///         _from: Subscription,
///         _ctx: &mut ConsumerContext<'_, Self>,
///     ) -> Noreply {
///         for event in events.into_iter().take(self.left) {
///             let _ = self.seen.send(event);
///             self.left -= 1;
///         }
///         if self.left == 0 { Noreply::Stop(StopReason::Normal) } else { Noreply::none() }
///     }
/// }
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), weir_gen_stage::Error> {
/// let group = StageGroup::new();
/// let producer = group.start_producer(Counter(0)).await?;
/// let (seen, mut received) = tokio::sync::mpsc::unbounded_channel();
/// let consumer = group.start_consumer(Take { left: 5, seen }).await?;
/// consumer
///     .subscribe(&producer, SubscribeOptions::new().max_demand(2))
///     .await?;
/// assert_eq!(consumer.stopped().await, StopReason::Normal);
/// let mut got = Vec::new();
/// while let Some(event) = received.recv().await {
///     got.push(event);
/// }
/// assert_eq!(got, [0, 1, 2, 3, 4]);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct StageGroup {
    handle: Arc<Handle>,
}

/// Kept by every clone of a [`StageGroup`]: its drop tells the group task
/// that no stage can join any more.
struct Handle {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Set (under the lock) when a stage is started or woken from outside
    /// the running turn: the group task then takes the lock after its
    /// current pass instead of going on with its siblings' wakes alone.
    outside: AtomicBool,
}

struct State {
    /// Stages woken since the group task last looked: (slot, generation).
    ready: VecDeque<(u32, u32)>,
    /// Stages started but not yet taken in by the group task.
    inbox: Vec<StageTask>,
    /// The group task's waker while it is parked.
    waker: Option<Waker>,
    /// The group task is running or already woken: wakes need not wake it.
    busy: bool,
    /// The group task has been spawned.
    spawned: bool,
    /// The group task is gone (finished, or dropped with its runtime).
    closed: bool,
    /// Every [`StageGroup`] handle is dropped.
    orphaned: bool,
}

impl State {
    /// The group task's waker, if the task needs waking: not when it is
    /// running or already woken. Marks it woken.
    fn claim_wake(&mut self) -> Option<Waker> {
        if self.busy {
            return None;
        }
        self.busy = true;
        self.waker.take()
    }
}

impl Default for StageGroup {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for StageGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.handle.shared.state.lock();
        f.debug_struct("StageGroup")
            .field("spawned", &state.spawned)
            .field("closed", &state.closed)
            .finish_non_exhaustive()
    }
}

impl StageGroup {
    /// A new, empty group. Its task is spawned when the first stage starts
    /// in it.
    pub fn new() -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                ready: VecDeque::new(),
                inbox: Vec::new(),
                waker: None,
                busy: false,
                spawned: false,
                closed: false,
                orphaned: false,
            }),
            outside: AtomicBool::new(false),
        });
        Self {
            handle: Arc::new(Handle { shared }),
        }
    }

    /// Starts a [`Producer`] in this group and waits for its `init`, as
    /// [`start_producer`](crate::start_producer) does.
    pub async fn start_producer<P: Producer>(
        &self,
        producer: P,
    ) -> Result<StageRef<ProducerStage<P>>, Error> {
        crate::run::start_in(ProducerStage::new(producer), Some(self), None).await
    }

    /// Starts a [`ProducerConsumer`] in this group and waits for its `init`,
    /// as [`start_producer_consumer`](crate::start_producer_consumer) does.
    pub async fn start_producer_consumer<P: ProducerConsumer>(
        &self,
        stage: P,
    ) -> Result<StageRef<ProducerConsumerStage<P>>, Error> {
        crate::run::start_in(ProducerConsumerStage::new(stage), Some(self), None).await
    }

    /// Starts a [`Consumer`] in this group and waits for its `init`, as
    /// [`start_consumer`](crate::start_consumer) does.
    pub async fn start_consumer<C: Consumer>(
        &self,
        consumer: C,
    ) -> Result<StageRef<ConsumerStage<C>>, Error> {
        crate::run::start_in(ConsumerStage::new(consumer), Some(self), None).await
    }

    /// [`start_producer`](Self::start_producer) with options, as
    /// [`start_producer_with`](crate::start_producer_with) does.
    pub async fn start_producer_with<P: Producer>(
        &self,
        producer: P,
        options: ProducerOptions<P::Event>,
    ) -> Result<StageRef<ProducerStage<P>>, Error> {
        crate::run::start_in(
            ProducerStage::new(producer),
            Some(self),
            Some(options.into()),
        )
        .await
    }

    /// [`start_producer_consumer`](Self::start_producer_consumer) with
    /// options, as
    /// [`start_producer_consumer_with`](crate::start_producer_consumer_with)
    /// does.
    pub async fn start_producer_consumer_with<P: ProducerConsumer>(
        &self,
        stage: P,
        options: ProducerConsumerOptions<P::In, P::Out>,
    ) -> Result<StageRef<ProducerConsumerStage<P>>, Error> {
        crate::run::start_in(
            ProducerConsumerStage::new(stage),
            Some(self),
            Some(options.into()),
        )
        .await
    }

    /// [`start_consumer`](Self::start_consumer) with options, as
    /// [`start_consumer_with`](crate::start_consumer_with) does.
    pub async fn start_consumer_with<C: Consumer>(
        &self,
        consumer: C,
        options: ConsumerOptions<C::Event>,
    ) -> Result<StageRef<ConsumerStage<C>>, Error> {
        crate::run::start_in(
            ConsumerStage::new(consumer),
            Some(self),
            Some(options.into()),
        )
        .await
    }

    /// Hands a stage's task to the group; spawns the group task first if
    /// this is its first stage.
    pub(crate) fn spawn(&self, task: StageTask) -> Result<(), Error> {
        let shared = &self.handle.shared;
        let (spawn_on, waker) = shared.push_stage(task, || {
            tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)
        })?;
        // Spawned outside the lock: a runtime that is shutting down drops
        // the task inside `spawn`, and its drop takes the lock (it closes
        // the group and drops the inbox, so the stage's start sees it gone).
        if let Some(runtime) = spawn_on {
            runtime.spawn(GroupTask::new(shared.clone()));
        }
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(())
    }
}

impl Shared {
    /// Puts a stage's task in the inbox, under the lock. The group's first
    /// stage also gets what `first` returns (where to spawn the group task,
    /// which is then counted as running: it takes the inbox when polled);
    /// the others, the group task's waker if it must be woken.
    fn push_stage<R>(
        &self,
        task: StageTask,
        first: impl FnOnce() -> Result<R, Error>,
    ) -> Result<(Option<R>, Option<Waker>), Error> {
        let mut state = self.state.lock();
        if state.closed {
            return Err(Error::GroupClosed);
        }
        let mut spawn_on = None;
        if !state.spawned {
            spawn_on = Some(first()?);
            state.spawned = true;
            // The task about to be spawned takes the inbox when polled.
            state.busy = true;
        }
        state.inbox.push(task);
        self.outside.store(true, Ordering::Release);
        Ok((spawn_on, state.claim_wake()))
    }
}

/// For the loom models (`loom_group.rs`), which have no tokio runtime and run
/// the group task themselves.
#[cfg(all(test, loom))]
impl StageGroup {
    /// [`spawn`](Self::spawn), returning the group task to run when `task`
    /// is the group's first stage.
    pub(crate) fn spawn_in_model(
        &self,
        task: StageTask,
    ) -> Option<impl Future<Output = ()> + use<>> {
        let shared = &self.handle.shared;
        let (first, waker) = shared.push_stage(task, || Ok(())).ok()?;
        if let Some(waker) = waker {
            waker.wake();
        }
        first.map(|()| GroupTask::new(shared.clone()))
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        let waker = {
            let mut state = self.shared.state.lock();
            state.orphaned = true;
            state.claim_wake()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// The waker of one stage of the group.
struct StageWaker {
    shared: Arc<Shared>,
    slot: u32,
    generation: u32,
    /// On the ready list, or about to be: a second wake adds nothing.
    queued: AtomicBool,
}

impl Wake for StageWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.queued.swap(true, Ordering::AcqRel) {
            return;
        }
        if RUNNING.with(Cell::get) == Arc::as_ptr(&self.shared) as usize {
            // Woken by a sibling while the group task runs on this thread:
            // onto the running turn, without the lock.
            with_turn(|turn| turn.push_back((self.slot, self.generation)));
            return;
        }
        let waker = {
            let mut state = self.shared.state.lock();
            state.ready.push_back((self.slot, self.generation));
            self.shared.outside.store(true, Ordering::Release);
            state.claim_wake()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

crate::sync::const_thread_local! {
    /// The group whose task is being polled on this thread (the address of
    /// its [`Shared`]), or 0.
    static RUNNING: Cell<usize> = Cell::new(0);
    /// That group's turn: the stages to poll, in wake order. A sibling's
    /// wake lands here without taking the group's lock.
    static TURN: RefCell<VecDeque<(u32, u32)>> = RefCell::new(VecDeque::new());
}

/// [`TURN`], mutably (`LocalKey::with_borrow_mut`, spelled so that loom's
/// thread-locals have it too).
fn with_turn<R>(f: impl FnOnce(&mut VecDeque<(u32, u32)>) -> R) -> R {
    TURN.with(|turn| f(&mut turn.borrow_mut()))
}

/// [`TURN`], shared.
fn with_turn_ref<R>(f: impl FnOnce(&VecDeque<(u32, u32)>) -> R) -> R {
    TURN.with(|turn| f(&turn.borrow()))
}

/// Makes a group the running one on this thread for one poll of its task:
/// its turn moves into [`TURN`] and back out when dropped (also on a
/// panic), restoring whatever group was running before.
struct Running<'a> {
    turn: &'a mut VecDeque<(u32, u32)>,
    previous: usize,
}

impl<'a> Running<'a> {
    fn enter(shared: &Arc<Shared>, turn: &'a mut VecDeque<(u32, u32)>) -> Self {
        let previous = RUNNING.with(|running| running.replace(Arc::as_ptr(shared) as usize));
        with_turn(|running| std::mem::swap(running, turn));
        Running { turn, previous }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        with_turn(|running| std::mem::swap(running, self.turn));
        RUNNING.with(|running| running.set(self.previous));
    }
}

struct Slot {
    task: StageTask,
    waker: Waker,
    wake: Arc<StageWaker>,
}

/// The tokio task that runs a group's stages.
struct GroupTask {
    shared: Arc<Shared>,
    stages: Stages,
    /// Stages to poll in this turn, in wake order (in [`TURN`] while the
    /// task is being polled).
    turn: VecDeque<(u32, u32)>,
}

/// The group's stages, by slot.
#[derive(Default)]
struct Stages {
    slots: Vec<Option<Slot>>,
    /// Free slots, each with the generation its next stage gets: a stale
    /// wake of a stopped stage (an older generation) never polls the stage
    /// that took its slot.
    free: Vec<(u32, u32)>,
}

impl GroupTask {
    fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            stages: Stages::default(),
            turn: VecDeque::new(),
        }
    }
}

impl Stages {
    /// Gives `task` a slot; returns its (slot, generation), for the turn.
    fn admit(&mut self, shared: &Arc<Shared>, task: StageTask) -> (u32, u32) {
        let (slot, generation) = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            (u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX), 0)
        });
        let wake = Arc::new(StageWaker {
            shared: shared.clone(),
            slot,
            generation,
            queued: AtomicBool::new(true),
        });
        let waker = Waker::from(wake.clone());
        self.slots[slot as usize] = Some(Slot { task, waker, wake });
        (slot, generation)
    }

    /// Stages not yet finished.
    fn live(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Polls one stage; frees its slot once it has finished.
    fn poll(&mut self, slot: u32, generation: u32) {
        let index = slot as usize;
        let Some(stage) = self.slots.get_mut(index).and_then(Option::as_mut) else {
            return;
        };
        if stage.wake.generation != generation {
            return;
        }
        stage.wake.queued.store(false, Ordering::Release);
        let mut cx = Context::from_waker(&stage.waker);
        let polled =
            std::panic::catch_unwind(AssertUnwindSafe(|| stage.task.as_mut().poll(&mut cx)));
        let finished = match polled {
            Ok(Poll::Pending) => false,
            Ok(Poll::Ready(())) => true,
            Err(_) => {
                // The stage's own guards catch its callbacks' panics; this
                // is a panic in the runtime's code around them. The stage
                // is dropped (and so marked dead); its siblings keep going.
                tracing::error!("a stage's task panicked outside its callbacks");
                true
            }
        };
        if finished {
            let stage = self.slots[index].take();
            self.free.push((slot, generation.wrapping_add(1)));
            // Dropped here, not under the group's lock: its drop may wake
            // other stages of the group. A panicking drop (a stage's state
            // with a `Drop` that panics) must not take its siblings along.
            if std::panic::catch_unwind(AssertUnwindSafe(move || drop(stage))).is_err() {
                tracing::error!("dropping a stopped stage panicked");
            }
        }
    }
}

impl Future for GroupTask {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let GroupTask {
            shared,
            stages,
            turn,
        } = &mut *self;
        // While this guard lives, the turn is in `TURN`, where siblings'
        // wakes add to it.
        let _running = Running::enter(shared, turn);
        let mut polls = 0;
        loop {
            let admitted = {
                let mut state = shared.state.lock();
                shared.outside.store(false, Ordering::Relaxed);
                with_turn(|turn| {
                    if turn.is_empty() {
                        std::mem::swap(turn, &mut state.ready);
                    } else {
                        turn.extend(state.ready.drain(..));
                    }
                });
                let admitted = std::mem::take(&mut state.inbox);
                if with_turn_ref(VecDeque::is_empty) && admitted.is_empty() {
                    if stages.live() == 0 && state.orphaned {
                        state.closed = true;
                        return Poll::Ready(());
                    }
                    state.busy = false;
                    match &state.waker {
                        Some(waker) if waker.will_wake(cx.waker()) => {}
                        _ => state.waker = Some(cx.waker().clone()),
                    }
                    return Poll::Pending;
                }
                admitted
            };
            for task in admitted {
                let first = stages.admit(shared, task);
                with_turn(|turn| turn.push_back(first));
            }
            // Passes over the turn: each polls the stages on it when it
            // starts (their wakes of each other queue up for the next
            // pass). Between passes, wakes from outside and new stages are
            // taken in (under the lock) as soon as there are any, so
            // siblings busy with each other cannot hold them back.
            loop {
                let pass = with_turn_ref(VecDeque::len);
                if pass == 0 {
                    break;
                }
                for _ in 0..pass {
                    let Some((slot, generation)) = with_turn(VecDeque::pop_front) else {
                        break;
                    };
                    stages.poll(slot, generation);
                    polls += 1;
                    if polls >= POLLS_PER_TURN || !coop::has_budget_remaining() {
                        // Yield to the worker's other tasks; what is left
                        // of this turn runs first when tokio polls the
                        // group again.
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                }
                if shared.outside.load(Ordering::Acquire) {
                    break;
                }
            }
        }
    }
}

impl Drop for GroupTask {
    fn drop(&mut self) {
        let inbox = {
            let mut state = self.shared.state.lock();
            state.closed = true;
            state.busy = true;
            state.waker = None;
            std::mem::take(&mut state.inbox)
        };
        // Outside the lock: dropping a stage wakes its siblings, and those
        // wakes take the lock.
        drop(inbox);
        for slot in &mut self.stages.slots {
            drop(slot.take());
        }
    }
}
