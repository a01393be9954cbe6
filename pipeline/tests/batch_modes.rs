//! When a batch is handed over beyond size and timeout: messages in flush
//! mode (the test helpers' default, Broadway's `test_message`), and batch
//! sizes measured by a function of each message (Broadway's batch
//! splitter).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_pipeline::{BatchMode, BatchTrigger, Batcher, Error, Message, NoopAcknowledger, Pipeline};

type Batches<T> = Arc<Mutex<Vec<(BatchTrigger, Vec<T>)>>>;

fn recording<T: Clone + Send + 'static>(batches: &Batches<T>) -> Batcher<T> {
    let record = batches.clone();
    Batcher::new("default", move |batch: &mut [Message<T>], info| {
        let data = batch.iter().map(|m| m.data.clone()).collect();
        record
            .lock()
            .expect("no panic while locked")
            .push((info.trigger, data));
    })
}

/// Far longer than any test may take: a batch handed over at all was not
/// handed over by its timeout.
const HOUR: Duration = Duration::from_secs(3600);

on_both_runtimes! {
    /// Broadway's `test_message` flushes: the batch is handed over when the
    /// message reaches the batcher, not at `batch_timeout`.
    async fn test_message_is_batched_without_waiting_for_the_timeout() -> Result<(), Error> {
        let batches = Batches::default();
        let pipeline = Pipeline::builder()
            .test_producer()
            .processors(2, |message: &mut Message<u32>| message.data += 1)
            .batcher(recording(&batches).batch_size(100).batch_timeout(HOUR))
            .start()
            .await?;
        let acked = tokio::time::timeout(Duration::from_secs(30), pipeline.test_message(1))
            .await
            .map_err(|_| Error::NotAcked { acked: 0, expected: 1 })??;
        assert_eq!((acked.data, acked.batch_mode()), (2, BatchMode::Flush));
        let batched = tokio::time::timeout(Duration::from_secs(30), pipeline.test_batch(vec![10, 20, 30]))
            .await
            .map_err(|_| Error::NotAcked { acked: 0, expected: 3 })??;
        assert_eq!(batched.len(), 3);
        let batches = batches.lock().expect("no panic while locked").clone();
        assert!(batches.iter().all(|(trigger, _)| *trigger == BatchTrigger::Flush), "{batches:?}");
        let mut data: Vec<u32> = batches.into_iter().flat_map(|(_, data)| data).collect();
        data.sort_unstable();
        assert_eq!(data, [2, 11, 21, 31]);
        Ok(())
    }

    /// A message put in flush mode by its handler (`put_batch_mode`) hands
    /// over the partial batch it joins, with the messages already in it.
    async fn a_handler_can_flush_the_batch_of_a_message() -> Result<(), Error> {
        let batches = Batches::default();
        let pipeline = Pipeline::builder()
            .test_producer()
            .processors(1, |message: &mut Message<u32>| {
                if message.data == 0 {
                    message.put_batch_mode(BatchMode::Flush);
                }
            })
            .batcher(recording(&batches).batch_size(100).batch_timeout(HOUR))
            .start()
            .await?;
        let bulk = pipeline.test_batch_with(vec![5, 6, 7], BatchMode::Bulk);
        // The three wait in a partial batch; the flushing message ends it.
        let mut waited = 0;
        while pipeline.metrics().batchers("default").map(|b| b.buffered).sum::<usize>() < 3 {
            assert!(waited < 10_000, "the messages never reached the batcher");
            tokio::time::sleep(Duration::from_millis(1)).await;
            waited += 1;
        }
        let flushing = pipeline.test_batch_with(vec![0], BatchMode::Bulk);
        assert_eq!(bulk.await?.len(), 3);
        assert_eq!(flushing.await?.len(), 1);
        assert_eq!(
            *batches.lock().expect("no panic while locked"),
            [(BatchTrigger::Flush, vec![5, 6, 7, 0])]
        );
        Ok(())
    }

    /// Batches by weight (bytes of text): handed over at the limit, before a
    /// message that would go over it, and a message over the limit alone.
    async fn batch_size_by_weight_splits_batches_at_the_limit() -> Result<(), Error> {
        let batches: Batches<String> = Batches::default();
        let pipeline = Pipeline::builder()
            .test_producer()
            .processors(1, |_: &mut Message<String>| {})
            .batcher(
                recording(&batches)
                    .batch_size(1000)
                    .batch_size_by(10, |message: &Message<String>| message.data.len())
                    .batch_timeout(HOUR),
            )
            .start()
            .await?;
        let data = ["aaaa", "bbbb", "cc", "ddddd", "eeeeee", "xxxxxxxxxxxx", "f"];
        let acknowledger = Arc::new(NoopAcknowledger);
        pipeline.push_messages(
            data.iter()
                .map(|text| Message::new((*text).to_owned(), acknowledger.clone()))
                .collect(),
        )?;
        assert!(pipeline.drain(Duration::from_secs(30)).await.is_complete());
        let got: Vec<(BatchTrigger, Vec<String>)> = batches.lock().expect("no panic while locked").clone();
        let texts = |texts: &[&str]| texts.iter().map(|t| (*t).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            got,
            [
                (BatchTrigger::Size, texts(&["aaaa", "bbbb", "cc"])),
                (BatchTrigger::Size, texts(&["ddddd"])),
                (BatchTrigger::Size, texts(&["eeeeee"])),
                (BatchTrigger::Size, texts(&["xxxxxxxxxxxx"])),
                (BatchTrigger::Flush, texts(&["f"])),
            ]
        );
        Ok(())
    }

    /// `batch_size` still caps a weighed batch's count.
    async fn batch_size_caps_a_weighed_batch() -> Result<(), Error> {
        let batches: Batches<u32> = Batches::default();
        let pipeline = Pipeline::builder()
            .test_producer()
            .processors(1, |_: &mut Message<u32>| {})
            .batcher(
                recording(&batches)
                    .batch_size(3)
                    .batch_size_by(1_000_000, |_: &Message<u32>| 1)
                    .batch_timeout(HOUR),
            )
            .start()
            .await?;
        let acked = pipeline.test_batch_with((0..7).collect(), BatchMode::Bulk);
        assert!(pipeline.drain(Duration::from_secs(30)).await.is_complete());
        assert_eq!(acked.await?.len(), 7);
        let sizes: Vec<usize> = batches.lock().expect("no panic while locked").iter().map(|(_, d)| d.len()).collect();
        assert_eq!(sizes, [3, 3, 1]);
        Ok(())
    }
}

#[tokio::test]
async fn a_zero_weight_limit_is_refused() {
    let started = Pipeline::builder()
        .test_producer()
        .processors(1, |_: &mut Message<u32>| {})
        .batcher(Batcher::new("default", |_: &mut [Message<u32>], _| {}).batch_size_by(0, |_| 1))
        .start()
        .await;
    assert!(
        matches!(started, Err(Error::ZeroBatchSize { .. })),
        "{started:?}"
    );
}
