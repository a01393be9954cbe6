//! A stage that stops hands what it still held to its hooks instead of
//! dropping it: `on_unhandled` gets the events that reached it and were never
//! handled, `on_undelivered` those it produced and never sent (and a
//! producer's hook gets what a dispatcher gives up while it runs). A
//! producer's buffer handed back on stop is the example of
//! `ProducerOptions::on_undelivered`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use weir_gen_stage::{
    Consumer, ConsumerContext, ConsumerDemand, ConsumerOptions, Noreply, PartitionDispatcher,
    Producer, ProducerContext, ProducerOptions, StopReason, SubscribeOptions, Subscription,
};

const TIMEOUT: Duration = Duration::from_secs(10);

type Seen = Arc<Mutex<Vec<u64>>>;

fn seen() -> Seen {
    Arc::default()
}

fn take(seen: &Seen) -> Vec<u64> {
    seen.lock().expect("no panic while locked").clone()
}

/// Emits 0, 1, 2, ... exactly as demanded.
struct Counter(u64);

impl Producer for Counter {
    type Messages = ();
    type Event = u64;

    async fn handle_demand(
        &mut self,
        demand: usize,
        _: &mut ProducerContext<'_, Self>,
    ) -> Noreply<u64> {
        let events = (self.0..self.0 + demand as u64).collect();
        self.0 += demand as u64;
        Noreply::Emit(events)
    }
}

/// Records what it handles; on the piece holding `panic_at` it waits (so
/// that more events reach its mailbox) and panics.
struct Fragile {
    handled: Seen,
    panic_at: u64,
}

impl Consumer for Fragile {
    type Messages = ();
    type Event = u64;

    async fn handle_events(
        &mut self,
        events: Vec<u64>,
        _: Subscription,
        _: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        if events.contains(&self.panic_at) {
            tokio::time::sleep(Duration::from_millis(50)).await;
            panic!("the consumer's own code failed");
        }
        self.handled
            .lock()
            .expect("no panic while locked")
            .extend(events);
        Noreply::none()
    }
}

/// Subscribes in manual mode and never asks.
struct Idle;

impl Consumer for Idle {
    type Messages = ();
    type Event = u64;

    async fn handle_subscribe(
        &mut self,
        _: Subscription,
        _: &SubscribeOptions<u64>,
        _: &mut ConsumerContext<'_, Self>,
    ) -> Result<ConsumerDemand, StopReason> {
        Ok(ConsumerDemand::Manual)
    }

    async fn handle_events(
        &mut self,
        _: Vec<u64>,
        _: Subscription,
        _: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        Noreply::none()
    }
}

async fn a_consumer_that_panics_hands_back_its_mailbox() {
    let handled = seen();
    let unhandled = seen();
    let sink = unhandled.clone();
    let options =
        ConsumerOptions::new().on_unhandled(move |events: Vec<u64>, reason: &StopReason| {
            assert!(matches!(reason, StopReason::Panicked(_)), "{reason:?}");
            sink.lock().expect("no panic while locked").extend(events);
        });
    let fragile = Fragile {
        handled: handled.clone(),
        panic_at: 5,
    };
    let consumer = weir_gen_stage::start_consumer_with(fragile, options)
        .await
        .expect("consumer");
    let producer = weir_gen_stage::start_producer(Counter(0))
        .await
        .expect("producer");
    consumer
        .subscribe(
            &producer,
            SubscribeOptions::new().max_demand(10).min_demand(5),
        )
        .await
        .expect("subscribed");
    let reason = tokio::time::timeout(TIMEOUT, consumer.stopped())
        .await
        .expect("the consumer stops");
    assert!(matches!(reason, StopReason::Panicked(_)), "{reason:?}");
    // 0..5 handled; 5..10 were in the panicking callback; 10..15, asked
    // for after the first piece, arrived during it and were never handled.
    assert_eq!(take(&handled), (0..5).collect::<Vec<_>>());
    assert_eq!(take(&unhandled), (10..15).collect::<Vec<_>>());
}

async fn a_cancelled_partition_hands_its_queue_to_the_producer() {
    let undelivered = seen();
    let sink = undelivered.clone();
    let options = ProducerOptions::new()
        .dispatcher(PartitionDispatcher::with_hash(2, |n: u64| {
            Some((n, (n % 2) as usize))
        }))
        .on_undelivered(move |events: Vec<u64>, _: &StopReason| {
            sink.lock().expect("no panic while locked").extend(events);
        });
    let producer = weir_gen_stage::start_producer_with(Counter(0), options)
        .await
        .expect("producer");
    let idle = weir_gen_stage::start_consumer(Idle)
        .await
        .expect("consumer");
    idle.subscribe(&producer, SubscribeOptions::new().partition(0))
        .await
        .expect("subscribed");
    let mut odd = weir_gen_stage::stream([(
        producer.producer(),
        SubscribeOptions::new().max_demand(4).partition(1),
    )])
    .expect("valid options");
    for expected in [1, 3] {
        let event = tokio::time::timeout(TIMEOUT, odd.next())
            .await
            .unwrap_or_else(|_| panic!("event {expected}"));
        assert_eq!(event.transpose().expect("no error"), Some(expected));
    }
    let status = producer.status().await.expect("status");
    let held = status
        .producer
        .expect("a producer side")
        .buffer
        .held_by_dispatcher;
    assert!(held >= 2, "the even numbers wait in partition 0: {held}");
    idle.stop(StopReason::custom("gone"))
        .await
        .expect("stopped");
    idle.stopped().await;
    // Once the producer has seen the cancel (the status answer comes
    // after it), partition 0's queue is back: the even numbers, from 0,
    // none lost. (The dispatcher asks for as many again; those wait for a
    // new consumer of partition 0.)
    producer.status().await.expect("status");
    let back = take(&undelivered);
    assert!(back.len() >= 2, "{back:?}");
    assert_eq!(
        back,
        (0..back.len() as u64).map(|i| 2 * i).collect::<Vec<_>>()
    );
    drop(odd);
}

#[tokio::test(flavor = "current_thread")]
async fn a_consumer_that_panics_hands_back_its_mailbox_current_thread() {
    a_consumer_that_panics_hands_back_its_mailbox().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_that_panics_hands_back_its_mailbox_multi_thread() {
    a_consumer_that_panics_hands_back_its_mailbox().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_cancelled_partition_hands_its_queue_to_the_producer_current_thread() {
    a_cancelled_partition_hands_its_queue_to_the_producer().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_partition_hands_its_queue_to_the_producer_multi_thread() {
    a_cancelled_partition_hands_its_queue_to_the_producer().await;
}
