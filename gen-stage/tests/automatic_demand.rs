//! Automatic demand, end to end: a consumer stage against a producer driven
//! by hand, so every ask and every piece handed to `handle_events` is seen.
//! The numbers are GenStage's (see SEMANTICS.md).

use crate::harness;

use harness::{Logs, Note, Notes, Recorder, RecorderCall, consumed, notes};
use weir_gen_stage::protocol::{RawProducer, ToProducer};
use weir_gen_stage::{CancelMode, ConsumerRef, SubscribeOptions, SubscriptionId};

struct Setup {
    producer: RawProducer<u64>,
    consumer: ConsumerRef<u64>,
    sub: SubscriptionId,
    seen: Notes<u64>,
    stage: weir_gen_stage::ConsumerHandle<Recorder<u64>>,
}

/// A consumer subscribed with `max`/`min`; returns after its first ask.
async fn subscribed(max: usize, min: usize) -> (Setup, usize) {
    let mut producer = RawProducer::new();
    let (notify, seen) = notes();
    let stage = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    stage
        .async_subscribe(
            &producer.producer_ref(),
            SubscribeOptions::new().max_demand(max).min_demand(min),
        )
        .expect("valid options");
    let Some(ToProducer::Subscribe {
        subscription,
        consumer,
        ..
    }) = producer.recv().await
    else {
        panic!("expected a subscription");
    };
    producer.ack(&consumer, subscription);
    let first = next_ask(&mut producer).await;
    let setup = Setup {
        producer,
        consumer,
        sub: subscription,
        seen,
        stage,
    };
    (setup, first)
}

async fn next_ask(producer: &mut RawProducer<u64>) -> usize {
    match tokio::time::timeout(harness::TIMEOUT, producer.recv()).await {
        Ok(Some(ToProducer::Ask { n, .. })) => n,
        other => panic!("expected an ask, got {other:?}"),
    }
}

impl Setup {
    fn send(&self, events: std::ops::Range<u64>) {
        self.producer
            .send_events(&self.consumer, self.sub, events.collect());
    }

    /// Every ask sent so far, once the consumer has handled everything.
    async fn asks(&mut self) -> Vec<usize> {
        self.stage
            .call(RecorderCall::Ping, harness::TIMEOUT)
            .await
            .expect("ping");
        let mut asks = Vec::new();
        while let Some(msg) = self.producer.try_recv() {
            if let ToProducer::Ask { n, .. } = msg {
                asks.push(n);
            }
        }
        asks
    }
}

fn range(r: std::ops::Range<u64>) -> Vec<u64> {
    r.collect()
}

#[tokio::test]
async fn defaults_1000_500_cut_a_batch_of_1000_into_two_pieces_of_500() {
    let (mut s, first) = subscribed(1000, 500).await;
    assert_eq!(first, 1000);
    s.send(0..1000);
    assert_eq!(consumed(&mut s.seen).await, range(0..500));
    assert_eq!(consumed(&mut s.seen).await, range(500..1000));
    // Ask 500 after the first piece (500 outstanding <= 500), again after the second.
    assert_eq!(s.asks().await, vec![500, 500]);
}

#[tokio::test]
async fn max_100_min_80_cuts_pieces_of_20_and_asks_20_after_each() {
    let (mut s, first) = subscribed(100, 80).await;
    assert_eq!(first, 100);
    s.send(0..100);
    for piece in 0..5 {
        assert_eq!(
            consumed(&mut s.seen).await,
            range(piece * 20..piece * 20 + 20)
        );
    }
    assert_eq!(s.asks().await, vec![20; 5]);
}

#[tokio::test]
async fn max_100_min_20_gives_80_then_20_then_80s() {
    let (mut s, first) = subscribed(100, 20).await;
    assert_eq!(first, 100);
    s.send(0..100);
    assert_eq!(consumed(&mut s.seen).await, range(0..80));
    assert_eq!(consumed(&mut s.seen).await, range(80..100));
    // 20 outstanding after the first piece: ask 80; 80 outstanding after the second: nothing.
    assert_eq!(s.asks().await, vec![80]);
    s.send(100..180);
    assert_eq!(consumed(&mut s.seen).await, range(100..180));
    assert_eq!(s.asks().await, vec![100]);
    s.send(180..280);
    assert_eq!(consumed(&mut s.seen).await, range(180..260));
    assert_eq!(consumed(&mut s.seen).await, range(260..280));
}

