//! Supervision: a stage of the pipeline that stops abnormally while the
//! pipeline runs is started again and wired to its neighbours, within a
//! restart intensity (Broadway's `max_restarts` in `max_seconds`); beyond
//! it the pipeline goes down. Whatever a stopping stage held is acked
//! failed through the hooks every stage is started with.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use weir_gen_stage::{
    AnyStage, ConsumerRef, Dispatcher, Drain, ProducerRef, StageId, StopReason, SubscribeOptions,
};

use crate::batch::Weight;
use crate::batcher::{BatchProcessor, BatcherStage};
use crate::demand::Upstreams;
use crate::handlers::{HandleBatch, HandleFailed};
use crate::metrics::{Counters, StageRole};
use crate::processor::{Processor, ProcessorSink, ProcessorStage, ProcessorState};
use crate::test_producer::{Inlet, ack_failed};
use crate::{Batch, Error, Message};

/// Broadway's defaults: 3 restarts in 5 seconds.
pub(crate) const DEFAULT_MAX_RESTARTS: usize = 3;
pub(crate) const DEFAULT_MAX_SECONDS: Duration = Duration::from_secs(5);

/// The reason a message held by a stopping stage is acked failed with.
pub(crate) fn stopped_reason(reason: &StopReason) -> String {
    format!("a stage of the pipeline stopped ({reason}) before the message was handled")
}

/// A hook that acks the messages a stage gives back failed.
pub(crate) fn fail_messages<T: 'static>() -> impl FnMut(Vec<Message<T>>, &StopReason) + Send {
    |messages, reason| {
        tracing::warn!(target: "weir_pipeline", messages = messages.len(), %reason, "a stage stopped holding messages: acked failed");
        ack_failed(messages, &stopped_reason(reason));
    }
}

/// A hook that acks the messages of the batches a stage gives back failed.
pub(crate) fn fail_batches<T: 'static>() -> impl FnMut(Vec<Batch<T>>, &StopReason) + Send {
    let mut fail = fail_messages::<T>();
    move |batches, reason| {
        let messages = batches
            .into_iter()
            .flat_map(|batch| batch.messages)
            .collect();
        fail(messages, reason);
    }
}

/// Restarts within a sliding period (an OTP supervisor's intensity).
struct Intensity {
    max_restarts: usize,
    period: Duration,
    restarts: VecDeque<Instant>,
}

impl Intensity {
    /// Count a restart now: `false` if it makes more than `max_restarts`
    /// within `period`.
    fn allow(&mut self, now: Instant) -> bool {
        while let Some(&first) = self.restarts.front() {
            if now.duration_since(first) >= self.period {
                self.restarts.pop_front();
            } else {
                break;
            }
        }
        self.restarts.push_back(now);
        self.restarts.len() <= self.max_restarts
    }
}

/// Starts a producer again (one of `producers`, or the test producer), in
/// accumulate mode: what the processors subscribe to, and the stage.
pub(crate) type RestartSource<T> = Arc<
    dyn Fn() -> Pin<
            Box<
                dyn Future<
                        Output = Result<(ProducerRef<Message<T>>, AnyStage), weir_gen_stage::Error>,
                    > + Send,
            >,
        > + Send
        + Sync,
>;

/// A producer's place in the pipeline.
pub(crate) struct SourceSlot<T> {
    /// The stage, as in `Pipeline::stages`.
    pub stage: AnyStage,
    /// What the processors subscribe to, when it is the producer itself
    /// (not a stage of the pipeline in front of it).
    pub input: Option<usize>,
    /// Its index in `Pipeline::producers`, if the pipeline started it.
    pub started: Option<usize>,
    /// `None`: not the pipeline's to start again (a producer given to
    /// `producer(&p)`).
    pub restart: Option<RestartSource<T>>,
}

