//! Telemetry: the tracing spans under target `weir_pipeline` with Broadway's
//! fields. Alone in its test binary: tracing caches whether a span is
//! wanted per call site, process-wide, so a test running at the same time
//! without the subscriber could hide spans from this one.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use weir_pipeline::{BatchMode, Batcher, Error, Message, Pipeline};

/// Records every span of target `weir_pipeline`: its name and fields.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<Span>>>);

/// A span's name and fields.
type Span = (String, BTreeMap<String, String>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: tracing::Subscriber> Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, _id: &Id, _ctx: Context<'_, S>) {
        if attrs.metadata().target() != "weir_pipeline" {
            return;
        }
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        self.0
            .lock()
            .expect("no panic while locked")
            .push((attrs.metadata().name().to_owned(), fields));
    }
}

impl Spans {
    fn named(&self, name: &str) -> Vec<BTreeMap<String, String>> {
        self.0
            .lock()
            .expect("no panic while locked")
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, fields)| fields.clone())
            .collect()
    }
}

fn field<'a>(fields: &'a BTreeMap<String, String>, name: &str) -> &'a str {
    fields.get(name).map_or("", String::as_str)
}

// current_thread: every stage runs on this thread, under the default
// subscriber set here.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn spans_carry_broadways_fields() -> Result<(), Error> {
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    let _default = tracing::subscriber::set_default(subscriber);

    let pipeline = Pipeline::builder()
        .name("orders")
        .test_producer()
        .processors(1, |message: &mut Message<u32>| {
            if message.data == 0 {
                message.fail("zero");
            }
        })
        .batcher(Batcher::new("default", |_: &mut [Message<u32>], _| {}).batch_size(3))
        .handle_failed(|_: &mut [Message<u32>]| {})
        .start()
        .await?;
    let acked = pipeline
        .test_batch_with(vec![0, 1, 2, 3, 4], BatchMode::Bulk)
        .await?;
    assert_eq!(acked.len(), 5);

    let messages = spans.named("handle_message");
    assert_eq!(messages.len(), 5);
    assert!(
        messages
            .iter()
            .all(|f| field(f, "name") == "orders" && field(f, "processor") == "0")
    );
    assert!(!spans.named("processor").is_empty());

    let batches = spans.named("handle_batch");
    let mut seen: Vec<(String, String)> = batches
        .iter()
        .map(|f| {
            (
                field(f, "batch_size").to_owned(),
                field(f, "trigger").to_owned(),
            )
        })
        .collect();
    seen.sort();
    // 1, 2, 3 by size; 4 alone when its timeout passes (the paused clock).
    assert_eq!(
        seen,
        vec![("1".into(), "Timeout".into()), ("3".into(), "Size".into())]
    );
    assert!(batches.iter().all(|f| field(f, "batcher") == "default"
        && field(f, "batch_key") == "default"
        && field(f, "batch_processor") == "0"
        && field(f, "name") == "orders"));

    let acks: Vec<(String, String, String)> = spans
        .named("ack")
        .iter()
        .map(|f| {
            (
                field(f, "stage").to_owned(),
                field(f, "successful").to_owned(),
                field(f, "failed").to_owned(),
            )
        })
        .collect();
    assert!(
        acks.contains(&("processor".into(), "0".into(), "1".into())),
        "{acks:?}"
    );
    assert!(
        acks.contains(&("batch_processor".into(), "3".into(), "0".into())),
        "{acks:?}"
    );
    assert!(
        acks.contains(&("batch_processor".into(), "1".into(), "0".into())),
        "{acks:?}"
    );
    // handle_failed ran once, in the processor, on the one failed message.
    let failed: Vec<(String, String)> = spans
        .named("handle_failed")
        .iter()
        .map(|f| {
            (
                field(f, "stage").to_owned(),
                field(f, "messages").to_owned(),
            )
        })
        .collect();
    assert_eq!(failed, [("processor".to_owned(), "1".to_owned())]);
    Ok(())
}
