//! `prepare_messages`: Broadway's callback over a processor's whole group
//! of messages, before `handle_message` runs on each.

use std::sync::{Arc, Mutex};

use weir_pipeline::{Error, Message, Pipeline, Status};

on_both_runtimes! {
    /// The group sees every message once, before `handle_message`, which
    /// sees what it prepared; a message it fails skips `handle_message`.
    async fn prepare_messages_runs_on_each_group_before_handle_message() -> Result<(), Error> {
        let groups = Arc::new(Mutex::new(Vec::new()));
        let record = groups.clone();
        let pipeline = Pipeline::builder()
            .test_producer()
            .prepare_messages(move |messages: &mut [Message<(u32, u32)>]| {
                // One "query" for the whole group.
                record.lock().expect("no panic while locked").push(messages.len());
                for message in messages.iter_mut() {
                    message.data.1 = message.data.0 * 100;
                    if message.data.0 == 3 {
                        message.fail("no row for 3");
                    }
                }
            })
            .processors(2, |message: &mut Message<(u32, u32)>| {
                assert_ne!(message.data.0, 3, "a failed message is not handled");
                message.data.1 += 1;
            })
            .processor_max_demand(4)
            .start()
            .await?;
        let mut acked = pipeline.test_batch((0..10).map(|n| (n, 0)).collect()).await?;
        acked.sort_by_key(|m| m.data.0);
        for message in &acked {
            let (n, prepared) = message.data;
            if n == 3 {
                assert_eq!(message.status(), &Status::Failed("no row for 3".into()));
            } else {
                assert_eq!((prepared, message.status()), (n * 100 + 1, &Status::Ok));
            }
        }
        let groups = groups.lock().expect("no panic while locked").clone();
        assert_eq!(groups.iter().sum::<usize>(), 10);
        assert!(groups.iter().all(|&n| (1..=4).contains(&n)), "at most max_demand: {groups:?}");
        Ok(())
    }

    /// A panic in `prepare_messages` fails its whole group; the processor
    /// goes on with the next.
    async fn a_panic_in_prepare_messages_fails_the_group() -> Result<(), Error> {
        let pipeline = Pipeline::builder()
            .test_producer()
            .prepare_messages(|messages: &mut [Message<u32>]| {
                assert!(messages.iter().all(|m| m.data != 13), "unlucky group");
            })
            .processors(1, |_: &mut Message<u32>| {})
            .start()
            .await?;
        let failed = pipeline.test_message(13).await?;
        assert!(matches!(failed.status(), Status::Failed(reason) if reason.contains("unlucky group")));
        assert!(pipeline.test_message(14).await?.is_ok());
        Ok(())
    }
}