/// A processor: its stage as the batchers' producer (with batchers) and as
/// its producers' consumer.
pub(crate) struct ProcessorSlot<T> {
    pub stage: AnyStage,
    pub consumer: ConsumerRef<Message<T>>,
    pub producer: Option<ProducerRef<Message<T>>>,
    pub counters: Arc<Counters>,
}

/// What a batcher stage is made from.
pub(crate) struct BatcherParams<T> {
    pub name: String,
    pub batch_size: usize,
    pub weight: Option<Weight<T>>,
    pub batch_timeout: Duration,
    pub max_demand: usize,
}

pub(crate) struct BatcherSlot<T> {
    pub stage: AnyStage,
    pub producer: ProducerRef<Batch<T>>,
    pub consumer: ConsumerRef<Message<T>>,
    pub params: BatcherParams<T>,
    pub counters: Arc<Counters>,
}

pub(crate) struct BatchProcessorSlot<T> {
    pub stage: AnyStage,
    pub consumer: ConsumerRef<Batch<T>>,
    /// Its batcher stage.
    pub batcher: usize,
    pub index: usize,
    pub handle_batch: HandleBatch<T>,
    pub counters: Arc<Counters>,
}

/// Every stage of the pipeline and how they are wired, owned by the
/// supervisor.
pub(crate) struct Wiring<T: Send + 'static> {
    pub name: Arc<str>,
    pub sources: Vec<SourceSlot<T>>,
    /// What the processors subscribe to: a producer, or the pipeline's
    /// stage in front of one.
    pub inputs: Vec<ProducerRef<Message<T>>>,
    /// The pipeline's stages in front of producers (not started again).
    pub fronts: Vec<AnyStage>,
    pub processor: Processor<T>,
    pub processors: Vec<ProcessorSlot<T>>,
    pub batchers: Vec<BatcherSlot<T>>,
    pub batch_processors: Vec<BatchProcessorSlot<T>>,
    pub handle_failed: Option<HandleFailed<T>>,
    /// Processors' `partition_by`: each subscribes to its partition.
    pub partitioned: bool,
    /// The processors' dispatcher towards the batchers.
    pub route: Arc<dyn Fn() -> Box<dyn Dispatcher<Message<T>>> + Send + Sync>,
}

/// A stage of the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Source(usize),
    Front(usize),
    Processor(usize),
    Batcher(usize),
    BatchProcessor(usize),
}

/// Stages never stop because a subscription ended (`Temporary`).
pub(crate) fn temporary<E>() -> SubscribeOptions<E> {
    SubscribeOptions::new().cancel(weir_gen_stage::CancelMode::Temporary)
}

/// A `Temporary` subscription asking `max_demand` at a time, again when
/// half is handled.
pub(crate) fn with_demand<E>(max_demand: usize) -> SubscribeOptions<E> {
    temporary()
        .max_demand(max_demand)
        .min_demand(max_demand / 2)
}

