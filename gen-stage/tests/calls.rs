//! Calls, casts and infos: replies and events in GenStage's order,
//! timeouts, stopping from a call.

use crate::harness;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness::{Counter, CounterCall, CounterInfo, Note, TIMEOUT, next_matching, notes};
use weir_gen_stage::protocol::{RawConsumer, ToConsumer};
use weir_gen_stage::{
    Consumer, ConsumerContext, Error, Msgs, Noreply, StopReason, Subscription, SubscriptionOptions,
    new_subscription_id,
};

/// Runs `call` and reads the raw consumer concurrently; returns which
/// arrived first, the reply or the events.
async fn arrival_order(request: CounterCall) -> Vec<&'static str> {
    let (notify, _seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify).silent())
        .await
        .expect("producer");
    let mut consumer = RawConsumer::<u64>::new();
    let sub = new_subscription_id();
    consumer.subscribe(&producer, sub, SubscriptionOptions::new(10, 5));
    consumer.ask(&producer, sub, 10);
    assert_eq!(
        consumer.recv().await,
        Some(ToConsumer::Ack { subscription: sub })
    );
    producer
        .call(CounterCall::Queue(vec![]), TIMEOUT)
        .await
        .expect("barrier");

    let order = Arc::new(Mutex::new(Vec::new()));
    let log = order.clone();
    let reader = tokio::spawn(async move {
        if let Some(ToConsumer::Events { .. }) = consumer.recv().await {
            log.lock().expect("order").push("events");
        }
    });
    let log = order.clone();
    let caller = tokio::spawn(async move {
        producer.call(request, TIMEOUT).await.expect("reply");
        log.lock().expect("order").push("reply");
    });
    caller.await.expect("caller");
    reader.await.expect("reader");
    order.lock().expect("order").clone()
}

#[tokio::test(flavor = "current_thread")]
async fn a_call_that_replies_and_emits_sends_the_events_before_the_reply() {
    assert_eq!(
        arrival_order(CounterCall::Queue(vec![1, 2, 3])).await,
        vec!["events", "reply"]
    );
}

#[tokio::test(flavor = "current_thread")]
async fn an_explicit_early_reply_goes_out_before_the_events() {
    assert_eq!(
        arrival_order(CounterCall::EarlyReplyQueue(vec![1, 2, 3])).await,
        vec!["reply", "events"]
    );
}

#[tokio::test]
async fn a_call_without_an_answer_times_out() {
    let (notify, _seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify))
        .await
        .expect("producer");
    let error = producer
        .call(CounterCall::Ignore, Duration::from_millis(20))
        .await
        .expect_err("no answer");
    assert!(matches!(error, Error::Timeout { .. }), "{error:?}");
}

#[tokio::test]
async fn a_call_may_stop_the_stage_with_or_without_a_reply() {
    let (notify, mut seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(7, notify.clone()))
        .await
        .expect("producer");
    let reply = producer
        .call(CounterCall::Stop(StopReason::Shutdown, true), TIMEOUT)
        .await;
    assert_eq!(reply, Ok(7));
    assert_eq!(producer.stopped().await, StopReason::Shutdown);
    assert_eq!(
        next_matching(&mut seen, |n| match n {
            Note::Terminated(reason) => Some(reason),
            _ => None,
        })
        .await,
        StopReason::Shutdown
    );

    let producer = weir_gen_stage::start_producer(Counter::new(0, notify))
        .await
        .expect("producer");
    let error = producer
        .call(
            CounterCall::Stop(StopReason::custom("oops"), false),
            TIMEOUT,
        )
        .await
        .expect_err("no reply");
    assert_eq!(
        error,
        Error::Stopped {
            stage: producer.id(),
            reason: StopReason::custom("oops")
        }
    );
}

#[tokio::test]
async fn calling_a_stopped_stage_fails_at_once() {
    let (notify, _seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify))
        .await
        .expect("producer");
    producer.stop(StopReason::Normal).await.expect("stopped");
    assert_eq!(
        producer.call(CounterCall::Queue(vec![]), TIMEOUT).await,
        Err(Error::NotAlive {
            stage: producer.id()
        })
    );
    assert_eq!(
        producer.cast(vec![]),
        Err(Error::NotAlive {
            stage: producer.id()
        })
    );
    assert!(!producer.is_alive());
}

/// A consumer that does not implement `handle_call`.
struct NoCalls;

type NoCallsMessages = Msgs<u8, u8>;

impl Consumer for NoCalls {
    type Messages = NoCallsMessages;
    type Event = u8;

    async fn handle_events(
        &mut self,
        _events: Vec<u8>,
        _from: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        Noreply::none()
    }
}

#[tokio::test]
async fn a_stage_without_handle_call_answers_no_reply_and_keeps_running() {
    let stage = weir_gen_stage::start_consumer(NoCalls)
        .await
        .expect("consumer");
    assert_eq!(
        stage.call(1, TIMEOUT).await,
        Err(Error::NoReply { stage: stage.id() })
    );
    assert!(stage.is_alive());
}

#[tokio::test]
async fn send_info_goes_straight_to_handle_info_unlike_sync_info() {
    let (notify, mut seen) = notes();
    let producer = weir_gen_stage::start_producer(Counter::new(0, notify).silent())
        .await
        .expect("producer");
    producer.cast(vec![1, 2]).expect("cast");
    producer
        .sync_info(CounterInfo::Label("through the buffer"))
        .await
        .expect("queued");
    producer
        .send_info(CounterInfo::Label("straight"))
        .expect("sent");
    let label = next_matching(&mut seen, |n| match n {
        Note::Info(label) => Some(label),
        _ => None,
    })
    .await;
    assert_eq!(label, "straight");
    assert_eq!(producer.estimate_buffered_count().await, Ok(2));
}

#[test]
fn starting_outside_a_tokio_runtime_is_an_error() {
    let (notify, _seen) = notes();
    let started =
        futures::executor::block_on(weir_gen_stage::start_producer(Counter::new(0, notify)));
    assert!(matches!(started, Err(Error::NoRuntime)), "{started:?}");
}
