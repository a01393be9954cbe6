//! The builder and the running pipeline: which stages there are, how they
//! subscribe to each other, and how they stop.

use std::collections::HashMap;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use weir_gen_stage::{
    AnyStage, AsProducer, BufferSize, DemandDispatcher, DemandMode, Dispatcher, Drain, DrainReport,
    FilterMap, Map, PartitionDispatcher, Producer, ProducerConsumerOptions, ProducerHandle,
    ProducerOptions, ProducerRef,
};

use crate::batch::Weight;
use crate::handlers::{HandleBatch, HandleFailed, HandleMessage, PrepareMessages};
use crate::message::panic_reason;
use crate::metrics::{Counters, PipelineMetrics, StageRole};
use crate::processor::{BatcherRoute, PartitionBy, Processor, Routes, partition_of};
use crate::rate_limit::{RateLimiter, RateLimiting, run_intervals};
use crate::supervisor::{
    BatchProcessorSlot, BatcherParams, BatcherSlot, DEFAULT_MAX_RESTARTS, DEFAULT_MAX_SECONDS,
    Places, RestartSource, Shared, SourceSlot, View, Wiring, fail_messages, supervise, with_demand,
};
use crate::test_producer::{
    CallerAcknowledger, Flush, Inlet, NOT_RUNNING, PushProducer, Pushed, Wake, ack_failed,
};
use crate::topology::Topology;
use crate::{Acknowledger, BatchInfo, BatchMode, Error, Message};

/// A batcher: its name, batch size and timeout, how many batch processors
/// run `handle_batch`, and `handle_batch` itself (Broadway's `batchers:`
/// entry and `handle_batch/4`).
pub struct Batcher<T> {
    name: String,
    batch_size: usize,
    batch_timeout: Duration,
    concurrency: usize,
    handle_batch: HandleBatch<T>,
    partition_by: Option<PartitionBy<T>>,
    weight: Option<Weight<T>>,
    max_demand: Option<usize>,
}

impl<T> std::fmt::Debug for Batcher<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher")
            .field("name", &self.name)
            .field("batch_size", &self.batch_size)
            .field("batch_timeout", &self.batch_timeout)
            .field("concurrency", &self.concurrency)
            .field("partition_by", &self.partition_by.is_some())
            .field("batch_weight_limit", &self.weight.as_ref().map(|w| w.limit))
            .field("max_demand", &self.max_demand)
            .finish_non_exhaustive()
    }
}

impl<T> Batcher<T> {
    /// A batcher named `name` (messages go to it by [`Message::put_batcher`];
    /// [`DEFAULT_BATCHER`](crate::DEFAULT_BATCHER) unless the handler says
    /// otherwise) with Broadway's defaults: batches of 100, a timeout of one
    /// second, one batch processor.
    ///
    /// `handle_batch` gets the messages of a batch (one batch key) and may
    /// [`fail`](Message::fail) some; a panic fails the whole batch. When it
    /// returns, the batch is acked.
    pub fn new(
        name: impl Into<String>,
        handle_batch: impl Fn(&mut [Message<T>], &BatchInfo) + Send + Sync + 'static,
    ) -> Self {
        Self {
            name: name.into(),
            batch_size: 100,
            batch_timeout: Duration::from_secs(1),
            concurrency: 1,
            handle_batch: Arc::new(handle_batch),
            partition_by: None,
            weight: None,
            max_demand: None,
        }
    }

    /// Batches measured by what their messages weigh, not only by count
    /// (Broadway's `batch_size: {initial_acc, splitter}`, e.g. size in
    /// bytes): a batch is handed over when its messages weigh `limit`, or
    /// when the next message would take it over `limit` (that message
    /// begins the next batch), or at `batch_size` messages, whichever comes
    /// first. A message that weighs `limit` or more is a batch on its own.
    /// `weigh` runs in the batcher; a panic there counts as `limit` (and
    /// is logged).
    ///
    /// ```
    /// use weir_pipeline::{Batcher, Message};
    ///
    /// // Batches of at most 64 KiB of text.
    /// let batcher = Batcher::new("default", |_: &mut [Message<String>], _| {})
    ///     .batch_size(10_000)
    ///     .batch_size_by(64 * 1024, |message: &Message<String>| message.data.len());
    /// # let _ = batcher;
    /// ```
    pub fn batch_size_by(
        mut self,
        limit: usize,
        weigh: impl Fn(&Message<T>) -> usize + Send + Sync + 'static,
    ) -> Self {
        self.weight = Some(Weight {
            limit,
            weigh: Arc::new(weigh),
        });
        self
    }

    /// How many messages the batcher asks of each processor at a time
    /// (Broadway's batcher `max_demand`; default `batch_size`); it asks
    /// again when half of that is handled.
    pub fn max_demand(mut self, max_demand: usize) -> Self {
        self.max_demand = Some(max_demand.max(1));
        self
    }

    /// The most messages in a batch; a batch this big is handed over at once.
    pub fn batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size;
        self
    }

    /// How long a partial batch waits after its first message before it is
    /// handed over anyway.
    pub fn batch_timeout(mut self, batch_timeout: Duration) -> Self {
        self.batch_timeout = batch_timeout;
        self
    }

    /// How many batch processors run `handle_batch` in parallel.
    pub fn concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency;
        self
    }

    /// Messages with the same `partition_by(message) % concurrency` go to
    /// the same batch processor, in the order the processors sent them
    /// (Broadway's batcher `partition_by`). The batcher then runs one stage
    /// per partition, each with its own batch processor, so batches never
    /// mix partitions. Runs in the processor after `handle_message`; a panic
    /// fails the message.
    pub fn partition_by(
        mut self,
        partition_by: impl Fn(&Message<T>) -> u64 + Send + Sync + 'static,
    ) -> Self {
        self.partition_by = Some(Arc::new(partition_by));
        self
    }
}

