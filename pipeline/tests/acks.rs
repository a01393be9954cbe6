//! Every message is acked once, successful or failed: handlers that fail,
//! panic, name an unknown batcher, and the `handle_failed` hook.

use std::sync::{Arc, Mutex};

use weir_pipeline::{Batcher, Error, Message, Pipeline, Status};

#[tokio::test]
async fn test_message_without_batchers_is_acked_successful_by_the_processor() -> Result<(), Error> {
    let pipeline = Pipeline::builder()
        .test_producer()
        .processors(2, |message: &mut Message<u32>| message.data *= 10)
        .start()
        .await?;
    let acked = pipeline.test_message(4).await?;
    assert_eq!((acked.data, acked.status()), (40, &Status::Ok));
    let report = pipeline.drain(std::time::Duration::from_secs(5)).await;
    assert!(report.is_complete());
    Ok(())
}

#[tokio::test]
async fn a_failed_message_is_acked_failed_with_its_reason() -> Result<(), Error> {
    let pipeline = Pipeline::builder()
        .test_producer()
        .processors(1, |message: &mut Message<i64>| {
            if message.data < 0 {
                message.fail("negative");
            }
        })
        .start()
        .await?;
    let (bad, good) = (pipeline.test_message(-1), pipeline.test_message(1));
    assert_eq!(bad.await?.status(), &Status::Failed("negative".into()));
    assert!(good.await?.is_ok());
    Ok(())
}

#[tokio::test]
async fn a_panic_in_handle_message_fails_the_message_and_the_processor_keeps_going()
-> Result<(), Error> {
    let pipeline = Pipeline::builder()
        .test_producer()
        .processors(1, |message: &mut Message<u32>| {
            assert_ne!(message.data, 13, "unlucky");
        })
        .start()
        .await?;
    let acked = pipeline.test_message(13).await?;
    match acked.status() {
        Status::Failed(reason) => assert!(reason.contains("unlucky"), "{reason}"),
        Status::Ok => panic!("a panicking handler must fail the message"),
    }
    assert!(pipeline.test_message(14).await?.is_ok());
    Ok(())
}

/// The processor runs a whole group of messages under one `catch_unwind`:
/// a panic fails the message it came from, and the rest of the group is
/// still handled, each message once.
#[tokio::test]
async fn panics_within_a_group_fail_only_their_messages() -> Result<(), Error> {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let seen = calls.clone();
    let pipeline = Pipeline::builder()
        .test_producer()
        .processors(1, move |message: &mut Message<u32>| {
            seen.lock()
                .expect("no panic while locked")
                .push(message.data);
            assert!(!message.data.is_multiple_of(7), "unlucky {}", message.data);
            message.data *= 10;
        })
        .processor_max_demand(50)
        .batcher(Batcher::new("default", |_: &mut [Message<u32>], _| {}).batch_size(5))
        .start()
        .await?;
    let mut acked = pipeline.test_batch((1..=30).collect()).await?;
    acked.sort_by_key(|m| m.data);
    let mut calls = calls.lock().expect("no panic while locked").clone();
    calls.sort_unstable();
    assert_eq!(calls, (1..=30).collect::<Vec<_>>(), "each handled once");
    for message in &acked {
        match message.status() {
            Status::Failed(reason) => {
                assert!(message.data.is_multiple_of(7), "{}", message.data);
                assert!(
                    reason.contains(&format!("unlucky {}", message.data)),
                    "{reason}"
                );
            }
            Status::Ok => assert!(message.data.is_multiple_of(10) && message.data <= 300),
        }
    }
    let failed: Vec<u32> = acked
        .iter()
        .filter(|m| !m.is_ok())
        .map(|m| m.data)
        .collect();
    assert_eq!(failed, [7, 14, 21, 28]);
    assert_eq!(acked.len(), 30);
    Ok(())
}

#[tokio::test]
async fn a_panic_in_handle_batch_fails_the_whole_batch() -> Result<(), Error> {
    let pipeline = Pipeline::builder()
        .test_producer()
        .processors(1, |_: &mut Message<u32>| {})
        .batcher(
            Batcher::new("default", |messages: &mut [Message<u32>], _| {
                assert!(messages.iter().all(|m| m.data != 0), "a zero in the batch");
            })
            .batch_size(3),
        )
        .start()
        .await?;
    let acked = pipeline.test_batch(vec![1, 0, 2]).await?;
    assert_eq!(acked.len(), 3);
    assert!(acked.iter().all(|m| !m.is_ok()), "{acked:?}");
    let fine = pipeline.test_batch(vec![4, 5, 6]).await?;
    assert!(fine.iter().all(Message::is_ok));
    Ok(())
}

#[tokio::test]
async fn handle_batch_may_fail_single_messages() -> Result<(), Error> {
    let pipeline = Pipeline::builder()
        .test_producer()
        .processors(1, |_: &mut Message<u32>| {})
        .batcher(
            Batcher::new("default", |messages: &mut [Message<u32>], _| {
                for message in messages.iter_mut().filter(|m| !m.data.is_multiple_of(2)) {
                    message.fail("odd");
                }
            })
            .batch_size(4),
        )
        .start()
        .await?;
    let mut acked = pipeline.test_batch(vec![1, 2, 3, 4]).await?;
    acked.sort_by_key(|m| m.data);
    let statuses: Vec<bool> = acked.iter().map(Message::is_ok).collect();
    assert_eq!(statuses, [false, true, false, true]);
    Ok(())
}

