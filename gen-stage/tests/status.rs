//! Introspection: `status()` from outside a running stage (GenStage's
//! `:sys.get_state` / `format_status`), with the values SEMANTICS.md says
//! the protocol must have at that point.
//!
//! Every snapshot is answered by the stage's own task, behind the messages
//! sent to it before, so the tests order their requests along the messages'
//! path instead of sleeping: a consumer's snapshot after a producer's call
//! has returned sees the events the call emitted (they go out before the
//! reply), and a producer's snapshot taken after that sees the asks the
//! consumer sent while handling them.

use std::time::Duration;
use weir_gen_stage::{
    BroadcastDispatcher, BufferKeep, BufferSize, CancelMode, Consumer, ConsumerContext,
    ConsumerDemand, DemandMode, Error, Msgs, Noreply, PartitionDispatcher, Producer,
    ProducerConsumer, ProducerConsumerContext, ProducerConsumerOptions, ProducerContext,
    ProducerOptions, Reply, ReplyTo, StageGroup, StageKind, StopReason, SubscribeOptions,
    Subscription,
};

const TIMEOUT: Duration = Duration::from_secs(5);

/// Emits only when called: `call(n)` emits the next `n` numbers, so a test
/// decides exactly how many events are in flight.
struct Emitter {
    next: u64,
    options: Option<ProducerOptions<u64>>,
}

impl Emitter {
    fn new() -> Self {
        Self::with(ProducerOptions::new())
    }

    fn with(options: ProducerOptions<u64>) -> Self {
        Self {
            next: 0,
            options: Some(options),
        }
    }
}

type EmitterMessages = Msgs<u64>;

impl Producer for Emitter {
    type Messages = EmitterMessages;
    type Event = u64;