enum Source<T> {
    Messages(ProducerRef<Message<T>>),
    /// A producer of anything, and the stage in front of it that turns its
    /// events into messages (`producer_of`, `producer_with`).
    Transformed(StartTransform<T>),
    /// Producers the pipeline starts itself, with its dispatcher (`producers`).
    Start(Vec<StartProducer<T>>),
    Test,
}

/// Starts one producer of [`PipelineBuilder::producers`] with the
/// pipeline's dispatcher, in a demand mode (again, when it is started again).
type StartProducer<T> = Arc<
    dyn Fn(
            Box<dyn Dispatcher<Message<T>>>,
            DemandMode,
        ) -> Pin<
            Box<
                dyn Future<
                        Output = Result<(ProducerRef<Message<T>>, AnyStage), weir_gen_stage::Error>,
                    > + Send,
            >,
        > + Send
        + Sync,
>;

/// Starts the stage that turns a producer's events into messages (with the
/// pipeline's dispatcher, asking `front_demand` of the producer), holding
/// the producer's demand until every processor subscribed.
type StartTransform<T> = Box<
    dyn FnOnce(
            Box<dyn Dispatcher<Message<T>>>,
            usize,
        ) -> Pin<Box<dyn Future<Output = Result<Transformed<T>, Error>> + Send>>
        + Send,
>;

/// A transforming stage in front of a producer, started.
struct Transformed<T> {
    /// The producer.
    source: AnyStage,
    /// The stage in front of it.
    front: AnyStage,
    /// What the processors subscribe to: the stage in front.
    input: ProducerRef<Message<T>>,
    /// Lets the producer's demand flow, if the pipeline held it.
    held: Option<Release>,
}

/// Puts a producer the pipeline held back in forward mode.
type Release = Pin<Box<dyn Future<Output = Result<(), weir_gen_stage::Error>> + Send>>;

/// Builds a [`Pipeline`]: `Pipeline::builder()`.
pub struct PipelineBuilder<T> {
    sources: Vec<Source<T>>,
    processors: Option<(usize, HandleMessage<T>)>,
    prepare_messages: Option<PrepareMessages<T>>,
    processor_max_demand: usize,
    processor_min_demand: Option<usize>,
    batchers: Vec<Batcher<T>>,
    handle_failed: Option<HandleFailed<T>>,
    shutdown_timeout: Duration,
    name: Arc<str>,
    rate_limiting: Option<RateLimiting>,
    partition_by: Option<PartitionBy<T>>,
    max_restarts: usize,
    max_seconds: Duration,
}

