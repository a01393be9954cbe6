//! Behaviour `shared/genstage/SEMANTICS.md` specifies that GenStage's own
//! test scenarios (the `genstage_*` files) do not pin down through running
//! stages: the default buffer sizes, `handle_demand` returning more than
//! asked, one `handle_demand` per ask, non-empty batches, the Demand
//! dispatcher inside a live producer, and extra subscription options
//! reaching the dispatcher.
//!
//! The consumers are mostly [`RawConsumer`]s, so a test sees exactly which
//! batches a producer sends on which subscription. A call to the producer is the
//! barrier: its mailbox is FIFO per sender, so once the call returns,
//! everything the test sent before it was handled.

use crate::support;

use support::*;
use weir_gen_stage::dispatchers::{
    DemandDispatcher, Dispatcher, Outbox, SubscribeError, Subscriber, SubscriptionId,
    SubscriptionOptions,
};
use weir_gen_stage::protocol::{RawConsumer, ToConsumer};
use weir_gen_stage::{
    AsProducer, CancelMode, Cancellation, Error, Msgs, Noreply, Producer, ProducerConsumer,
    ProducerConsumerContext, ProducerContext, ProducerOptions, ReplyTo, StopReason,
    SubscribeOptions, Subscription, new_subscription_id,
};

/// Events received so far (acks skipped), without waiting.
fn received_now(raw: &mut RawConsumer<u64>) -> Vec<Vec<u64>> {
    let mut batches = Vec::new();
    while let Some(msg) = raw.try_recv() {
        match msg {
            ToConsumer::Ack { .. } => {}
            ToConsumer::Events { events, .. } => batches.push(events),
            other => panic!("expected events, got {other:?}"),
        }
    }
    batches
}

/// A raw consumer subscribed to `producer` with max_demand 10.
fn subscribed(producer: &impl AsProducer<u64>) -> (RawConsumer<u64>, SubscriptionId) {
    let mut raw = RawConsumer::new();
    let sub = new_subscription_id();
    assert!(raw.subscribe(producer, sub, SubscriptionOptions::new(10, 5)));
    (raw, sub)
}

// ---------------------------------------------------------------------------
// Buffers

#[tokio::test]
async fn a_producer_buffers_ten_thousand_events_by_default_and_drops_the_oldest() {
    let producer = weir_gen_stage::start_producer(Counter::<u64>::notifying(inbox().0))
        .await
        .expect("the producer starts");

    // No consumer: everything is buffered, up to the default 10 000.
    sync_queue(&producer, list(0..10_005)).await;
    assert_eq!(producer.estimate_buffered_count().await.unwrap(), 10_000);

    // `buffer_keep: last` is the default: the five oldest were dropped.
    let (mut raw, sub) = subscribed(&producer);
    raw.ask(&producer, sub, 3);
    assert_eq!(next_events(&mut raw, sub).await, vec![5, 6, 7]);
    assert_eq!(producer.estimate_buffered_count().await.unwrap(), 9_997);
}

/// A producer_consumer that emits what it is cast, and passes events on.
struct Emitter;

type EmitterMessages = Msgs<(), (), Vec<u64>>;

impl ProducerConsumer for Emitter {
    type Messages = EmitterMessages;
    type In = u64;
    type Out = u64;