impl<T: Send + 'static> Wiring<T> {
    /// Start processor `index` and subscribe it to the inputs, after every
    /// batcher stage subscribed to it.
    pub async fn start_processor(
        &self,
        index: usize,
        counters: Arc<Counters>,
    ) -> Result<ProcessorSlot<T>, Error> {
        let state = ProcessorState::new(
            self.processor.clone(),
            index,
            Upstreams::new(counters.clone()),
        );
        let slot = if self.batchers.is_empty() {
            let sink = weir_gen_stage::start_consumer_with(
                ProcessorSink(state),
                weir_gen_stage::ConsumerOptions::new().on_unhandled(fail_messages()),
            )
            .await?;
            ProcessorSlot {
                stage: AnyStage::from(&sink),
                consumer: sink.consumer(),
                producer: None,
                counters,
            }
        } else {
            let stage = weir_gen_stage::start_producer_consumer_with(
                ProcessorStage(state),
                weir_gen_stage::ProducerConsumerOptions::new()
                    .boxed_dispatcher((self.route)())
                    .on_unhandled(fail_messages())
                    .on_undelivered(fail_messages()),
            )
            .await?;
            let several = self.batchers.len() > 1;
            for (partition, batcher) in self.batchers.iter().enumerate() {
                let mut options = with_demand(batcher.params.max_demand);
                if several {
                    options = options.partition(partition);
                }
                batcher
                    .consumer
                    .subscribe(&stage.producer(), options)
                    .await?;
            }
            ProcessorSlot {
                stage: AnyStage::from(&stage),
                consumer: stage.consumer(),
                producer: Some(stage.producer()),
                counters,
            }
        };
        for input in &self.inputs {
            self.subscribe_processor(&slot.consumer, index, input)
                .await?;
        }
        Ok(slot)
    }

    async fn subscribe_processor(
        &self,
        processor: &ConsumerRef<Message<T>>,
        index: usize,
        input: &ProducerRef<Message<T>>,
    ) -> Result<(), Error> {
        let mut options = with_demand(self.processor.max_demand);
        if self.partitioned {
            options = options.partition(index);
        }
        match processor.subscribe(input, options).await {
            Ok(_) => Ok(()),
            // A producer that has finished has nothing more to give.
            Err(_) if !AnyStage::from(input).is_alive() => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// Start a batcher stage (its batch processors and processors are
    /// subscribed by the caller).
    pub async fn start_batcher(
        params: BatcherParams<T>,
        counters: Arc<Counters>,
    ) -> Result<BatcherSlot<T>, Error> {
        let stage = weir_gen_stage::start_producer_consumer_with(
            BatcherStage::<T>::new(
                params.name.clone(),
                (params.batch_size, params.weight.clone()),
                params.batch_timeout,
                params.max_demand,
                Upstreams::new(counters.clone()),
            ),
            weir_gen_stage::ProducerConsumerOptions::<Message<T>, Batch<T>>::new()
                .on_unhandled(fail_messages())
                .on_undelivered(fail_batches()),
        )
        .await?;
        let _: &weir_gen_stage::ProducerConsumerHandle<BatcherStage<T>> = &stage;
        Ok(BatcherSlot {
            stage: AnyStage::from(&stage),
            producer: stage.producer(),
            consumer: stage.consumer(),
            params,
            counters,
        })
    }

    /// Start a batch processor and subscribe it to `batcher`.
    pub async fn start_batch_processor(
        name: Arc<str>,
        handle_failed: Option<HandleFailed<T>>,
        index: usize,
        handle_batch: HandleBatch<T>,
        counters: Arc<Counters>,
        batcher: (usize, &ProducerRef<Batch<T>>),
    ) -> Result<BatchProcessorSlot<T>, Error> {
        let processor = weir_gen_stage::start_consumer_with(
            BatchProcessor {
                name,
                index,
                handle_batch: handle_batch.clone(),
                handle_failed,
                upstreams: Upstreams::new(counters.clone()),
            },
            weir_gen_stage::ConsumerOptions::new().on_unhandled(fail_batches()),
        )
        .await?;
        processor
            .subscribe(batcher.1, temporary().max_demand(1).min_demand(0))
            .await?;
        Ok(BatchProcessorSlot {
            stage: AnyStage::from(&processor),
            consumer: processor.consumer(),
            batcher: batcher.0,
            index,
            handle_batch,
            counters,
        })
    }

    fn stage(&self, slot: Slot) -> &AnyStage {
        match slot {
            Slot::Source(i) => &self.sources[i].stage,
            Slot::Front(i) => &self.fronts[i],
            Slot::Processor(i) => &self.processors[i].stage,
            Slot::Batcher(i) => &self.batchers[i].stage,
            Slot::BatchProcessor(i) => &self.batch_processors[i].stage,
        }
    }

    fn slots(&self) -> impl Iterator<Item = Slot> + '_ {
        (0..self.sources.len())
            .map(Slot::Source)
            .chain((0..self.fronts.len()).map(Slot::Front))
            .chain((0..self.processors.len()).map(Slot::Processor))
            .chain((0..self.batchers.len()).map(Slot::Batcher))
            .chain((0..self.batch_processors.len()).map(Slot::BatchProcessor))
    }

    fn restartable(&self, slot: Slot) -> bool {
        match slot {
            Slot::Source(i) => self.sources[i].restart.is_some(),
            Slot::Front(_) => false,
            _ => true,
        }
    }

    /// Start the stage of `slot` again and wire it in.
    async fn restart(&mut self, slot: Slot) -> Result<(), Error> {
        match slot {
            Slot::Source(i) => {
                let Some(restart) = self.sources[i].restart.clone() else {
                    return Ok(());
                };
                // Started holding its demand (accumulate mode) until every
                // processor has subscribed, as at the start.
                let (producer, stage) = restart().await?;
                if let Some(input) = self.sources[i].input {
                    self.inputs[input] = producer.clone();
                }
                for (index, processor) in self.processors.iter().enumerate() {
                    self.subscribe_processor(&processor.consumer, index, &producer)
                        .await?;
                }
                producer
                    .set_demand_mode(weir_gen_stage::DemandMode::Forward)
                    .await?;
                self.sources[i].stage = stage;
            }
            Slot::Front(_) => {}
            Slot::Processor(i) => {
                let counters = self.processors[i].counters.clone();
                self.processors[i] = self.start_processor(i, counters).await?;
            }
            Slot::Batcher(i) => {
                let old = &self.batchers[i];
                let params = BatcherParams {
                    name: old.params.name.clone(),
                    batch_size: old.params.batch_size,
                    weight: old.params.weight.clone(),
                    batch_timeout: old.params.batch_timeout,
                    max_demand: old.params.max_demand,
                };
                let batcher = Self::start_batcher(params, old.counters.clone()).await?;
                for processor in self.batch_processors.iter().filter(|p| p.batcher == i) {
                    processor
                        .consumer
                        .subscribe(&batcher.producer, temporary().max_demand(1).min_demand(0))
                        .await?;
                }
                let several = self.batchers.len() > 1;
                for processor in &self.processors {
                    let Some(producer) = &processor.producer else {
                        continue;
                    };
                    let mut options = with_demand(batcher.params.max_demand);
                    if several {
                        options = options.partition(i);
                    }
                    batcher.consumer.subscribe(producer, options).await?;
                }
                self.batchers[i] = batcher;
            }
            Slot::BatchProcessor(i) => {
                let old = &self.batch_processors[i];
                let batcher = old.batcher;
                let processor = Self::start_batch_processor(
                    self.name.clone(),
                    self.handle_failed.clone(),
                    old.index,
                    old.handle_batch.clone(),
                    old.counters.clone(),
                    (batcher, &self.batchers[batcher].producer),
                )
                .await?;
                self.batch_processors[i] = processor;
            }
        }
        Ok(())
    }
}

