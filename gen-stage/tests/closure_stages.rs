//! Stages built from closures: `for_each`, `map`, `filter_map`,
//! `flat_map`, and the closure types started with options or in a group.

use tokio::sync::mpsc;
use weir_gen_stage::{
    BroadcastDispatcher, ConsumerHandle, ForEach, Map, ProducerConsumerHandle,
    ProducerConsumerOptions, StageGroup, StopReason, SubscribeOptions,
};

fn collect(rx: &mut mpsc::UnboundedReceiver<u64>) -> Vec<u64> {
    let mut got = Vec::new();
    while let Ok(n) = rx.try_recv() {
        got.push(n);
    }
    got
}

#[tokio::test(flavor = "current_thread")]
async fn from_iter_map_filter_map_for_each_is_a_pipeline_without_a_trait_impl() {
    let numbers = weir_gen_stage::from_iter(1..=20u64)
        .await
        .expect("producer");
    let doubled = weir_gen_stage::map(|n: u64| n * 2).await.expect("map");
    doubled
        .subscribe(&numbers, SubscribeOptions::new().max_demand(3))
        .await
        .expect("accepted");
    let fours = weir_gen_stage::filter_map(|n: u64| n.is_multiple_of(4).then_some(n / 4))
        .await
        .expect("filter_map");
    fours
        .subscribe(&doubled, SubscribeOptions::new().max_demand(2))
        .await
        .expect("accepted");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let sink = weir_gen_stage::for_each(move |n: u64| {
        let _ = tx.send(n);
    })
    .await
    .expect("for_each");
    sink.subscribe(&fours, SubscribeOptions::new())
        .await
        .expect("accepted");
    // Permanent subscriptions: the end of the iterator stops every stage.
    assert_eq!(sink.stopped().await, StopReason::Normal);
    assert_eq!(collect(&mut rx), (1..=10).collect::<Vec<_>>());
}

#[tokio::test(flavor = "current_thread")]
async fn flat_map_emits_every_item_in_order_even_beyond_demand() {
    let numbers = weir_gen_stage::from_iter(0..4u64).await.expect("producer");
    let triple = weir_gen_stage::flat_map(|n: u64| [n * 10, n * 10 + 1, n * 10 + 2])
        .await
        .expect("flat_map");
    triple
        .subscribe(&numbers, SubscribeOptions::new().max_demand(2))
        .await
        .expect("accepted");
    let (tx, mut rx) = mpsc::unbounded_channel();
    // Asks one at a time: most of what flat_map emits waits in its buffer.
    let sink = weir_gen_stage::for_each(move |n: u64| {
        let _ = tx.send(n);
    })
    .await
    .expect("for_each");
    sink.subscribe(&triple, SubscribeOptions::new().max_demand(1).min_demand(0))
        .await
        .expect("accepted");
    assert_eq!(sink.stopped().await, StopReason::Normal);
    assert_eq!(
        collect(&mut rx),
        [0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closure_stages_start_in_a_group_with_a_dispatcher_option() {
    let group = StageGroup::new();
    let numbers = weir_gen_stage::from_iter(0..6u64).await.expect("producer");
    // Every consumer of `copies` gets every event: a Broadcast dispatcher
    // chosen at the start, no `init` written.
    let options = ProducerConsumerOptions::new().dispatcher(BroadcastDispatcher::new());
    let copies: ProducerConsumerHandle<Map<u64, u64, _>> = group
        .start_producer_consumer_with(Map::new(|n: u64| n + 100), options)
        .await
        .expect("map");
    let status = copies.status().await.expect("running");
    assert_eq!(
        status.producer.expect("a producer side").dispatcher,
        "broadcast"
    );

    let mut receivers = Vec::new();
    let mut sinks: Vec<ConsumerHandle<ForEach<u64, _>>> = Vec::new();
    for _ in 0..2 {
        let (tx, rx) = mpsc::unbounded_channel();
        let sink = group
            .start_consumer(ForEach::new(move |n: u64| {
                let _ = tx.send(n);
            }))
            .await
            .expect("for_each");
        sink.subscribe(&copies, SubscribeOptions::new())
            .await
            .expect("accepted");
        receivers.push(rx);
        sinks.push(sink);
    }
    // Everyone is subscribed: let the events flow.
    copies
        .subscribe(&numbers, SubscribeOptions::new())
        .await
        .expect("accepted");
    for (sink, rx) in sinks.iter().zip(&mut receivers) {
        assert_eq!(sink.stopped().await, StopReason::Normal);
        assert_eq!(collect(rx), (100..106).collect::<Vec<_>>());
    }
}