    async fn handle_events(
        &mut self,
        events: Vec<u64>,
        _from: Subscription,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<u64> {
        Noreply::Emit(events)
    }

    async fn handle_cast(
        &mut self,
        events: Vec<u64>,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<u64> {
        Noreply::Emit(events)
    }
}

#[tokio::test]
async fn a_producer_consumer_buffer_is_unbounded_by_default() {
    let emitter = weir_gen_stage::start_producer_consumer(Emitter)
        .await
        .expect("the producer_consumer starts");

    // Well past a producer's default of 10 000: nothing is dropped.
    emitter.cast(list(0..25_000)).unwrap();
    assert_eq!(emitter.estimate_buffered_count().await.unwrap(), 25_000);

    let (mut raw, sub) = subscribed(&emitter.producer());
    raw.ask(&emitter.producer(), sub, 2);
    assert_eq!(next_events(&mut raw, sub).await, vec![0, 1]);
}

// ---------------------------------------------------------------------------
// handle_demand

/// A producer that answers every demand with `factor` times as many events,
/// counting up, and reports each demand.
struct Generous {
    next: u64,
    factor: usize,
    notify: Notifier<u64>,
}

impl Producer for Generous {
    type Messages = ();
    type Event = u64;

    async fn handle_demand(
        &mut self,
        demand: usize,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<u64> {
        self.notify.note(Note::Demand(demand));
        let count = (demand * self.factor) as u64;
        let start = self.next;
        self.next += count;
        Noreply::Emit((start..start + count).collect())
    }

    /// A barrier.
    async fn handle_call(
        &mut self,
        _request: (),
        _from: ReplyTo<()>,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> weir_gen_stage::Reply<(), u64> {
        weir_gen_stage::Reply::Reply((), Vec::new())
    }
}

#[tokio::test]
async fn events_beyond_the_demand_are_buffered_and_serve_the_next_ask() {
    let (notify, mut inbox) = inbox();
    let producer = weir_gen_stage::start_producer(Generous {
        next: 0,
        factor: 3,
        notify,
    })
    .await
    .expect("the producer starts");
    let (mut raw, sub) = subscribed(&producer);

    // Asked 2, emitted 6: 2 go out, 4 are buffered.
    raw.ask(&producer, sub, 2);
    assert_eq!(next_events(&mut raw, sub).await, vec![0, 1]);
    inbox.assert_note(Note::Demand(2)).await;
    assert_eq!(producer.estimate_buffered_count().await.unwrap(), 4);

    // The buffer serves the next ask; handle_demand is not called.
    raw.ask(&producer, sub, 3);
    assert_eq!(next_events(&mut raw, sub).await, vec![2, 3, 4]);
    producer.call((), TIMEOUT).await.unwrap();
    inbox.refute_received("a demand served from the buffer", |note| {
        matches!(note, Note::Demand(_))
    });

    // Only what the buffer cannot serve reaches handle_demand.
    raw.ask(&producer, sub, 2);
    let mut got = next_events(&mut raw, sub).await;
    if got.len() < 2 {
        got.extend(next_events(&mut raw, sub).await);
    }
    assert_eq!(got, vec![5, 6]);
    inbox.assert_note(Note::Demand(1)).await;
    assert_eq!(producer.estimate_buffered_count().await.unwrap(), 2);
}

#[tokio::test]
async fn handle_demand_is_called_once_per_ask_and_demands_are_not_summed() {
    let (notify, mut inbox) = inbox();
    let producer =
        weir_gen_stage::start_producer(NothingProducer::<u64>::new(notify, ProducerOptions::new()))
            .await
            .expect("the producer starts");
    let (first, a) = subscribed(&producer);
    let (second, b) = subscribed(&producer);

    first.ask(&producer, a, 3);
    second.ask(&producer, b, 4);
    first.ask(&producer, a, 2);
    producer.call((), TIMEOUT).await.unwrap();

    let demands: Vec<_> = inbox
        .drain()
        .into_iter()
        .filter(|note| matches!(note, Note::Demand(_)))
        .collect();
    assert_eq!(
        demands,
        vec![Note::Demand(3), Note::Demand(4), Note::Demand(2)]
    );
}

#[tokio::test]
async fn events_travel_as_non_empty_batches() {
    let producer = weir_gen_stage::start_producer(Counter::<u64>::notifying(inbox().0))
        .await
        .expect("the producer starts");
    let (mut raw, sub) = subscribed(&producer);
    raw.ask(&producer, sub, 10);

    // Emitting nothing sends nothing (the call returns once the producer
    // dispatched what it emitted).
    sync_queue(&producer, Vec::new()).await;
    assert_eq!(received_now(&mut raw), Vec::<Vec<u64>>::new());

    sync_queue(&producer, vec![7]).await;
    assert_eq!(next_events(&mut raw, sub).await, vec![7]);
}

// ---------------------------------------------------------------------------
// The Demand dispatcher inside a producer

#[tokio::test]
async fn the_demand_dispatcher_serves_the_largest_outstanding_demand_first() {
    let producer = weir_gen_stage::start_producer(Counter::<u64>::notifying(inbox().0))
        .await
        .expect("the producer starts");
    let (mut small, a) = subscribed(&producer);
    let (mut large, b) = subscribed(&producer);
    small.ask(&producer, a, 2);
    large.ask(&producer, b, 5);

    // All four fit the largest demand (5).
    sync_queue(&producer, list(0..4)).await;
    assert_eq!(next_events(&mut large, b).await, vec![0, 1, 2, 3]);
    assert_eq!(received_now(&mut small), Vec::<Vec<u64>>::new());

    // Now `small` (2) leads `large` (1): it is served first, then `large`.
    sync_queue(&producer, list(4..7)).await;
    assert_eq!(next_events(&mut small, a).await, vec![4, 5]);
    assert_eq!(next_events(&mut large, b).await, vec![6]);
}

#[tokio::test]
async fn the_demand_dispatcher_reuses_a_cancelled_consumers_unmet_demand() {
    let (notify, mut inbox) = inbox();
    let producer =
        weir_gen_stage::start_producer(NothingProducer::<u64>::new(notify, ProducerOptions::new()))
            .await
            .expect("the producer starts");
    let (first, a) = subscribed(&producer);
    first.ask(&producer, a, 5);
    inbox.assert_note(Note::Demand(5)).await;

    // The producer owes 5 events to a subscription that is gone.
    first.cancel(&producer, a, StopReason::Normal);
    let (second, b) = subscribed(&producer);
    second.ask(&producer, b, 3);
    producer.call((), TIMEOUT).await.unwrap();
    inbox.refute_received("a demand already requested upstream", |note| {
        matches!(note, Note::Demand(_))
    });

    // Past what is pending, demand reaches handle_demand again.
    second.ask(&producer, b, 4);
    inbox.assert_note(Note::Demand(2)).await;
}

#[tokio::test]
async fn the_demand_dispatcher_warns_about_an_ask_larger_than_the_expected_max_demand() {
    let (log, _guard) = CapturedLog::start();
    let producer = weir_gen_stage::start_producer(Counter::<u64>::notifying(inbox().0))
        .await
        .expect("the producer starts");
    let (first, a) = subscribed(&producer);
    let (second, b) = subscribed(&producer);
    // GenStage's Demand dispatcher expects every consumer to ask what the
    // first ask asked (its max_demand): here 5, so 8 is warned about even
    // though the subscription's max_demand is 10.
    first.ask(&producer, a, 5);
    barrier(&producer).await;
    assert!(!log.contents().contains("AskLargerThanMaxDemand"));

    second.ask(&producer, b, 8);
    barrier(&producer).await;
    let contents = log.contents();
    assert!(
        contents.contains("AskLargerThanMaxDemand") && contents.contains("asked: 8"),
        "{contents}"
    );
    // A warning, not a failure.
    assert!(producer.is_alive());
}

// ---------------------------------------------------------------------------
// Extra options

/// The Demand dispatcher behind a gate: a subscription needs the extra option
/// `token: "open"`.
struct Gated(DemandDispatcher);

impl Dispatcher<u64> for Gated {
    fn subscribe(
        &mut self,
        subscriber: Subscriber,
        options: &SubscriptionOptions<u64>,
        out: &mut Outbox<u64>,
    ) -> Result<usize, SubscribeError> {
        match options.extra.get("token").and_then(|token| token.as_str()) {
            Some("open") => self.0.subscribe(subscriber, options, out),
            Some(other) => Err(SubscribeError::Refused(format!("wrong token {other:?}"))),
            None => Err(SubscribeError::Refused("no token".to_owned())),
        }
    }

    fn cancel(&mut self, subscription: SubscriptionId, out: &mut Outbox<u64>) -> usize {
        Dispatcher::<u64>::cancel(&mut self.0, subscription, out)
    }

    fn ask(&mut self, subscription: SubscriptionId, n: usize, out: &mut Outbox<u64>) -> usize {
        Dispatcher::<u64>::ask(&mut self.0, subscription, n, out)
    }

    fn dispatch(&mut self, events: Vec<u64>, out: &mut Outbox<u64>) -> Vec<u64> {
        self.0.dispatch(events, out)
    }

    fn name(&self) -> &str {
        "gated"
    }
}

#[tokio::test]
async fn extra_subscription_options_reach_the_dispatcher() {
    let producer = weir_gen_stage::start_producer(
        Counter::<u64>::notifying(inbox().0)
            .with_options(ProducerOptions::new().dispatcher(Gated(DemandDispatcher::new()))),
    )
    .await
    .expect("the producer starts");
    let (notify, mut consumed) = inbox();
    let consumer = weir_gen_stage::start_consumer(Forwarder::new(notify))
        .await
        .expect("the consumer starts");

    // Temporary: a refused subscription does not stop the consumer.
    let temporary = SubscribeOptions::new().cancel(CancelMode::Temporary);
    for (options, refusal) in [
        (temporary.clone(), "no token"),
        (temporary.extra("token", "shut"), "wrong token \"shut\""),
    ] {
        let refused = consumer.subscribe(&producer, options).await;
        match &refused {
            Err(Error::SubscriptionRefused {
                cancellation:
                    Cancellation::Cancel(StopReason::SubscriptionRefused(SubscribeError::Refused(why))),
                ..
            }) => assert_eq!(why, refusal),
            other => panic!("expected the gate's refusal, got {other:?}"),
        }
    }

    consumer
        .subscribe(&producer, SubscribeOptions::new().extra("token", "open"))
        .await
        .expect("the gate lets the subscription in");
    sync_queue(&producer, vec![1, 2, 3]).await;
    consumed.assert_consumed(vec![1, 2, 3]).await;
}