/// What the [`Pipeline`](crate::Pipeline) reads of its stages: kept up to
/// date by the supervisor as stages are started again.
pub(crate) struct View<T: Send + 'static> {
    /// The producers given to the builder (and the test producer).
    pub sources: Vec<AnyStage>,
    /// The producers it started (`producers`).
    pub producers: Vec<ProducerRef<Message<T>>>,
    /// Every other stage, upstream first.
    pub stages: Vec<AnyStage>,
    /// Every stage's counters.
    pub metrics: Vec<(StageRole, StageId, Arc<Counters>)>,
}

/// Shared by the pipeline and its supervisor.
pub(crate) struct Shared<T: Send + 'static> {
    view: Mutex<View<T>>,
    /// Whether stages may still be started again: held by a restart from
    /// its decision to its end, and set to `false` by a drain first.
    restarts: tokio::sync::Mutex<bool>,
    /// Why the pipeline went down, if it did.
    failure: Mutex<Option<Error>>,
    /// `true` once every stage has stopped for good.
    done: watch::Sender<bool>,
    /// The test producer's inlet.
    pub inlet: Option<Arc<Inlet<T>>>,
}

impl<T: Send + 'static> Shared<T> {
    pub fn new(view: View<T>, inlet: Option<Arc<Inlet<T>>>) -> Self {
        Self {
            view: Mutex::new(view),
            restarts: tokio::sync::Mutex::new(true),
            failure: Mutex::new(None),
            done: watch::channel(false).0,
            inlet,
        }
    }

    pub fn view(&self) -> MutexGuard<'_, View<T>> {
        // Nothing panics while holding the lock: a poisoned view is whole.
        self.view
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// No stage is started again from now on (a drain, or the end).
    pub async fn stop_restarts(&self) {
        *self.restarts.lock().await = false;
    }

    /// Why the pipeline went down, if it did.
    pub fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .as_ref()
            .map(ToString::to_string)
    }

    pub fn take_failure(&self) -> Option<Error> {
        self.failure
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
    }

    /// Whether the pipeline runs: not every stage has stopped for good,
    /// and one of them (as they are now) is alive.
    pub fn is_running(&self) -> bool {
        if *self.done.borrow() {
            return false;
        }
        let view = self.view();
        view.sources
            .iter()
            .chain(&view.stages)
            .any(AnyStage::is_alive)
    }

    /// Wait until every stage has stopped for good.
    pub async fn done(&self) {
        let mut done = self.done.subscribe();
        let _ = done.wait_for(|done| *done).await;
    }
}