#[tokio::test]
async fn a_message_for_an_unknown_batcher_is_acked_failed() -> Result<(), Error> {
    let pipeline = Pipeline::builder()
        .test_producer()
        .processors(1, |message: &mut Message<u32>| {
            message.put_batcher("nowhere")
        })
        .batcher(Batcher::new("default", |_: &mut [Message<u32>], _| {}).batch_size(1))
        .start()
        .await?;
    let acked = pipeline.test_message(1).await?;
    assert_eq!(
        acked.status(),
        &Status::Failed("no batcher named \"nowhere\"".into())
    );
    Ok(())
}

#[tokio::test]
async fn handle_failed_sees_failed_messages_before_they_are_acked() -> Result<(), Error> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let hook_seen = seen.clone();
    let pipeline = Pipeline::builder()
        .test_producer()
        .processors(1, |message: &mut Message<u32>| {
            if message.data == 1 {
                message.fail("in processor");
            }
        })
        .batcher(
            Batcher::new("default", |messages: &mut [Message<u32>], _| {
                for message in messages {
                    message.fail("in batch");
                }
            })
            .batch_size(1),
        )
        .handle_failed(move |messages: &mut [Message<u32>]| {
            for message in messages {
                if let Ok(mut seen) = hook_seen.lock() {
                    seen.push(message.data);
                }
                message.data += 100;
            }
        })
        .start()
        .await?;
    let first = pipeline.test_message(1).await?;
    let second = pipeline.test_message(2).await?;
    assert_eq!((first.data, second.data), (101, 102));
    assert_eq!(second.status(), &Status::Failed("in batch".into()));
    assert_eq!(*seen.lock().expect("lock"), [1, 2]);
    Ok(())
}

#[tokio::test]
async fn the_acknowledger_of_producer_of_acks_each_message_once() -> Result<(), Error> {
    type Acked = Arc<Mutex<(Vec<u32>, Vec<u32>)>>;
    let acked: Acked = Arc::default();
    let record = acked.clone();
    let acknowledger = Arc::new(move |ok: Vec<Message<u32>>, failed: Vec<Message<u32>>| {
        if let Ok(mut acked) = record.lock() {
            acked.0.extend(ok.into_iter().map(|m| m.data));
            acked.1.extend(failed.into_iter().map(|m| m.data));
        }
    });
    let numbers = weir_gen_stage::from_iter(0..2500u32).await?;
    let pipeline = Pipeline::builder()
        .producer_of(&numbers, acknowledger)
        .processors(2, |message: &mut Message<u32>| {
            if message.data.is_multiple_of(7) {
                message.fail("multiple of 7");
            }
        })
        .batcher(Batcher::new("default", |_: &mut [Message<u32>], _| {}).batch_size(1000))
        .start()
        .await?;
    // The iterator ends, the producer stops, the pipeline drains itself.
    pipeline.stopped().await;
    let (mut ok, mut failed) = acked.lock().expect("lock").clone();
    ok.sort_unstable();
    failed.sort_unstable();
    assert_eq!(
        ok,
        (0..2500)
            .filter(|n: &u32| !n.is_multiple_of(7))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        failed,
        (0..2500)
            .filter(|n: &u32| n.is_multiple_of(7))
            .collect::<Vec<_>>()
    );
    Ok(())
}

#[tokio::test]
async fn a_pipeline_without_a_test_producer_refuses_test_messages() -> Result<(), Error> {
    let numbers = weir_gen_stage::from_iter(std::iter::empty::<Message<u32>>()).await?;
    let pipeline = Pipeline::builder()
        .producer(&numbers)
        .processors(1, |_: &mut Message<u32>| {})
        .start()
        .await?;
    assert!(matches!(
        pipeline.test_message(1).await,
        Err(Error::NoTestProducer)
    ));
    Ok(())
}

#[tokio::test]
async fn invalid_topologies_are_refused_naming_what_is_wrong() {
    let two = Pipeline::builder()
        .test_producer()
        .processors(1, |_: &mut Message<u32>| {})
        .batcher(Batcher::new("a", |_: &mut [Message<u32>], _| {}))
        .batcher(Batcher::new("a", |_: &mut [Message<u32>], _| {}))
        .start()
        .await;
    assert!(matches!(two, Err(Error::DuplicateBatcher { batcher }) if batcher == "a"));
    let empty = Pipeline::builder()
        .test_producer()
        .processors(1, |_: &mut Message<u32>| {})
        .batcher(Batcher::new("b", |_: &mut [Message<u32>], _| {}).batch_size(0))
        .start()
        .await;
    assert!(matches!(empty, Err(Error::ZeroBatchSize { batcher }) if batcher == "b"));
    let none = Pipeline::<u32>::builder().test_producer().start().await;
    assert!(matches!(none, Err(Error::NoProcessors)));
    let no_producer = Pipeline::builder()
        .processors(0, |_: &mut Message<u32>| {})
        .start()
        .await;
    assert!(matches!(no_producer, Err(Error::NoProducer)));
}

#[tokio::test]
async fn a_panicking_acknowledger_does_not_stop_the_pipeline() -> Result<(), Error> {
    let pipeline = Pipeline::builder()
        .test_producer()
        .processors(1, |_: &mut Message<u32>| {})
        .start()
        .await?;
    let panicking = Arc::new(|_: Vec<Message<u32>>, _: Vec<Message<u32>>| panic!("ack failed"));
    pipeline.push_messages(vec![Message::new(1, panicking)])?;
    // The processor that acked it is still there for the next message.
    assert!(pipeline.test_message(2).await?.is_ok());
    assert!(
        pipeline
            .drain(std::time::Duration::from_secs(5))
            .await
            .is_complete()
    );
    Ok(())
}
