//! A producer of any events, turned into messages by a transformer
//! (Broadway's producer `transformer`).

use std::sync::{Arc, Mutex};

use weir_pipeline::{Error, Message, Metadata, Pipeline};

on_both_runtimes! {
    /// The transformer chooses each message's data, metadata and
    /// acknowledger; a panic in it drops that event alone.
    async fn a_transformer_makes_the_messages_of_any_producer() -> Result<(), Error> {
        let acked = Arc::new(Mutex::new(Vec::new()));
        let record = acked.clone();
        let acknowledger = Arc::new(move |ok: Vec<Message<u32>>, failed: Vec<Message<u32>>| {
            let mut acked = record.lock().expect("no panic while locked");
            for message in ok.into_iter().chain(failed) {
                let offset = message.metadata().get("offset").cloned().unwrap_or_default();
                acked.push((message.data, offset, message.is_ok()));
            }
        });
        let records = weir_gen_stage::from_iter(
            [("7", 0u64), ("x", 1), ("boom", 2), ("9", 3)].map(|(text, offset)| (text.to_owned(), offset)),
        )
        .await?;
        let pipeline = Pipeline::builder()
            .producer_with(&records, move |(text, offset): (String, u64)| {
                assert_ne!(text, "boom", "unreadable record");
                let metadata = Metadata::from([("offset".to_owned(), offset.to_string())]);
                let mut message = Message::with_metadata(0u32, acknowledger.clone(), metadata);
                match text.parse() {
                    Ok(n) => message.data = n,
                    Err(_) => message.fail(format!("not a number: {text}")),
                }
                message
            })
            .processors(2, |message: &mut Message<u32>| message.data *= 2)
            .start()
            .await?;
        pipeline.stopped().await;
        let mut acked = acked.lock().expect("no panic while locked").clone();
        acked.sort_by(|a, b| a.1.cmp(&b.1));
        assert_eq!(
            acked,
            [(14, "0".to_owned(), true), (0, "1".to_owned(), false), (18, "3".to_owned(), true)]
        );
        Ok(())
    }
}