impl<T> std::fmt::Debug for PipelineBuilder<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelineBuilder")
            .field("sources", &self.sources.len())
            .field("processors", &self.processors.as_ref().map(|(n, _)| n))
            .field("processor_max_demand", &self.processor_max_demand)
            .field("batchers", &self.batchers)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .field("name", &self.name)
            .field("rate_limiting", &self.rate_limiting)
            .field("partition_by", &self.partition_by.is_some())
            .field("max_restarts", &self.max_restarts)
            .field("max_seconds", &self.max_seconds)
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> PipelineBuilder<T> {
    /// How many times the pipeline starts a stage again within
    /// [`max_seconds`](Self::max_seconds) before it goes down (Broadway's
    /// `max_restarts`, default 3). A stage of the pipeline that stops
    /// abnormally while it runs (its own code panicked outside a handler,
    /// or someone stopped it with a reason other than a shutdown) is
    /// started again and subscribed as the one it replaces was: a
    /// processor, a batcher stage, a batch processor, a producer of
    /// [`producers`](Self::producers) (made again with `make(index)`), the
    /// test producer. What the stopped stage held (in its mailbox, its
    /// buffer, its partial batches) is acked failed, never dropped. One more
    /// restart within the period and the pipeline goes down: every stage is
    /// stopped (what they hold acked failed), and
    /// [`Pipeline::exited`] returns [`Error::TooManyRestarts`]. `0`: the
    /// first abnormal stop takes the pipeline down.
    pub fn max_restarts(mut self, max_restarts: usize) -> Self {
        self.max_restarts = max_restarts;
        self
    }

    /// The period [`max_restarts`](Self::max_restarts) counts restarts in
    /// (Broadway's `max_seconds`, default 5 s).
    pub fn max_seconds(mut self, period: Duration) -> Self {
        self.max_seconds = period;
        self
    }

    /// A producer of messages (any gen-stage producer or producer_consumer
    /// of [`Message<T>`]). May be called more than once: the processors
    /// subscribe to every producer.
    pub fn producer(mut self, producer: &impl AsProducer<Message<T>>) -> Self {
        self.sources.push(Source::Messages(producer.producer_ref()));
        self
    }

    /// `concurrency` producers of messages, `make(index)` for each index,
    /// started by the pipeline itself (Broadway's producer `module` and
    /// `concurrency`). The pipeline gives each its dispatcher, so
    /// [`partition_by`](Self::partition_by) routes at the producer, with no
    /// stage in front of it (with [`producer`](Self::producer), whose
    /// dispatcher is the producer's own choice, it takes one). The
    /// producers' `init` must therefore not choose a dispatcher (options it
    /// returns win over the pipeline's); it may set anything else, e.g.
    /// its demand mode. [`Pipeline::producers`] reaches them once started.
    /// A producer that stops abnormally is started again with
    /// `make(index)` (see [`max_restarts`](Self::max_restarts)).
    pub fn producers<P>(
        mut self,
        concurrency: usize,
        make: impl Fn(usize) -> P + Send + Sync + 'static,
    ) -> Self
    where
        P: Producer<Event = Message<T>>,
    {
        let make = Arc::new(make);
        let start = (0..concurrency)
            .map(|index| {
                let make = make.clone();
                let start: StartProducer<T> = Arc::new(move |dispatcher, demand| {
                    let producer = make(index);
                    Box::pin(async move {
                        let stage = weir_gen_stage::start_producer_with(
                            producer,
                            ProducerOptions::new()
                                .boxed_dispatcher(dispatcher)
                                .demand(demand)
                                .on_undelivered(fail_messages()),
                        )
                        .await?;
                        Ok((stage.producer(), AnyStage::from(&stage)))
                    })
                });
                start
            })
            .collect();
        self.sources.push(Source::Start(start));
        self
    }

    /// A producer of plain data: each event becomes a message acked by
    /// `acknowledger` (a `map` stage in front of the processors).
    pub fn producer_of(
        self,
        producer: &impl AsProducer<T>,
        acknowledger: Arc<dyn Acknowledger<T>>,
    ) -> Self {
        self.producer_with(producer, move |data: T| {
            Message::new(data, acknowledger.clone())
        })
    }

    /// A producer of any events, each turned into a message by
    /// `transformer` (Broadway's producer `transformer`): it chooses the
    /// message's acknowledger, metadata and ack data. It runs in a stage of
    /// the pipeline in front of the producer. A panic in it drops that event
    /// (there is no message to fail): it is logged as an error, and the
    /// source, which never got an ack for it, may redeliver it.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use weir_pipeline::{Message, Metadata, NoopAcknowledger, Pipeline};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), weir_pipeline::Error> {
    /// // (offset, line) pairs from a reader: the offset goes to metadata.
    /// let lines = weir_gen_stage::from_iter([(0u64, "a".to_owned()), (2, "b".to_owned())]).await?;
    /// let pipeline = Pipeline::builder()
    ///     .producer_with(&lines, |(offset, line): (u64, String)| {
    ///         let metadata = Metadata::from([("offset".to_owned(), offset.to_string())]);
    ///         Message::with_metadata(line, Arc::new(NoopAcknowledger), metadata)
    ///     })
    ///     .processors(1, |message: &mut Message<String>| {
    ///         assert!(message.metadata().contains_key("offset"));
    ///     })
    ///     .start()
    ///     .await?;
    /// pipeline.stopped().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn producer_with<E: Send + 'static>(
        mut self,
        producer: &impl AsProducer<E>,
        transformer: impl Fn(E) -> Message<T> + Send + Sync + 'static,
    ) -> Self {
        let producer = producer.producer_ref();
        let start: StartTransform<T> = Box::new(move |dispatcher, front_demand| {
            Box::pin(async move {
                let held = hold(&producer).await?;
                let front = weir_gen_stage::start_producer_consumer_with(
                    FilterMap::new(move |event: E| {
                        match catch_unwind(AssertUnwindSafe(|| transformer(event))) {
                            Ok(message) => Some(message),
                            Err(payload) => {
                                let reason = panic_reason(payload.as_ref());
                                tracing::error!(target: "weir_pipeline", %reason, "the transformer panicked: the event is dropped, unacked");
                                None
                            }
                        }
                    }),
                    ProducerConsumerOptions::new()
                        .boxed_dispatcher(dispatcher)
                        .on_undelivered(fail_messages()),
                )
                .await?;
                front
                    .subscribe(&producer, with_demand(front_demand))
                    .await?;
                let release: Option<Release> = held.then(|| {
                    let producer = producer.clone();
                    Box::pin(async move { producer.set_demand_mode(DemandMode::Forward).await })
                        as Release
                });
                Ok(Transformed {
                    source: AnyStage::from(&producer),
                    front: AnyStage::from(&front),
                    input: front.producer(),
                    held: release,
                })
            })
        });
        self.sources.push(Source::Transformed(start));
        self
    }

    /// A producer fed by [`Pipeline::test_message`],
    /// [`Pipeline::test_batch`] and [`Pipeline::push_messages`] (Broadway's
    /// `DummyProducer`). It never finishes: stop such a pipeline with
    /// [`Pipeline::drain`].
    pub fn test_producer(mut self) -> Self {
        self.sources.push(Source::Test);
        self
    }

    /// `concurrency` processors run `handle_message` on each message: it may
    /// change `data`, [`fail`](Message::fail) the message or choose its
    /// batcher and batch key. A panic fails the message. Failed messages are
    /// acked by the processor (after `handle_failed`); the others go to their
    /// batcher, or are acked by the processor when there are no batchers.
    pub fn processors(
        mut self,
        concurrency: usize,
        handle_message: impl Fn(&mut Message<T>) + Send + Sync + 'static,
    ) -> Self {
        self.processors = Some((concurrency, Arc::new(handle_message)));
        self
    }

    /// Runs in each processor on every group of messages it receives,
    /// before `handle_message` runs on each (Broadway's `prepare_messages`):
    /// e.g. one database query for the whole group, its results put in the
    /// messages. It may change the messages' data and fail some (failed
    /// messages skip `handle_message`); it cannot add or drop messages. A
    /// panic fails the whole group. The group is what the processor received
    /// at once: at most `processor_max_demand` messages.
    pub fn prepare_messages(
        mut self,
        prepare_messages: impl Fn(&mut [Message<T>]) + Send + Sync + 'static,
    ) -> Self {
        self.prepare_messages = Some(Arc::new(prepare_messages));
        self
    }

    /// How many messages each processor asks of each producer at a time
    /// (Broadway's processor `max_demand`, default 10).
    pub fn processor_max_demand(mut self, max_demand: usize) -> Self {
        self.processor_max_demand = max_demand.max(1);
        self
    }

    /// Each processor asks its producers again once its outstanding demand
    /// falls to `min_demand` (Broadway's processor `min_demand`; default
    /// half of `max_demand`). At least 0, below `max_demand`.
    pub fn processor_min_demand(mut self, min_demand: usize) -> Self {
        self.processor_min_demand = Some(min_demand);
        self
    }

    /// Add a batcher.
    pub fn batcher(mut self, batcher: Batcher<T>) -> Self {
        self.batchers.push(batcher);
        self
    }

    /// Runs on failed messages (failed by `handle_message` or
    /// `handle_batch`, a panic, or an unknown batcher) just before they are
    /// acked; it may change their data. A panic in it is logged and the
    /// messages are acked failed all the same.
    pub fn handle_failed(
        mut self,
        handle_failed: impl Fn(&mut [Message<T>]) + Send + Sync + 'static,
    ) -> Self {
        self.handle_failed = Some(Arc::new(handle_failed));
        self
    }

    /// How long the pipeline gives itself to drain once its producers have
    /// all finished (default 30 s, Broadway's `shutdown` default).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// The pipeline's name (Broadway's `name`), the `name` field of its
    /// tracing spans. Default `"pipeline"`.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Arc::from(name.into());
        self
    }

    /// At most `allowed_messages` messages per `interval`, across all
    /// producers (Broadway's `rate_limiting`). The processors' demand is
    /// shaped: each ask of a producer takes from one shared budget, and
    /// what the budget cannot grant is held and granted, in the order it was
    /// asked, when the next interval starts. Change it while the pipeline
    /// runs with [`Pipeline::update_rate_limiting`].
    pub fn rate_limiting(mut self, allowed_messages: usize, interval: Duration) -> Self {
        self.rate_limiting = Some(RateLimiting::new(allowed_messages, interval));
        self
    }

    /// Messages with the same `partition_by(message) % concurrency` go to
    /// the same processor, in the order their producer emitted them
    /// (Broadway's processors `partition_by`): each producer's messages are
    /// routed by a gen-stage [`PartitionDispatcher`], one partition per
    /// processor. A panic fails the message (it is acked failed by
    /// processor 0, without `handle_message`).
    pub fn partition_by(
        mut self,
        partition_by: impl Fn(&Message<T>) -> u64 + Send + Sync + 'static,
    ) -> Self {
        self.partition_by = Some(Arc::new(partition_by));
        self
    }

    /// Start every stage, downstream first, and subscribe them.
    pub async fn start(self) -> Result<Pipeline<T>, Error> {
        if self.sources.is_empty() {
            return Err(Error::NoProducer);
        }
        if self
            .sources
            .iter()
            .any(|s| matches!(s, Source::Start(start) if start.is_empty()))
        {
            return Err(Error::ZeroConcurrency {
                stage: "producers".into(),
            });
        }
        let Some((concurrency, handle_message)) = self.processors else {
            return Err(Error::NoProcessors);
        };
        if concurrency == 0 {
            return Err(Error::ZeroConcurrency {
                stage: "processors".into(),
            });
        }
        let limiter = match self.rate_limiting {
            Some(limit) => Some(Arc::new(RateLimiter::new(limit.validate()?))),
            None => None,
        };
        let mut names = HashMap::new();
        for (index, batcher) in self.batchers.iter().enumerate() {
            if batcher.batch_size == 0 || batcher.weight.as_ref().is_some_and(|w| w.limit == 0) {
                return Err(Error::ZeroBatchSize {
                    batcher: batcher.name.clone(),
                });
            }
            if batcher.concurrency == 0 {
                return Err(Error::ZeroConcurrency {
                    stage: format!("batcher {:?}", batcher.name),
                });
            }
            if names.insert(batcher.name.clone(), index).is_some() {
                return Err(Error::DuplicateBatcher {
                    batcher: batcher.name.clone(),
                });
            }
        }
        let name = self.name;
        let mut metrics = Vec::new();

        // Batchers (one stage, or one per partition) and their batch
        // processors.
        let mut batchers: Vec<BatcherSlot<T>> = Vec::new();
        let mut batch_processors: Vec<BatchProcessorSlot<T>> = Vec::new();
        let mut routes = Vec::new();
        let mut batcher_metrics = Vec::new();
        let mut batch_processor_metrics = Vec::new();
        let mut batcher_roles = Vec::new();
        for batcher in self.batchers {
            let partitioned = batcher.partition_by.is_some() && batcher.concurrency > 1;
            let (stages, per_stage) = if partitioned {
                (batcher.concurrency, 1)
            } else {
                (1, batcher.concurrency)
            };
            routes.push((
                batcher.name.clone(),
                BatcherRoute {
                    first: batchers.len(),
                    stages,
                    partition_by: batcher.partition_by.clone(),
                },
            ));
            for partition in 0..stages {
                let counters = Arc::new(Counters::default());
                let params = BatcherParams {
                    name: batcher.name.clone(),
                    batch_size: batcher.batch_size,
                    weight: batcher.weight.clone(),
                    batch_timeout: batcher.batch_timeout,
                    max_demand: batcher.max_demand.unwrap_or(batcher.batch_size),
                };
                let stage = Wiring::start_batcher(params, counters.clone()).await?;
                batcher_metrics.push(batcher_roles.len());
                batcher_roles.push((
                    StageRole::Batcher {
                        name: batcher.name.clone(),
                        partition: partitioned.then_some(partition),
                    },
                    stage.stage.id(),
                    counters,
                ));
                for slot in 0..per_stage {
                    let index = partition * per_stage + slot;
                    let counters = Arc::new(Counters::default());
                    let processor = Wiring::start_batch_processor(
                        name.clone(),
                        self.handle_failed.clone(),
                        index,
                        batcher.handle_batch.clone(),
                        counters.clone(),
                        (batchers.len(), &stage.producer),
                    )
                    .await?;
                    batch_processor_metrics.push(batcher_roles.len());
                    batcher_roles.push((
                        StageRole::BatchProcessor {
                            batcher: batcher.name.clone(),
                            index,
                        },
                        processor.stage.id(),
                        counters,
                    ));
                    batch_processors.push(processor);
                }
                batchers.push(stage);
            }
        }

        // Processors, each subscribed to by every batcher stage (one
        // partition each).
        let max_demand = self.processor_max_demand;
        let min_demand = match self.processor_min_demand {
            None => max_demand / 2,
            Some(min) if min < max_demand => min,
            Some(min) => {
                return Err(Error::InvalidDemand {
                    max_demand,
                    min_demand: min,
                });
            }
        };
        let processor = Processor {
            name: name.clone(),
            prepare_messages: self.prepare_messages.clone(),
            handle_message,
            handle_failed: self.handle_failed.clone(),
            batchers: (!batchers.is_empty()).then(|| Arc::new(Routes::new(routes))),
            limiter: limiter.clone(),
            max_demand,
            min_demand,
        };
        let batcher_count = batchers.len();
        // One batcher stage: every message goes to it, no routing.
        let route: Arc<dyn Fn() -> Box<dyn Dispatcher<Message<T>>> + Send + Sync> =
            Arc::new(move || -> Box<dyn Dispatcher<Message<T>>> {
                if batcher_count <= 1 {
                    Box::new(DemandDispatcher::new())
                } else {
                    Box::new(PartitionDispatcher::with_hash(
                        batcher_count,
                        |message: Message<T>| {
                            let index = message.batcher_index;
                            Some((message, index))
                        },
                    ))
                }
            });
        let partition_by = self.partition_by.clone();
        let mut wiring = Wiring {
            name: name.clone(),
            sources: Vec::new(),
            inputs: Vec::new(),
            fronts: Vec::new(),
            processor,
            processors: Vec::with_capacity(concurrency),
            batchers,
            batch_processors,
            handle_failed: self.handle_failed.clone(),
            partitioned: partition_by.is_some(),
            route,
        };
        let mut processor_metrics = Vec::with_capacity(concurrency);
        for index in 0..concurrency {
            let counters = Arc::new(Counters::default());
            // No inputs yet: the processors subscribe to them below.
            let slot = wiring.start_processor(index, counters.clone()).await?;
            processor_metrics.push(metrics.len());
            metrics.push((StageRole::Processor { index }, slot.stage.id(), counters));
            wiring.processors.push(slot);
        }
        let processors_count = metrics.len();
        metrics.extend(batcher_roles);

        // Producers last, so that nothing flows before every stage is
        // subscribed. With `partition_by`, each producer's messages reach
        // the processors through a partition dispatcher: the pipeline's own
        // stage in front of the producer (the one that wraps data in
        // messages, or a pass-through), or the test producer's.
        let dispatcher = move || -> Box<dyn Dispatcher<Message<T>>> {
            match &partition_by {
                Some(by) => {
                    let by = by.clone();
                    Box::new(PartitionDispatcher::with_hash(
                        concurrency,
                        move |mut message: Message<T>| {
                            let partition = partition_of(&by, &mut message, concurrency);
                            Some((message, partition))
                        },
                    ))
                }
                None => Box::new(DemandDispatcher::new()),
            }
        };
        let dispatcher = Arc::new(dispatcher);
        // A stage in front of a producer asks for what all the processors
        // may ask of it.
        let front_demand = max_demand.saturating_mul(concurrency);
        let mut test_producer = None;
        let mut started = Vec::new();
        // Producers whose demand the pipeline holds until every processor
        // has subscribed (so that a finite producer cannot finish, and
        // stop, before the last processor subscribes to it).
        let mut held: Vec<Release> = Vec::new();
        for source in self.sources {
            if let Source::Messages(producer) = &source
                && hold(producer).await?
            {
                let producer = producer.clone();
                held.push(Box::pin(async move {
                    producer.set_demand_mode(DemandMode::Forward).await
                }));
            }
            match source {
                Source::Messages(producer) if wiring.partitioned => {
                    let route = weir_gen_stage::start_producer_consumer_with(
                        Map::new(|message: Message<T>| message),
                        ProducerConsumerOptions::new()
                            .boxed_dispatcher(dispatcher())
                            .on_unhandled(fail_messages())
                            .on_undelivered(fail_messages()),
                    )
                    .await?;
                    route
                        .subscribe(&producer, with_demand(front_demand))
                        .await?;
                    wiring.sources.push(SourceSlot {
                        stage: AnyStage::from(&producer),
                        input: None,
                        started: None,
                        restart: None,
                    });
                    wiring.fronts.push(AnyStage::from(&route));
                    wiring.inputs.push(route.producer());
                }
                Source::Messages(producer) => {
                    wiring.sources.push(SourceSlot {
                        stage: AnyStage::from(&producer),
                        input: Some(wiring.inputs.len()),
                        started: None,
                        restart: None,
                    });
                    wiring.inputs.push(producer);
                }
                Source::Transformed(start) => {
                    let transformed = start(dispatcher(), front_demand).await?;
                    wiring.sources.push(SourceSlot {
                        stage: transformed.source,
                        input: None,
                        started: None,
                        restart: None,
                    });
                    wiring.fronts.push(transformed.front);
                    wiring.inputs.push(transformed.input);
                    held.extend(transformed.held);
                }
                Source::Start(start) => {
                    for start in start {
                        let (producer, stage) = start(dispatcher(), DemandMode::Accumulate).await?;
                        let release = producer.clone();
                        held.push(Box::pin(async move {
                            release.set_demand_mode(DemandMode::Forward).await
                        }));
                        let again = start.clone();
                        let dispatcher = dispatcher.clone();
                        let restart: RestartSource<T> =
                            Arc::new(move || again(dispatcher(), DemandMode::Accumulate));
                        wiring.sources.push(SourceSlot {
                            stage,
                            input: Some(wiring.inputs.len()),
                            started: Some(started.len()),
                            restart: Some(restart),
                        });
                        started.push(producer.clone());
                        wiring.inputs.push(producer);
                    }
                }
                Source::Test => {
                    let inlet = Arc::new(Inlet::new());
                    let start_push = {
                        let inlet = inlet.clone();
                        let dispatcher = dispatcher.clone();
                        move |demand: DemandMode| {
                            let inlet = inlet.clone();
                            let dispatcher = dispatcher();
                            async move {
                                // Unbounded: what a drain flushes waits
                                // there for the processors' demand.
                                weir_gen_stage::start_producer_with(
                                    PushProducer::<T>::new(inlet),
                                    ProducerOptions::new()
                                        .boxed_dispatcher(dispatcher)
                                        .buffer_size(BufferSize::Infinity)
                                        .demand(demand)
                                        .on_undelivered(fail_messages()),
                                )
                                .await
                            }
                        }
                    };
                    let push = start_push(DemandMode::Forward).await?;
                    let stage_slot: TestStage<T> = Arc::new(Mutex::new(None));
                    let restart: RestartSource<T> = {
                        let stage_slot = stage_slot.clone();
                        Arc::new(move || {
                            let start = start_push(DemandMode::Accumulate);
                            let stage_slot = stage_slot.clone();
                            Box::pin(async move {
                                let push = start.await?;
                                *stage_slot.lock().unwrap_or_else(|p| p.into_inner()) =
                                    Some(push.clone());
                                Ok((push.producer(), AnyStage::from(&push)))
                            })
                        })
                    };
                    wiring.sources.push(SourceSlot {
                        stage: AnyStage::from(&push),
                        input: Some(wiring.inputs.len()),
                        started: None,
                        restart: Some(restart),
                    });
                    wiring.inputs.push(push.producer());
                    test_producer = Some(TestProducer {
                        inlet,
                        stage: push,
                        restarted: stage_slot,
                    });
                }
            }
        }
        for (index, processor) in wiring.processors.iter().enumerate() {
            for input in &wiring.inputs {
                let mut options = with_demand(max_demand);
                if wiring.partitioned {
                    options = options.partition(index);
                }
                processor.consumer.subscribe(input, options).await?;
            }
        }
        // Every subscription is up: let demand flow.
        for release in held {
            release.await?;
        }

        let processor_stages: Vec<AnyStage> =
            wiring.processors.iter().map(|p| p.stage.clone()).collect();
        // Every stage but the producers, upstream first, and where each
        // sits.
        let mut stages: Vec<AnyStage> = wiring.fronts.clone();
        let fronts = (0..stages.len()).collect();
        let processors_at = (stages.len()..stages.len() + concurrency).collect();
        stages.extend(processor_stages);
        let batchers_at = (stages.len()..stages.len() + wiring.batchers.len()).collect();
        stages.extend(wiring.batchers.iter().map(|b| b.stage.clone()));
        let batch_processors_at =
            (stages.len()..stages.len() + wiring.batch_processors.len()).collect();
        stages.extend(wiring.batch_processors.iter().map(|p| p.stage.clone()));
        let places = Places {
            fronts,
            processors: processors_at,
            batchers: batchers_at,
            batch_processors: batch_processors_at,
            processor_metrics,
            batcher_metrics: batcher_metrics
                .into_iter()
                .map(|i| i + processors_count)
                .collect(),
            batch_processor_metrics: batch_processor_metrics
                .into_iter()
                .map(|i| i + processors_count)
                .collect(),
        };
        let sources: Vec<AnyStage> = wiring.sources.iter().map(|s| s.stage.clone()).collect();
        let inlet = test_producer.as_ref().map(|test| test.inlet.clone());
        let shared = Arc::new(Shared::new(
            View {
                sources,
                producers: started,
                stages,
                metrics,
            },
            inlet,
        ));
        if let Some(limiter) = &limiter {
            // Intervals run until every stage has stopped for good.
            let shared = shared.clone();
            tokio::spawn(run_intervals(Arc::downgrade(limiter), async move {
                shared.done().await;
            }));
        }
        let running = Arc::downgrade(&shared);
        crate::topology::register(
            name.clone(),
            Arc::new(move || running.upgrade().is_some_and(|shared| shared.is_running())),
        );
        supervise(
            wiring,
            places,
            shared.clone(),
            (self.max_restarts, self.max_seconds),
            self.shutdown_timeout,
        );
        Ok(Pipeline {
            name,
            shared,
            test_producer,
            limiter,
        })
    }
}