    async fn init(
        &mut self,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Result<ProducerOptions<u64>, StopReason> {
        Ok(self.options.take().unwrap_or_default())
    }

    async fn handle_demand(
        &mut self,
        _demand: usize,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<u64> {
        Noreply::none()
    }

    async fn handle_call(
        &mut self,
        n: u64,
        _from: ReplyTo<()>,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Reply<(), u64> {
        let events = (self.next..self.next + n).collect();
        self.next += n;
        Reply::Reply((), events)
    }
}

/// Takes events and does nothing with them; manual demand if asked.
struct Sink {
    manual: bool,
}

impl Consumer for Sink {
    type Messages = ();
    type Event = u64;

    async fn handle_subscribe(
        &mut self,
        _subscription: Subscription,
        _options: &SubscribeOptions<u64>,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Result<ConsumerDemand, StopReason> {
        Ok(if self.manual {
            ConsumerDemand::Manual
        } else {
            ConsumerDemand::Automatic
        })
    }

    async fn handle_events(
        &mut self,
        _events: Vec<u64>,
        _from: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        Noreply::none()
    }
}

/// Passes events on unchanged.
struct Pass {
    options: Option<ProducerConsumerOptions<u64, u64>>,
}

impl ProducerConsumer for Pass {
    type Messages = ();
    type In = u64;
    type Out = u64;

    async fn init(
        &mut self,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Result<ProducerConsumerOptions<u64, u64>, StopReason> {
        Ok(self.options.take().unwrap_or_default())
    }

    async fn handle_events(
        &mut self,
        events: Vec<u64>,
        _from: Subscription,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<u64> {
        Noreply::Emit(events)
    }
}

/// The first `n` events a new subscriber gets.
async fn first_events(producer: &impl weir_gen_stage::AsProducer<u64>, n: usize) -> Vec<u64> {
    use futures::StreamExt;
    let stream = weir_gen_stage::stream([(
        producer.producer_ref(),
        SubscribeOptions::new().max_demand(5),
    )])
    .expect("stream");
    stream.take(n).map(|e| e.expect("an event")).collect().await
}

#[tokio::test]
async fn a_consumer_with_max_100_min_80_has_the_demand_the_algorithm_says_after_each_batch() {
    let producer = weir_gen_stage::start_producer(Emitter::new())
        .await
        .expect("producer");
    let consumer = weir_gen_stage::start_consumer(Sink { manual: false })
        .await
        .expect("consumer");
    let sub = consumer
        .subscribe(
            &producer,
            SubscribeOptions::new().max_demand(100).min_demand(80),
        )
        .await
        .expect("accepted");

    // On subscribe the consumer asks max_demand.
    let status = consumer.status().await.expect("consumer status");
    assert_eq!(status.kind, StageKind::Consumer);
    assert!(status.producer.is_none() && status.consumers.is_empty());
    assert_eq!(status.producers.len(), 1);
    let upstream = status.producers[0];
    assert_eq!(upstream.id(), sub);
    assert_eq!(upstream.producer(), producer.id());
    assert_eq!(upstream.subscription.consumer, consumer.id());
    assert_eq!(upstream.mode, ConsumerDemand::Automatic);
    assert_eq!((upstream.max_demand, upstream.min_demand), (100, 80));
    assert_eq!(upstream.cancel, CancelMode::Permanent);
    assert!(upstream.acknowledged);
    assert_eq!(upstream.pending_demand, 100);
    let status = producer.status().await.expect("producer status");
    assert_eq!(status.kind, StageKind::Producer);
    assert!(status.producers.is_empty());
    assert_eq!(status.consumers.len(), 1);
    assert_eq!(status.consumers[0].id(), sub);
    assert_eq!(status.consumers[0].consumer(), consumer.id());
    assert_eq!(status.consumers[0].demand, 100);

    // 10 events: outstanding 90, above min_demand: nothing asked.
    producer.call(10, TIMEOUT).await.expect("emitted");
    let pending = |s: weir_gen_stage::StageStatus| s.producers[0].pending_demand;
    let given = |s: weir_gen_stage::StageStatus| s.consumers[0].demand;
    assert_eq!(pending(consumer.status().await.expect("status")), 90);
    assert_eq!(given(producer.status().await.expect("status")), 90);

    // 10 more: outstanding 80 is at min_demand, so the consumer asks
    // 100 - 80 = 20 and counts 100 outstanding again.
    producer.call(10, TIMEOUT).await.expect("emitted");
    assert_eq!(pending(consumer.status().await.expect("status")), 100);
    assert_eq!(given(producer.status().await.expect("status")), 100);

    // 25 in one message: pieces of 20 and 5; the first brings outstanding to
    // 80 and asks 20 (100 again), the second leaves 95.
    producer.call(25, TIMEOUT).await.expect("emitted");
    assert_eq!(pending(consumer.status().await.expect("status")), 95);
    assert_eq!(given(producer.status().await.expect("status")), 95);
}

#[tokio::test]
async fn default_options_show_as_max_1000_min_500_permanent() {
    let producer = weir_gen_stage::start_producer(Emitter::new())
        .await
        .expect("producer");
    let consumer = weir_gen_stage::start_consumer(Sink { manual: false })
        .await
        .expect("consumer");
    consumer
        .subscribe(&producer, SubscribeOptions::new())
        .await
        .expect("accepted");
    producer.call(500, TIMEOUT).await.expect("emitted");
    let upstream = consumer.status().await.expect("status").producers[0];
    assert_eq!((upstream.max_demand, upstream.min_demand), (1000, 500));
    assert_eq!(upstream.cancel, CancelMode::Permanent);
    // One piece of 500 brings outstanding to 500 = min_demand: ask 500.
    assert_eq!(upstream.pending_demand, 1000);
    let producer_side = producer.status().await.expect("status");
    assert_eq!(producer_side.consumers[0].demand, 1000);
    let side = producer_side.producer.expect("a producer side");
    assert_eq!(side.dispatcher, "demand");
    assert_eq!(side.demand_mode, DemandMode::Forward);
    assert_eq!(side.buffer.size, BufferSize::Limited(10_000));
    assert_eq!(side.buffer.keep, BufferKeep::Last);
    assert_eq!((side.buffer.len, side.buffer.discarded), (0, 0));
}

#[tokio::test]
async fn manual_demand_is_what_was_asked_minus_what_arrived() {
    let producer = weir_gen_stage::start_producer(Emitter::new())
        .await
        .expect("producer");
    let consumer = weir_gen_stage::start_consumer(Sink { manual: true })
        .await
        .expect("consumer");
    let sub = consumer
        .subscribe(&producer, SubscribeOptions::new().max_demand(10))
        .await
        .expect("accepted");
    let upstream = consumer.status().await.expect("status").producers[0];
    assert_eq!(upstream.mode, ConsumerDemand::Manual);
    assert_eq!(upstream.pending_demand, 0, "manual: nothing asked yet");

    consumer.ask_and_wait(sub, 5).await.expect("asked");
    assert_eq!(
        consumer.status().await.expect("status").producers[0].pending_demand,
        5
    );
    assert_eq!(
        producer.status().await.expect("status").consumers[0].demand,
        5
    );

    producer.call(3, TIMEOUT).await.expect("emitted");
    assert_eq!(
        consumer.status().await.expect("status").producers[0].pending_demand,
        2
    );
    assert_eq!(
        producer.status().await.expect("status").consumers[0].demand,
        2
    );

    // 4 more: 2 go out, 2 wait in the buffer.
    producer.call(4, TIMEOUT).await.expect("emitted");
    let status = producer.status().await.expect("status");
    assert_eq!(status.consumers[0].demand, 0);
    assert_eq!(status.producer.expect("producer side").buffer.len, 2);
    assert_eq!(
        consumer.status().await.expect("status").producers[0].pending_demand,
        0
    );
}

#[tokio::test]
async fn overflowing_a_buffer_that_keeps_the_last_counts_the_dropped_oldest() {
    let producer = weir_gen_stage::start_producer(Emitter::with(
        ProducerOptions::new()
            .buffer_size(5)
            .buffer_keep(BufferKeep::Last),
    ))
    .await
    .expect("producer");
    producer.call(8, TIMEOUT).await.expect("emitted");
    let buffer = producer
        .status()
        .await
        .expect("status")
        .producer
        .expect("producer side")
        .buffer;
    assert_eq!(buffer.len, 5);
    assert_eq!(buffer.discarded, 3);
    assert_eq!(buffer.size, BufferSize::Limited(5));
    assert_eq!(buffer.keep, BufferKeep::Last);

    // The count is cumulative.
    producer.call(2, TIMEOUT).await.expect("emitted");
    let buffer = producer
        .status()
        .await
        .expect("status")
        .producer
        .expect("producer side")
        .buffer;
    assert_eq!((buffer.len, buffer.discarded), (5, 5));

    // What is left is the newest five: 5..10.
    let got = first_events(&producer, 5).await;
    assert_eq!(got, vec![5, 6, 7, 8, 9]);
    let buffer = producer
        .status()
        .await
        .expect("status")
        .producer
        .expect("producer side")
        .buffer;
    assert_eq!((buffer.len, buffer.discarded), (0, 5));
}

#[tokio::test]
async fn overflowing_a_buffer_that_keeps_the_first_counts_the_dropped_incoming() {
    let producer = weir_gen_stage::start_producer(Emitter::with(
        ProducerOptions::new()
            .buffer_size(5)
            .buffer_keep(BufferKeep::First),
    ))
    .await
    .expect("producer");
    producer.call(8, TIMEOUT).await.expect("emitted");
    let buffer = producer
        .status()
        .await
        .expect("status")
        .producer
        .expect("producer side")
        .buffer;
    assert_eq!((buffer.len, buffer.discarded), (5, 3));
    assert_eq!(buffer.keep, BufferKeep::First);
    assert_eq!(producer.estimate_buffered_count().await, Ok(5));

    let got = first_events(&producer, 5).await;
    assert_eq!(got, vec![0, 1, 2, 3, 4]);
}

#[tokio::test]
async fn a_cancelled_subscription_disappears_from_both_sides() {
    let first = weir_gen_stage::start_producer(Emitter::new())
        .await
        .expect("producer");
    let second = weir_gen_stage::start_producer(Emitter::new())
        .await
        .expect("producer");
    let consumer = weir_gen_stage::start_consumer(Sink { manual: false })
        .await
        .expect("consumer");
    let temporary = SubscribeOptions::new()
        .max_demand(10)
        .cancel(CancelMode::Temporary);
    let a = consumer
        .subscribe(&first, temporary.clone())
        .await
        .expect("accepted");
    let b = consumer
        .subscribe(&second, temporary.clone())
        .await
        .expect("accepted");
    let ids =
        |s: &weir_gen_stage::StageStatus| s.producers.iter().map(|p| p.id()).collect::<Vec<_>>();
    let status = consumer.status().await.expect("status");
    assert_eq!(ids(&status), vec![a, b]);
    assert!(
        status
            .producers
            .iter()
            .all(|p| p.cancel == CancelMode::Temporary)
    );

    // The consumer passes the cancel to the producer, which confirms.
    consumer
        .cancel_upstream(a, StopReason::Normal)
        .expect("alive");
    consumer.status().await.expect("the cancel went out");
    assert!(first.status().await.expect("status").consumers.is_empty());
    assert_eq!(ids(&consumer.status().await.expect("status")), vec![b]);

    // Cancelled from the producer's side.
    second
        .cancel_downstream(b, StopReason::Normal)
        .expect("alive");
    assert!(second.status().await.expect("status").consumers.is_empty());
    assert!(
        consumer
            .status()
            .await
            .expect("status")
            .producers
            .is_empty()
    );
    assert!(consumer.is_alive(), "temporary subscriptions");
}

#[tokio::test]
async fn a_producer_consumer_shows_both_sides_and_the_events_it_holds_for_downstream_demand() {
    let producer = weir_gen_stage::start_producer(Emitter::new())
        .await
        .expect("producer");
    let pass = weir_gen_stage::start_producer_consumer(Pass {
        options: Some(ProducerConsumerOptions::new().dispatcher(BroadcastDispatcher::new())),
    })
    .await
    .expect("producer_consumer");
    pass.subscribe(&producer, SubscribeOptions::new().max_demand(10))
        .await
        .expect("accepted");

    // No consumer downstream: four events wait in its queue, not yet
    // counted as received by the subscription.
    producer.call(4, TIMEOUT).await.expect("emitted");
    let status = pass.status().await.expect("status");
    assert_eq!(status.kind, StageKind::ProducerConsumer);
    assert_eq!(status.queued_events, 4);
    assert_eq!(status.producers.len(), 1);
    assert_eq!(status.producers[0].pending_demand, 10);
    assert!(status.consumers.is_empty());
    let side = status.producer.expect("a producer side");
    assert_eq!(side.dispatcher, "broadcast");
    assert_eq!(side.buffer.size, BufferSize::Infinity);

    // A consumer asking 3: the queued message is handed over whole (as
    // GenStage's take_pc_events does), so the subscription counts 4
    // received (outstanding 6, above min_demand 5: no ask); 3 go out and
    // the fourth waits in the buffer.
    let consumer = weir_gen_stage::start_consumer(Sink { manual: true })
        .await
        .expect("consumer");
    let sub = consumer
        .subscribe(&pass, SubscribeOptions::new().max_demand(3))
        .await
        .expect("accepted");
    consumer.ask_and_wait(sub, 3).await.expect("asked");
    let status = pass.status().await.expect("status");
    assert_eq!(status.queued_events, 0);
    assert_eq!(status.producers[0].pending_demand, 6);
    assert_eq!(status.consumers.len(), 1);
    assert_eq!(status.consumers[0].consumer(), consumer.id());
    assert_eq!(status.consumers[0].demand, 0);
    assert_eq!(status.producer.expect("producer side").buffer.len, 1);
}

#[tokio::test]
async fn accumulate_mode_and_partition_queues_show_in_the_producer_side() {
    let by_parity = PartitionDispatcher::with_hash(2, |n: u64| Some((n, (n % 2) as usize)));
    let producer = weir_gen_stage::start_producer(Emitter::with(
        ProducerOptions::new()
            .dispatcher(by_parity)
            .demand(DemandMode::Accumulate),
    ))
    .await
    .expect("producer");
    let side = producer
        .status()
        .await
        .expect("status")
        .producer
        .expect("producer side");
    assert_eq!(side.dispatcher, "partition");
    assert_eq!(side.demand_mode, DemandMode::Accumulate);

    producer
        .set_demand_mode(DemandMode::Forward)
        .await
        .expect("forward");
    // No consumer for either partition: the dispatcher holds the events.
    producer.call(4, TIMEOUT).await.expect("emitted");
    let side = producer
        .status()
        .await
        .expect("status")
        .producer
        .expect("producer side");
    assert_eq!(side.demand_mode, DemandMode::Forward);
    assert_eq!(
        side.buffer.len + side.buffer.held_by_dispatcher,
        producer.estimate_buffered_count().await.expect("estimate")
    );
    assert_eq!(side.buffer.len + side.buffer.held_by_dispatcher, 4);
}

#[tokio::test]
async fn a_stopped_stage_answers_not_alive() {
    let producer = weir_gen_stage::start_producer(Emitter::new())
        .await
        .expect("producer");
    producer.stop(StopReason::Normal).await.expect("stopped");
    assert_eq!(
        producer.status().await,
        Err(Error::NotAlive {
            stage: producer.id()
        })
    );
    assert_eq!(
        producer.producer().status().await,
        Err(Error::NotAlive {
            stage: producer.id()
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stages_in_a_group_answer_the_same_status() {
    let group = StageGroup::new();
    let producer = group
        .start_producer(Emitter::new())
        .await
        .expect("producer");
    let consumer = group
        .start_consumer(Sink { manual: false })
        .await
        .expect("consumer");
    consumer
        .subscribe(
            &producer,
            SubscribeOptions::new().max_demand(100).min_demand(80),
        )
        .await
        .expect("accepted");
    producer.call(10, TIMEOUT).await.expect("emitted");
    assert_eq!(
        consumer.status().await.expect("status").producers[0].pending_demand,
        90
    );
    assert_eq!(
        producer.status().await.expect("status").consumers[0].demand,
        90
    );
}

#[tokio::test]
async fn a_raw_protocol_end_has_no_status() {
    let raw = weir_gen_stage::protocol::RawProducer::<u64>::new();
    let producer = raw.producer_ref();
    assert!(matches!(
        producer.status().await,
        Err(Error::WrongKind {
            operation: "status",
            ..
        })
    ));
}

#[tokio::test]
async fn events_a_broadcast_selector_rejects_do_not_count_against_the_consumers_demand() {
    let producer = weir_gen_stage::start_producer(Emitter::with(
        ProducerOptions::new().dispatcher(BroadcastDispatcher::new()),
    ))
    .await
    .expect("producer");
    let consumer = weir_gen_stage::start_consumer(Sink { manual: true })
        .await
        .expect("consumer");
    let sub = consumer
        .subscribe(
            &producer,
            SubscribeOptions::new()
                .max_demand(10)
                .selector(|n: &u64| n.is_multiple_of(2)),
        )
        .await
        .expect("accepted");
    consumer.ask_and_wait(sub, 4).await.expect("asked");
    // 0..4: the consumer gets 0 and 2; 1 and 3 cost it nothing.
    producer.call(4, TIMEOUT).await.expect("emitted");
    assert_eq!(
        consumer.status().await.expect("status").producers[0].pending_demand,
        2
    );
    assert_eq!(
        producer.status().await.expect("status").consumers[0].demand,
        2
    );
}
