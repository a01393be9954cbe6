//! Options given when a stage starts (`start_*_with`): the base that the
//! options returned by `init` override, one by one.

use weir_gen_stage::{
    BroadcastDispatcher, BufferKeep, BufferSize, ConsumerOptions, DemandMode, ForEach, Noreply,
    PartitionDispatcher, Producer, ProducerContext, ProducerHandle, ProducerOptions, StopReason,
    SubscribeOptions,
};

/// Emits nothing; its `init` returns `options` (taken once).
struct Quiet {
    options: Option<ProducerOptions<u32>>,
}

impl Producer for Quiet {
    type Messages = ();
    type Event = u32;

    async fn init(
        &mut self,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Result<ProducerOptions<u32>, StopReason> {
        Ok(self.options.take().unwrap_or_default())
    }

    async fn handle_demand(
        &mut self,
        _demand: usize,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<u32> {
        Noreply::none()
    }
}

#[tokio::test(flavor = "current_thread")]
async fn options_given_at_the_start_are_used_when_init_sets_none() {
    let options = ProducerOptions::new()
        .dispatcher(BroadcastDispatcher::new())
        .buffer_size(7)
        .buffer_keep(BufferKeep::First)
        .demand(DemandMode::Accumulate);
    let quiet: ProducerHandle<Quiet> =
        weir_gen_stage::start_producer_with(Quiet { options: None }, options)
            .await
            .expect("producer");
    let status = quiet.status().await.expect("running");
    let producer = status.producer.expect("a producer side");
    assert_eq!(producer.dispatcher, "broadcast");
    assert_eq!(producer.demand_mode, DemandMode::Accumulate);
    assert_eq!(producer.buffer.size, BufferSize::Limited(7));
    assert_eq!(producer.buffer.keep, BufferKeep::First);
}

#[tokio::test(flavor = "current_thread")]
async fn what_init_sets_wins_option_by_option() {
    let from_init = ProducerOptions::new().dispatcher(PartitionDispatcher::new(2));
    let at_start = ProducerOptions::new()
        .dispatcher(BroadcastDispatcher::new())
        .buffer_size(3);
    let quiet = weir_gen_stage::start_producer_with(
        Quiet {
            options: Some(from_init),
        },
        at_start,
    )
    .await
    .expect("producer");
    let producer = quiet
        .status()
        .await
        .expect("running")
        .producer
        .expect("a producer side");
    assert_eq!(producer.dispatcher, "partition");
    assert_eq!(producer.buffer.size, BufferSize::Limited(3));
    // Unset on both sides: GenStage's defaults.
    assert_eq!(producer.buffer.keep, BufferKeep::Last);
    assert_eq!(producer.demand_mode, DemandMode::Forward);
}

#[tokio::test(flavor = "current_thread")]
async fn a_producer_consumer_keeps_its_own_defaults_under_start_options() {
    let doubled = weir_gen_stage::start_producer_consumer_with(
        weir_gen_stage::Map::new(|n: u32| n * 2),
        weir_gen_stage::ProducerConsumerOptions::new().buffer_keep(BufferKeep::First),
    )
    .await
    .expect("map");
    let producer = doubled
        .status()
        .await
        .expect("running")
        .producer
        .expect("a producer side");
    assert_eq!(producer.buffer.size, BufferSize::Infinity);
    assert_eq!(producer.buffer.keep, BufferKeep::First);
    assert_eq!(producer.dispatcher, "demand");
}

#[tokio::test(flavor = "current_thread")]
async fn buffer_size_zero_given_at_the_start_is_refused() {
    let refused = weir_gen_stage::start_producer_with(
        Quiet { options: None },
        ProducerOptions::new().buffer_size(0),
    )
    .await;
    assert!(
        matches!(
            refused,
            Err(weir_gen_stage::Error::InvalidOption {
                option: "buffer_size",
                ..
            })
        ),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_consumer_subscribes_to_the_producers_given_at_the_start() {
    let numbers = weir_gen_stage::from_iter(0..5u32).await.expect("producer");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let sink = weir_gen_stage::start_consumer_with(
        ForEach::new(move |n: u32| {
            let _ = tx.send(n);
        }),
        ConsumerOptions::new().subscribe_to(&numbers, SubscribeOptions::new().max_demand(2)),
    )
    .await
    .expect("consumer");
    assert_eq!(sink.stopped().await, StopReason::Normal);
    let mut got = Vec::new();
    while let Ok(n) = rx.try_recv() {
        got.push(n);
    }
    assert_eq!(got, [0, 1, 2, 3, 4]);
}
