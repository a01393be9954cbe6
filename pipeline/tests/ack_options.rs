//! Per-message metadata and ack data, `configure_ack` and `ack_immediately`:
//! what Broadway's acknowledgers and producers use to ack each message its
//! own way.

use std::any::Any;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_pipeline::{
    Acknowledger, BatchMode, Batcher, ConfigureAckError, Error, Message, Metadata, Pipeline,
};

/// How a failed message is acked: requeued or dropped (as RabbitMQ's
/// `on_failure`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnFailure {
    Requeue,
    Reject,
}

/// A source's acknowledger: each message carries its delivery tag as ack
/// data; failures are requeued unless configured otherwise.
#[derive(Default)]
struct Broker {
    /// (delivery tag, acked ok, on failure) per ack, and what else was
    /// logged, in order.
    log: Mutex<Vec<String>>,
}

impl Acknowledger<u32> for Broker {
    fn ack(&self, successful: Vec<Message<u32>>, failed: Vec<Message<u32>>) {
        let mut log = self.log.lock().expect("no panic while locked");
        for message in successful {
            log.push(format!(
                "ack {}",
                message.ack_data::<u64>().copied().unwrap_or(0)
            ));
        }
        for message in failed {
            let on_failure = message.ack_data::<(u64, OnFailure)>().map(|(_, f)| *f);
            let tag = message
                .ack_data::<(u64, OnFailure)>()
                .map(|(tag, _)| *tag)
                .or_else(|| message.ack_data::<u64>().copied())
                .unwrap_or(0);
            log.push(format!(
                "{:?} {tag}",
                on_failure.unwrap_or(OnFailure::Requeue)
            ));
        }
    }

    fn configure(
        &self,
        message: &mut Message<u32>,
        options: &dyn Any,
    ) -> Result<(), ConfigureAckError> {
        let Some(on_failure) = options.downcast_ref::<OnFailure>() else {
            return Err(ConfigureAckError::Invalid("expected an OnFailure".into()));
        };
        let tag = message.ack_data::<u64>().copied().unwrap_or(0);
        message.put_ack_data((tag, *on_failure));
        Ok(())
    }
}

fn delivery(broker: &Arc<Broker>, n: u32) -> Message<u32> {
    let mut metadata = Metadata::new();
    metadata.insert(
        "routing_key".into(),
        if n.is_multiple_of(2) { "even" } else { "odd" }.into(),
    );
    let mut message = Message::with_metadata(n, broker.clone(), metadata);
    message.put_ack_data(u64::from(n) + 1000);
    message
}

fn log(broker: &Broker) -> Vec<String> {
    let mut log = broker.log.lock().expect("no panic while locked").clone();
    log.sort();
    log
}

on_both_runtimes! {
    /// Metadata from the producer reaches the handlers (which may add to
    /// it); the acknowledger finds each message's ack data, as configured by
    /// `configure_ack` in the handler.
    async fn configure_ack_and_ack_data_decide_how_each_message_is_acked() -> Result<(), Error> {
        let broker = Arc::new(Broker::default());
        let batch_keys = Arc::new(Mutex::new(Vec::new()));
        let keys = batch_keys.clone();
        let pipeline = Pipeline::builder()
            .test_producer()
            .processors(2, |message: &mut Message<u32>| {
                let key = message.metadata().get("routing_key").cloned().unwrap_or_default();
                message.put_batch_key(key);
                message.metadata_mut().insert("seen_by".into(), "processor".into());
                if message.data == 3 {
                    // Poison: never requeue it.
                    assert_eq!(message.configure_ack(&OnFailure::Reject), Ok(()));
                    message.fail("poison");
                }
                if message.data == 4 {
                    message.fail("transient");
                }
                assert!(matches!(message.configure_ack(&"nonsense"), Err(ConfigureAckError::Invalid(_))));
            })
            .batcher(Batcher::new("default", move |batch: &mut [Message<u32>], info| {
                assert!(batch.iter().all(|m| m.metadata().get("seen_by").map(String::as_str) == Some("processor")));
                keys.lock().expect("no panic while locked").push(info.batch_key.clone());
            }).batch_size(10))
            .start()
            .await?;
        pipeline.push_messages((1..=5).map(|n| {
            let mut message = delivery(&broker, n);
            message.put_batch_mode(BatchMode::Flush);
            message
        }).collect())?;
        assert!(pipeline.drain(Duration::from_secs(30)).await.is_complete());
        assert_eq!(log(&broker), ["Reject 1003", "Requeue 1004", "ack 1001", "ack 1002", "ack 1005"]);
        let mut keys = batch_keys.lock().expect("no panic while locked").clone();
        keys.sort();
        keys.dedup();
        assert_eq!(keys, ["even", "odd"]);
        Ok(())
    }

    /// `ack_immediately` acks a copy before the batch is handled, and the
    /// message is not acked again when it is.
    async fn ack_immediately_acks_once_before_the_batch() -> Result<(), Error> {
        let broker = Arc::new(Broker::default());
        let batch_log = broker.clone();
        let pipeline = Pipeline::builder()
            .test_producer()
            .processors(1, |message: &mut Message<u32>| {
                if message.data == 1 {
                    message.ack_immediately();
                }
            })
            .batcher(Batcher::new("default", move |batch: &mut [Message<u32>], _| {
                let mut log = batch_log.log.lock().expect("no panic while locked");
                log.push(format!("batch of {}", batch.len()));
            }).batch_size(2))
            .start()
            .await?;
        pipeline.push_messages(vec![delivery(&broker, 1), delivery(&broker, 2)])?;
        assert!(pipeline.drain(Duration::from_secs(30)).await.is_complete());
        let log = broker.log.lock().expect("no panic while locked").clone();
        assert_eq!(log, ["ack 1001", "batch of 2", "ack 1002"]);
        Ok(())
    }
}

#[test]
fn an_acknowledger_without_options_refuses_configure_ack() {
    let mut message = Message::new(1u32, Arc::new(weir_pipeline::NoopAcknowledger));
    assert_eq!(
        message.configure_ack(&()),
        Err(ConfigureAckError::Unsupported)
    );
    assert!(message.metadata().is_empty());
    assert_eq!(message.ack_data::<u64>(), None);
}
