//! A panic in a callback stops that stage with `Panicked`, which travels by
//! cancel mode like any other reason; the runtime and other pipelines go on.

use crate::harness;

use harness::{
    Counter, CounterCall, Doubler, Note, Recorder, TIMEOUT, consumed, next_matching, notes,
};
use weir_gen_stage::{
    CancelMode, Cancellation, Error, Noreply, Producer, ProducerContext, ProducerOptions,
    StopReason, SubscribeOptions,
};

fn panicked(message: &str) -> StopReason {
    StopReason::Panicked(message.to_owned())
}

#[tokio::test]
async fn a_panic_in_handle_events_stops_the_consumer_with_panicked() {
    let (notify, mut seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify.clone()))
        .await
        .expect("producer");
    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify).panicking())
        .await
        .expect("consumer");
    consumer
        .async_subscribe(&producer, SubscribeOptions::new().max_demand(3))
        .expect("valid options");
    assert_eq!(
        consumer.stopped().await,
        panicked("handle_events was asked to panic")
    );
    // The producer saw its consumer go down with that reason.
    assert_eq!(
        next_matching(&mut seen, |n| match n {
            Note::ProducerCancelled(_, c) => Some(c),
            _ => None,
        })
        .await,
        Cancellation::Down(panicked("handle_events was asked to panic"))
    );
    assert!(producer.is_alive());
}

#[tokio::test]
async fn the_panic_travels_down_permanent_subscriptions_and_stops_at_temporary_ones() {
    let (notify, mut seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify.clone()).silent())
        .await
        .expect("producer");
    let doubler = weir_gen_stage::start_producer_consumer(Doubler {
        notify: notify.clone(),
    })
    .await
    .expect("producer_consumer");
    doubler
        .subscribe(&producer, SubscribeOptions::new())
        .await
        .expect("accepted");
    let permanent = weir_gen_stage::start_consumer(Recorder::new(notify.clone()))
        .await
        .expect("consumer");
    permanent
        .subscribe(&doubler, SubscribeOptions::new())
        .await
        .expect("accepted");
    let temporary = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    temporary
        .subscribe(
            &doubler,
            SubscribeOptions::new().cancel(CancelMode::Temporary),
        )
        .await
        .expect("accepted");

    let error = doubler
        .call(harness::RecorderCall::Panic, TIMEOUT)
        .await
        .expect_err("the call panicked");
    let reason = panicked("the producer_consumer's handle_call was asked to panic");
    assert_eq!(
        error,
        Error::Stopped {
            stage: doubler.id(),
            reason: reason.clone()
        }
    );
    assert_eq!(permanent.stopped().await, reason);
    temporary
        .call(harness::RecorderCall::Ping, TIMEOUT)
        .await
        .expect("temporary consumer keeps running");
    // The producer upstream saw the producer_consumer go down and keeps running.
    assert_eq!(
        next_matching(&mut seen, |n| match n {
            Note::ProducerCancelled(_, c) => Some(c),
            _ => None,
        })
        .await,
        Cancellation::Down(reason)
    );
    assert!(producer.is_alive());
}

#[tokio::test]
async fn a_panic_in_handle_call_answers_the_caller_with_the_stop_reason() {
    let (notify, _seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify))
        .await
        .expect("producer");
    assert_eq!(
        producer.call(CounterCall::Panic, TIMEOUT).await,
        Err(Error::Stopped {
            stage: producer.id(),
            reason: panicked("handle_call was asked to panic")
        })
    );
}

#[tokio::test]
async fn other_pipelines_keep_running_after_a_panic() {
    let (notify, mut seen) = notes();
    let broken = weir_gen_stage::start_producer(Counter::new(0, notify.clone()))
        .await
        .expect("producer");
    let crashing = weir_gen_stage::start_consumer(Recorder::new(notify.clone()).panicking())
        .await
        .expect("consumer");
    crashing
        .async_subscribe(&broken, SubscribeOptions::new())
        .expect("valid options");
    crashing.stopped().await;

    let healthy = weir_gen_stage::start_producer(Counter::new(100, notify.clone()))
        .await
        .expect("producer");
    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    consumer
        .subscribe(&healthy, SubscribeOptions::new().max_demand(2))
        .await
        .expect("accepted");
    assert_eq!(consumed(&mut seen).await, vec![100]);
}

/// A producer whose `init` panics.
struct BrokenInit;

impl Producer for BrokenInit {
    type Messages = ();
    type Event = u8;

    async fn init(
        &mut self,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Result<ProducerOptions<u8>, StopReason> {
        panic!("init was asked to panic")
    }

    async fn handle_demand(
        &mut self,
        _demand: usize,
        _ctx: &mut ProducerContext<'_, Self>,
    ) -> Noreply<u8> {
        Noreply::none()
    }
}

#[tokio::test]
async fn a_panic_in_init_makes_the_start_fail() {
    let error = weir_gen_stage::start_producer(BrokenInit)
        .await
        .expect_err("no start");
    assert!(
        matches!(&error, Error::InitFailed { reason, .. } if *reason == panicked("init was asked to panic")),
        "{error:?}"
    );
}
