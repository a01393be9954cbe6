//! The workloads built from gen-stage stages: the numbers producer, the
//! doubling producer_consumer and the counting consumer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use weir_gen_stage::{
    BroadcastDispatcher, Consumer, ConsumerContext, ConsumerRef, DemandDispatcher, DemandMode,
    Dispatcher, Error, Noreply, PartitionDispatcher, Producer, ProducerConsumer,
    ProducerConsumerContext, ProducerContext, ProducerOptions, StageGroup, StageRef, StopReason,
    SubscribeOptions, Subscription,
};
use weir_gen_stage::{ConsumerStage, ProducerConsumerStage, ProducerStage};

use crate::workload::{Tally, Topology, Workload};

/// Emits exactly `0..end`, as demanded. Starts in accumulate mode, so the
/// demand of every subscription is held until the clock starts.
struct Numbers {
    next: u64,
    end: u64,
    dispatcher: Option<Box<dyn Dispatcher<u64>>>,
}

impl Producer for Numbers {
    type Messages = ();
    type Event = u64;

    async fn init(
        &mut self,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Result<ProducerOptions<u64>, StopReason> {
        let dispatcher = self
            .dispatcher
            .take()
            .unwrap_or_else(|| Box::new(DemandDispatcher::new()));
        Ok(ProducerOptions::new()
            .boxed_dispatcher(dispatcher)
            .demand(DemandMode::Accumulate))
    }

    async fn handle_demand(
        &mut self,
        demand: usize,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<u64> {
        let end = self.next.saturating_add(demand as u64).min(self.end);
        let events = (self.next..end).collect();
        self.next = end;
        Noreply::Emit(events)
    }
}

/// `x * 2`, in place.
struct Doubler;

impl ProducerConsumer for Doubler {
    type Messages = ();
    type In = u64;
    type Out = u64;

    async fn handle_events(
        &mut self,
        mut events: Vec<u64>,
        _from: Subscription,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<u64> {
        for event in &mut events {
            *event = event.wrapping_mul(2);
        }
        Noreply::Emit(events)
    }
}

/// Counts (and sums) what it receives into the run's [`Tally`].
struct Counter(Arc<Tally>);

impl Consumer for Counter {
    type Messages = ();
    type Event = u64;

    async fn handle_events(
        &mut self,
        events: Vec<u64>,
        _from: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        self.0.count(&events);
        Noreply::none()
    }
}

fn dispatcher(topology: Topology) -> Box<dyn Dispatcher<u64>> {
    match topology {
        Topology::Chain | Topology::Demand4 => Box::new(DemandDispatcher::new()),
        Topology::Partition4 => Box::new(PartitionDispatcher::new(4)),
        Topology::Broadcast4 => Box::new(BroadcastDispatcher::new()),
    }
}

/// Where the stages run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Each stage on its own tokio task (`weir_gen_stage::start_*`).
    Tasks,
    /// Every stage of the pipeline in one [`StageGroup`].
    Group,
}

/// Starts stages by `Placement`.
struct Starter(Option<StageGroup>);

impl Starter {
    fn new(placement: Placement) -> Self {
        Starter(match placement {
            Placement::Tasks => None,
            Placement::Group => Some(StageGroup::new()),
        })
    }

    async fn producer<P: Producer>(&self, stage: P) -> Result<StageRef<ProducerStage<P>>, Error> {
        match &self.0 {
            Some(group) => group.start_producer(stage).await,
            None => weir_gen_stage::start_producer(stage).await,
        }
    }

    async fn producer_consumer<P: ProducerConsumer>(
        &self,
        stage: P,
    ) -> Result<StageRef<ProducerConsumerStage<P>>, Error> {
        match &self.0 {
            Some(group) => group.start_producer_consumer(stage).await,
            None => weir_gen_stage::start_producer_consumer(stage).await,
        }
    }

    async fn consumer<C: Consumer>(&self, stage: C) -> Result<StageRef<ConsumerStage<C>>, Error> {
        match &self.0 {
            Some(group) => group.start_consumer(stage).await,
            None => weir_gen_stage::start_consumer(stage).await,
        }
    }
}

/// Runs `workload` once on the current runtime: builds and subscribes every
/// stage, then times from releasing the producer's demand until the
/// consumers counted every event, then stops the pipeline (untimed).
pub async fn run(workload: Workload, placement: Placement) -> Duration {
    let what = format!("weir {workload} {placement:?}");
    let start = Starter::new(placement);
    let topology = workload.topology;
    let deliveries = topology.deliveries(workload.events);
    let tally = Tally::new(deliveries);
    let options = || {
        SubscribeOptions::new()
            .max_demand(workload.max_demand)
            .min_demand(workload.min_demand())
    };

    let producer = start
        .producer(Numbers {
            next: 0,
            end: workload.events,
            dispatcher: Some(dispatcher(topology)),
        })
        .await
        .expect("the producer starts");

    let mut sinks: Vec<ConsumerRef<u64>> = Vec::new();
    match topology {
        Topology::Chain => {
            let doubler = start
                .producer_consumer(Doubler)
                .await
                .expect("the producer_consumer starts");
            doubler
                .subscribe(&producer, options())
                .await
                .expect("the producer_consumer subscribes");
            let counter = start
                .consumer(Counter(tally.clone()))
                .await
                .expect("the consumer starts");
            counter
                .subscribe(&doubler, options())
                .await
                .expect("the consumer subscribes");
            sinks.push(counter.consumer());
        }
        Topology::Demand4 | Topology::Partition4 | Topology::Broadcast4 => {
            for partition in 0..4usize {
                let counter = start
                    .consumer(Counter(tally.clone()))
                    .await
                    .expect("a consumer starts");
                let options = match topology {
                    Topology::Partition4 => options().partition(partition),
                    _ => options(),
                };
                counter
                    .subscribe(&producer, options)
                    .await
                    .expect("a consumer subscribes");
                sinks.push(counter.consumer());
            }
        }
    }

    let start = Instant::now();
    producer
        .producer()
        .async_set_demand_mode(DemandMode::Forward)
        .expect("the producer is alive");
    tally.finished(&what, deliveries).await;
    let elapsed = start.elapsed();

    tally.check(&what, topology.checksum(workload.events));
    // Permanent subscriptions: the producer's shutdown stops every stage.
    producer
        .stop(StopReason::Shutdown)
        .await
        .expect("the producer stops");
    for sink in sinks {
        sink.stopped().await;
    }
    elapsed
}
