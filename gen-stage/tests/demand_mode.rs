//! Demand modes: accumulate records demands and emitted events in order and
//! replays them on the switch to forward.

use crate::harness;

use harness::{Counter, Doubler, Note, Recorder, TIMEOUT, consumed, drain, notes};
use weir_gen_stage::{DemandMode, Error, ProducerOptions, SubscribeOptions};

#[tokio::test]
async fn accumulate_replays_demands_and_events_in_their_order() {
    let (notify, mut seen) = notes();
    let producer = weir_gen_stage::start_producer(
        Counter::new(0, notify.clone())
            .with_options(ProducerOptions::new().demand(DemandMode::Accumulate)),
    )
    .await
    .expect("producer");
    assert_eq!(producer.demand_mode().await, Ok(DemandMode::Accumulate));
    let consumer = weir_gen_stage::start_consumer(Recorder::new(notify))
        .await
        .expect("consumer");
    consumer
        .subscribe(
            &producer,
            SubscribeOptions::new().max_demand(2).min_demand(0),
        )
        .await
        .expect("accepted");
    // Recorded after the consumer's demand of 2.
    producer.cast(vec![100]).expect("cast");
    producer
        .call(harness::CounterCall::Queue(vec![]), TIMEOUT)
        .await
        .expect("barrier");
    let held = drain(&mut seen);
    assert!(
        !held
            .iter()
            .any(|n| matches!(n, Note::Demand(_) | Note::Consumed(_))),
        "nothing is dispatched while accumulating: {held:?}"
    );

    producer
        .set_demand_mode(DemandMode::Forward)
        .await
        .expect("forward");
    // First the demand (handle_demand(2) -> [0, 1]), then the event cast
    // after it, which waits in the buffer for the next ask.
    assert_eq!(consumed(&mut seen).await, vec![0, 1]);
    assert_eq!(consumed(&mut seen).await, vec![100]);
    assert_eq!(consumed(&mut seen).await, vec![2]);
    assert_eq!(producer.demand_mode().await, Ok(DemandMode::Forward));
}

#[tokio::test]
async fn a_producer_consumer_is_always_forward() {
    let (notify, _seen) = notes();
    let doubler = weir_gen_stage::start_producer_consumer(Doubler { notify })
        .await
        .expect("producer_consumer");
    assert_eq!(doubler.demand_mode().await, Ok(DemandMode::Forward));
    assert_eq!(doubler.set_demand_mode(DemandMode::Forward).await, Ok(()));
    assert!(matches!(
        doubler.set_demand_mode(DemandMode::Accumulate).await,
        Err(Error::WrongKind { .. })
    ));
}