/// Where each slot's stage sits in the [`View`].
pub(crate) struct Places {
    /// Index in `View::stages` of each front, processor, batcher and batch
    /// processor.
    pub fronts: Vec<usize>,
    pub processors: Vec<usize>,
    pub batchers: Vec<usize>,
    pub batch_processors: Vec<usize>,
    /// Index in `View::metrics` of each processor, batcher and batch
    /// processor.
    pub processor_metrics: Vec<usize>,
    pub batcher_metrics: Vec<usize>,
    pub batch_processor_metrics: Vec<usize>,
}

/// Runs the pipeline's supervision until every stage has stopped for good.
pub(crate) fn supervise<T: Send + 'static>(
    wiring: Wiring<T>,
    places: Places,
    shared: Arc<Shared<T>>,
    (max_restarts, max_seconds): (usize, Duration),
    shutdown_timeout: Duration,
) {
    let intensity = Intensity {
        max_restarts,
        period: max_seconds,
        restarts: VecDeque::new(),
    };
    tokio::spawn(run(wiring, places, shared, intensity, shutdown_timeout));
}

fn watch_stage(
    slot: Slot,
    stage: AnyStage,
    tx: &mpsc::UnboundedSender<(Slot, StageId, StopReason)>,
) {
    let tx = tx.clone();
    tokio::spawn(async move {
        let reason = stage.stopped().await;
        let _ = tx.send((slot, stage.id(), reason));
    });
}

