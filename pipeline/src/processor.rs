//! Processors: run `handle_message` on each message; failed messages are
//! acked here, the others go to their batcher (or are acked here when the
//! pipeline has no batchers).

use std::collections::HashMap;
use std::sync::Arc;

use gen_stage::{
    Consumer, ConsumerContext, Noreply, ProducerConsumer, ProducerConsumerContext, Subscription,
};

use crate::Message;
use crate::handlers::{HandleFailed, HandleMessage, ack_with_failed_hook, run_handle_message};

/// What every processor of a pipeline shares.
pub(crate) struct Processor<T> {
    pub handle_message: HandleMessage<T>,
    pub handle_failed: Option<HandleFailed<T>>,
    /// Batcher name to partition; `None`: no batchers, ack here.
    pub batchers: Option<Arc<HashMap<String, usize>>>,
}

impl<T> Clone for Processor<T> {
    fn clone(&self) -> Self {
        Self {
            handle_message: self.handle_message.clone(),
            handle_failed: self.handle_failed.clone(),
            batchers: self.batchers.clone(),
        }
    }
}

impl<T: 'static> Processor<T> {
    /// Handle the messages; ack what ends here, return what goes on to a
    /// batcher.
    fn process(&self, messages: Vec<Message<T>>) -> Vec<Message<T>> {
        let mut forward = Vec::with_capacity(messages.len());
        let mut successful = Vec::new();
        let mut failed = Vec::new();
        for mut message in messages {
            run_handle_message(&self.handle_message, &mut message);
            if !message.is_ok() {
                failed.push(message);
                continue;
            }
            match &self.batchers {
                None => successful.push(message),
                Some(batchers) => match batchers.get(message.batcher()) {
                    Some(&index) => {
                        message.batcher_index = index;
                        forward.push(message);
                    }
                    None => {
                        let reason = format!("no batcher named {:?}", message.batcher());
                        message.fail(reason);
                        failed.push(message);
                    }
                },
            }
        }
        ack_with_failed_hook(self.handle_failed.as_ref(), successful, failed);
        forward
    }
}

/// A processor in front of batchers.
pub(crate) struct ProcessorStage<T>(pub Processor<T>);

impl<T: Send + 'static> ProducerConsumer for ProcessorStage<T> {
    type In = Message<T>;
    type Out = Message<T>;

    async fn handle_events(
        &mut self,
        events: Vec<Message<T>>,
        _from: Subscription,
        _ctx: &mut ProducerConsumerContext<'_, Self>,
    ) -> Noreply<Message<T>> {
        Noreply::Emit(self.0.process(events))
    }
}

/// A processor of a pipeline without batchers: the last stage.
pub(crate) struct ProcessorSink<T>(pub Processor<T>);

impl<T: Send + 'static> Consumer for ProcessorSink<T> {
    type Event = Message<T>;

    async fn handle_events(
        &mut self,
        events: Vec<Message<T>>,
        _from: Subscription,
        _ctx: &mut ConsumerContext<'_, Self>,
    ) -> Noreply {
        let forward = self.0.process(events);
        debug_assert!(forward.is_empty(), "no batchers: everything is acked");
        Noreply::none()
    }
}