#[tokio::test]
async fn max_1_min_0_hands_one_event_per_piece_and_asks_one_each() {
    let (mut s, first) = subscribed(1, 0).await;
    assert_eq!(first, 1);
    for n in 0..5 {
        s.send(n..n + 1);
        assert_eq!(consumed(&mut s.seen).await, vec![n]);
        assert_eq!(next_ask(&mut s.producer).await, 1);
    }
}

#[tokio::test]
async fn asks_wait_until_outstanding_demand_falls_to_min_demand() {
    // GenStage's documentation example: 1000/750, events arriving 100 at a time.
    let (mut s, _) = subscribed(1000, 750).await;
    s.send(0..100);
    s.send(100..200);
    assert_eq!(consumed(&mut s.seen).await, range(0..100));
    assert_eq!(consumed(&mut s.seen).await, range(100..200));
    assert!(s.asks().await.is_empty(), "800 outstanding is above 750");
    s.send(200..300);
    assert_eq!(consumed(&mut s.seen).await, range(200..300));
    assert_eq!(s.asks().await, vec![300]);
}

#[tokio::test(flavor = "current_thread")]
async fn excess_events_are_handed_over_and_logged() {
    let (logs, _guard) = Logs::capture();
    let (mut s, _) = subscribed(10, 5).await;
    s.send(0..12);
    assert_eq!(consumed(&mut s.seen).await, range(0..5));
    assert_eq!(consumed(&mut s.seen).await, range(5..10));
    assert_eq!(consumed(&mut s.seen).await, range(10..12));
    // Only the 10 asked for count as demand met.
    assert_eq!(s.asks().await, vec![5, 5]);
    assert!(
        logs.text().contains("2 events in excess"),
        "{}",
        logs.text()
    );
}

#[tokio::test]
async fn a_chain_with_max_demand_1_delivers_every_event_in_order() {
    let (notify, mut seen) = notes();
    let numbers = weir_gen_stage::from_iter(0..200u64)
        .await
        .expect("producer");
    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    consumer
        .subscribe(&numbers, SubscribeOptions::new().max_demand(1))
        .await
        .expect("accepted");
    let mut all = Vec::new();
    while all.len() < 200 {
        let piece = consumed(&mut seen).await;
        assert_eq!(piece.len(), 1);
        all.extend(piece);
    }
    assert_eq!(all, range(0..200));
    assert!(matches!(
        harness::next(&mut seen).await,
        Note::ConsumerCancelled(..) | Note::Terminated(_)
    ));
}

/// The doubler's subscription is temporary, and the stream is read for
/// exactly the 20 000 events: with a permanent one, the doubler stops as soon
/// as the producer's normal stop reaches it with nothing queued, and drops
/// the events it has buffered beyond the stream's demand (as GenStage does:
/// only events *queued* before a cancel are handled first). Whether the last
/// events got out before that would depend on which of the stream's next ask
/// and the producer's stop reaches the doubler first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_on_a_multi_thread_runtime_delivers_every_event_once_in_order() {
    use futures::StreamExt;
    let (notify, _seen) = notes();
    let numbers = weir_gen_stage::from_iter(0..20_000u64)
        .await
        .expect("producer");
    let doubler = weir_gen_stage::start_producer_consumer(harness::Doubler { notify })
        .await
        .expect("producer_consumer");
    doubler
        .subscribe(
            &numbers,
            SubscribeOptions::new()
                .max_demand(7)
                .cancel(CancelMode::Temporary),
        )
        .await
        .expect("accepted");
    let events: Vec<u64> =
        weir_gen_stage::stream([(doubler.producer(), SubscribeOptions::new().max_demand(3))])
            .expect("stream")
            .map(|e| e.expect("an event"))
            .take(20_000)
            .collect()
            .await;
    assert_eq!(events, (0..20_000).map(|n| n * 2).collect::<Vec<u64>>());
}