/// The test producer's stage once started again (the supervisor puts it
/// there).
type TestStage<T> = Arc<Mutex<Option<ProducerHandle<PushProducer<T>>>>>;

/// The test producer and the inlet its messages are pushed into.
struct TestProducer<T: Send + 'static> {
    inlet: Arc<Inlet<T>>,
    stage: ProducerHandle<PushProducer<T>>,
    restarted: TestStage<T>,
}

impl<T: Send + 'static> TestProducer<T> {
    /// The producer's stage now.
    fn stage(&self) -> ProducerHandle<PushProducer<T>> {
        match &*self.restarted.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(stage) => stage.clone(),
            None => self.stage.clone(),
        }
    }
}

/// Hold `producer`'s demand (accumulate mode) while the pipeline
/// subscribes to it, if it forwards demand now: `true` if it is held
/// (release it). A producer already accumulating is the caller's to
/// release; a producer_consumer cannot accumulate and is left as it is.
async fn hold<E: Send + 'static>(producer: &ProducerRef<E>) -> Result<bool, Error> {
    if producer.demand_mode().await? != DemandMode::Forward {
        return Ok(false);
    }
    match producer.set_demand_mode(DemandMode::Accumulate).await {
        Ok(()) => Ok(true),
        Err(weir_gen_stage::Error::WrongKind { .. }) => Ok(false),
        Err(error) => Err(error.into()),
    }
}