async fn run<T: Send + 'static>(
    mut wiring: Wiring<T>,
    places: Places,
    shared: Arc<Shared<T>>,
    mut intensity: Intensity,
    shutdown_timeout: Duration,
) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    for slot in wiring.slots().collect::<Vec<_>>() {
        watch_stage(slot, wiring.stage(slot).clone(), &tx);
    }
    let mut finishing = false;
    while let Some((slot, id, reason)) = rx.recv().await {
        if wiring.stage(slot).id() != id {
            continue;
        }
        let mut restarts = shared.restarts.lock().await;
        let restart = *restarts && !reason.is_transient_shutdown() && wiring.restartable(slot);
        if restart {
            tracing::warn!(target: "weir_pipeline", name = %wiring.name, stage = ?slot, %reason, "a stage of the pipeline stopped: starting it again");
            let result = if intensity.allow(Instant::now()) {
                wiring.restart(slot).await
            } else {
                Err(Error::TooManyRestarts {
                    stage: format!("{slot:?}"),
                    reason: reason.to_string(),
                    max_restarts: intensity.max_restarts,
                    max_seconds: intensity.period,
                })
            };
            match result {
                Ok(()) => {
                    watch_stage(slot, wiring.stage(slot).clone(), &tx);
                    update_view(&wiring, &places, slot, &shared);
                    continue;
                }
                Err(error) => {
                    *restarts = false;
                    drop(restarts);
                    go_down(&wiring, &shared, error);
                }
            }
        } else {
            drop(restarts);
            // The test producer stopped abnormally for good (the pipeline is
            // draining): what was pushed and not sent is acked failed.
            let pipeline_source =
                matches!(slot, Slot::Source(i) if wiring.sources[i].restart.is_some());
            if pipeline_source
                && !reason.is_transient_shutdown()
                && let Some(inlet) = &shared.inlet
            {
                inlet.fail_all(&stopped_reason(&reason));
            }
        }
        // Every producer has stopped for good: drain the rest.
        let sources_done = wiring.sources.iter().all(|source| !source.stage.is_alive());
        if sources_done && !finishing {
            finishing = true;
            shared.stop_restarts().await;
            let stages: Vec<AnyStage> = shared.view().stages.clone();
            tokio::spawn(async move {
                let report = Drain::new(shutdown_timeout)
                    .stages(stages.iter())
                    .run()
                    .await;
                if !report.is_complete() {
                    tracing::warn!(
                        undelivered = report.undelivered(),
                        "the pipeline's producers finished, but it did not drain in time"
                    );
                }
            });
        }
        let restarts_stopped = !*shared.restarts.lock().await;
        if restarts_stopped && wiring.slots().all(|slot| !wiring.stage(slot).is_alive()) {
            break;
        }
    }
    shared.done.send_replace(true);
}

/// Put the stage of `slot` in the view.
fn update_view<T: Send + 'static>(
    wiring: &Wiring<T>,
    places: &Places,
    slot: Slot,
    shared: &Shared<T>,
) {
    let mut view = shared.view();
    let stage = wiring.stage(slot).clone();
    let id = stage.id();
    match slot {
        Slot::Source(i) => {
            let source = &wiring.sources[i];
            if let (Some(started), Some(input)) = (source.started, source.input) {
                view.producers[started] = wiring.inputs[input].clone();
            }
            view.sources[i] = stage;
        }
        Slot::Front(i) => view.stages[places.fronts[i]] = stage,
        Slot::Processor(i) => {
            view.stages[places.processors[i]] = stage;
            view.metrics[places.processor_metrics[i]].1 = id;
        }
        Slot::Batcher(i) => {
            view.stages[places.batchers[i]] = stage;
            view.metrics[places.batcher_metrics[i]].1 = id;
        }
        Slot::BatchProcessor(i) => {
            view.stages[places.batch_processors[i]] = stage;
            view.metrics[places.batch_processor_metrics[i]].1 = id;
        }
    }
}

/// Too many restarts (or a restart failed): stop every stage, producers
/// first; what each held is acked failed.
fn go_down<T: Send + 'static>(wiring: &Wiring<T>, shared: &Shared<T>, error: Error) {
    tracing::error!(target: "weir_pipeline", name = %wiring.name, %error, "the pipeline goes down");
    let reason = StopReason::custom(format!("the pipeline went down: {error}"));
    if let Some(inlet) = &shared.inlet {
        inlet.fail_all(&stopped_reason(&reason));
    }
    for slot in wiring.slots() {
        let _ = wiring.stage(slot).stop(reason.clone());
    }
    *shared
        .failure
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(error);
}