/// A running pipeline: producers, processors, batchers and batch
/// processors, each a gen-stage stage. See the [crate documentation](crate).
pub struct Pipeline<T: Send + 'static> {
    name: Arc<str>,
    /// Its stages as they are now (the supervisor starts some again).
    shared: Arc<Shared<T>>,
    test_producer: Option<TestProducer<T>>,
    limiter: Option<Arc<RateLimiter>>,
}

impl<T: Send + 'static> std::fmt::Debug for Pipeline<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let view = self.shared.view();
        f.debug_struct("Pipeline")
            .field("name", &self.name)
            .field("sources", &view.sources)
            .field("stages", &view.stages)
            .field("test_producer", &self.test_producer.is_some())
            .field("limiter", &self.limiter)
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> Pipeline<T> {
    /// Start building a pipeline.
    pub fn builder() -> PipelineBuilder<T> {
        PipelineBuilder {
            sources: Vec::new(),
            processors: None,
            prepare_messages: None,
            processor_max_demand: 10,
            processor_min_demand: None,
            batchers: Vec::new(),
            handle_failed: None,
            shutdown_timeout: Duration::from_secs(30),
            name: Arc::from("pipeline"),
            rate_limiting: None,
            partition_by: None,
            max_restarts: DEFAULT_MAX_RESTARTS,
            max_seconds: DEFAULT_MAX_SECONDS,
        }
    }

    /// The producers the pipeline started from
    /// [`PipelineBuilder::producers`], in the order they were made (a
    /// producer started again replaces the one it stands for).
    pub fn producers(&self) -> Vec<ProducerRef<Message<T>>> {
        self.shared.view().producers.clone()
    }

    /// The pipeline's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The pipeline's stages by role (Broadway's `topology/1`): its
    /// producers, processors and batchers, with their stage ids (see
    /// [`stages`](Self::stages) and [`metrics`](Self::metrics)).
    pub fn topology(&self) -> Topology {
        let view = self.shared.view();
        Topology::new(
            &self.name,
            &view.sources,
            view.metrics.iter().map(|(role, stage, _)| (role, *stage)),
        )
    }

    /// The names of its producers, `{name}.Producer_{index}` (Broadway's
    /// `producer_names/1`), as in [`topology`](Self::topology).
    pub fn producer_names(&self) -> Vec<String> {
        self.topology()
            .producers
            .into_iter()
            .map(|producer| producer.name)
            .collect()
    }

    /// Every stage's counters now (cheap: a few atomic loads per stage, no
    /// message to any stage). See [`StageMetrics`](crate::StageMetrics).
    pub fn metrics(&self) -> PipelineMetrics {
        PipelineMetrics {
            stages: self
                .shared
                .view()
                .metrics
                .iter()
                .map(|(role, stage, counters)| counters.snapshot(role.clone(), *stage))
                .collect(),
            rate_limiting: self.limiter.as_ref().map(|limiter| limiter.snapshot()),
        }
    }

    /// The rate limit in force (Broadway's `get_rate_limiting`); `None`
    /// without `rate_limiting`.
    pub fn get_rate_limiting(&self) -> Option<RateLimiting> {
        self.limiter.as_ref().map(|limiter| limiter.limit())
    }

    /// Change the rate limit of a running pipeline (Broadway's
    /// `update_rate_limiting`); it applies from the next interval on (the
    /// current interval keeps its budget and its length). Errors if the
    /// pipeline was built without `rate_limiting`, or with 0 messages or a
    /// zero interval.
    pub fn update_rate_limiting(
        &self,
        allowed_messages: usize,
        interval: Duration,
    ) -> Result<(), Error> {
        let limiter = self.limiter.as_ref().ok_or(Error::NoRateLimiting)?;
        limiter.update(RateLimiting::new(allowed_messages, interval).validate()?);
        Ok(())
    }

    /// Start a new rate-limiting interval now, with its full budget (demand
    /// held for the next interval is granted at once), and count the
    /// intervals from now on: e.g. after the limit was raised with
    /// [`update_rate_limiting`](Self::update_rate_limiting), to apply it
    /// without waiting for the current interval to end. Errors if the
    /// pipeline was built without `rate_limiting`.
    pub fn reset_rate_limiting(&self) -> Result<(), Error> {
        let limiter = self.limiter.as_ref().ok_or(Error::NoRateLimiting)?;
        limiter.reset();
        Ok(())
    }

    /// Graceful shutdown: producers stop emitting, every message already
    /// produced is handled, partial batches are flushed, and everything is
    /// acked; then the stages stop, upstream first. If `deadline` passes
    /// first, the stages stop anyway and the report says what they still
    /// held (see the crate documentation for what is acked then).
    pub async fn drain(&self, deadline: Duration) -> DrainReport {
        let started = tokio::time::Instant::now();
        if let Some(test) = &self.test_producer {
            // Broadway's `prepare_for_draining`: no new pushes, and what was
            // pushed goes into the producer's buffer, which the drain
            // empties as the processors ask (a stopped producer already
            // acked its queue failed).
            test.inlet.close();
        }
        // No stage is started again from now on.
        self.shared.stop_restarts().await;
        if let Some(test) = &self.test_producer {
            let _ = test.stage().call(Flush, deadline).await;
        }
        let stages: Vec<AnyStage> = self.stages();
        Drain::new(deadline.saturating_sub(started.elapsed()))
            .stages(stages.iter())
            .run()
            .await
    }

    /// Wait until every stage of the pipeline has stopped (after its
    /// producers finished and it drained, or after [`drain`](Self::drain)).
    pub async fn stopped(&self) {
        self.shared.done().await;
    }

    /// Wait until every stage of the pipeline has stopped, like
    /// [`stopped`](Self::stopped), and say why: `Ok` after a drain (its own
    /// or [`drain`](Self::drain)), [`Error::TooManyRestarts`] if the
    /// pipeline went down because its stages stopped abnormally more often
    /// than [`max_restarts`](PipelineBuilder::max_restarts) allows (or
    /// [`Error::Stage`] if a stage could not be started again). The error is
    /// returned once; later calls return `Ok`.
    pub async fn exited(&self) -> Result<(), Error> {
        self.shared.done().await;
        match self.shared.take_failure() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Why the pipeline went down, if it did (see [`exited`](Self::exited)),
    /// without waiting.
    pub fn failure(&self) -> Option<String> {
        self.shared.failure()
    }

    /// Every stage of the pipeline, producers first.
    pub fn stages(&self) -> Vec<AnyStage> {
        let view = self.shared.view();
        view.sources.iter().chain(&view.stages).cloned().collect()
    }

    /// Push messages into the test producer (Broadway's `push_messages`):
    /// they flow through the pipeline like any other.
    ///
    /// Once the pipeline is draining or stopped it takes no new messages:
    /// the call returns [`Error::NotRunning`] and the messages are acked
    /// failed (so their source learns of them either way); without a test
    /// producer it returns [`Error::NoTestProducer`], and acks them failed
    /// too.
    pub fn push_messages(&self, messages: Vec<Message<T>>) -> Result<(), Error> {
        let Some(test) = self.test_producer.as_ref() else {
            ack_failed(messages, "the pipeline has no test producer");
            return Err(Error::NoTestProducer);
        };
        match test.inlet.push(messages) {
            Pushed::Queued { wake } => {
                // The producer is running, or stopping: then it acks the
                // queue failed (a shutdown), the producer started in its
                // place sends it, or the pipeline going down acks it
                // failed. Either way the messages are in the pipeline's
                // hands.
                if wake {
                    let _ = test.stage().cast(Wake);
                }
                Ok(())
            }
            Pushed::Refused(messages) => {
                ack_failed(messages, NOT_RUNNING);
                Err(Error::NotRunning)
            }
        }
    }

    /// Push one message with `data` through the pipeline (Broadway's
    /// `test_message`). It is pushed now, in [`BatchMode::Flush`]: its
    /// batcher hands its batch over as soon as it arrives, without waiting
    /// for `batch_timeout`. The future resolves with the message as acked:
    /// [`Message::status`] says whether successful or failed.
    pub fn test_message(
        &self,
        data: T,
    ) -> impl Future<Output = Result<Message<T>, Error>> + Send + 'static {
        let batch = self.test_batch(vec![data]);
        async move {
            let mut acked = batch.await?;
            acked.pop().ok_or(Error::NotAcked {
                acked: 0,
                expected: 1,
            })
        }
    }

    /// Push messages with `data` through the pipeline together (Broadway's
    /// `test_batch`), in [`BatchMode::Flush`] (their batches are handed over
    /// as the batchers receive them); the future resolves once every one of
    /// them was acked, with the messages in the order they were acked.
    pub fn test_batch(
        &self,
        data: Vec<T>,
    ) -> impl Future<Output = Result<Vec<Message<T>>, Error>> + Send + 'static {
        self.test_batch_with(data, BatchMode::Flush)
    }

    /// [`test_batch`](Self::test_batch) with the messages in `batch_mode`:
    /// [`BatchMode::Bulk`] batches them as any other message (by size and
    /// timeout), Broadway's `test_batch(.., batch_mode: :bulk)`.
    pub fn test_batch_with(
        &self,
        data: Vec<T>,
        batch_mode: BatchMode,
    ) -> impl Future<Output = Result<Vec<Message<T>>, Error>> + Send + 'static {
        let expected = data.len();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let acknowledger: Arc<dyn Acknowledger<T>> = Arc::new(CallerAcknowledger { tx });
        let messages = data
            .into_iter()
            .map(|data| {
                let mut message = Message::new(data, acknowledger.clone());
                message.put_batch_mode(batch_mode);
                message
            })
            .collect();
        // Only the messages hold the acknowledger now: once each is acked or
        // dropped, the channel closes.
        drop(acknowledger);
        let pushed = self.push_messages(messages);
        async move {
            pushed?;
            let mut acked = Vec::with_capacity(expected);
            while acked.len() < expected {
                match rx.recv().await {
                    Some(message) => acked.push(message),
                    None => {
                        return Err(Error::NotAcked {
                            acked: acked.len(),
                            expected,
                        });
                    }
                }
            }
            Ok(acked)
        }
    }
}
