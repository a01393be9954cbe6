//! The response-stream contract as a sans-IO state machine: zero or more
//! Progress messages, then exactly one terminal message, then the end.
//!
//! The server runs every outgoing message through it (so an engine can never
//! send a second terminal or end without one) and the client runs every
//! incoming message through it (so a misbehaving peer is reported precisely).

use serde::Serialize;

/// What a response message is, as far as the stream rules care.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum MessageKind {
    /// Progress: more messages follow.
    Progress,
    /// Success, InvalidQuery or InternalError: the stream ends after it.
    Terminal,
}

/// A breach of the response-stream contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error, Serialize)]
pub enum StreamViolation {
    /// A message arrived after the terminal message.
    #[error("{kind:?} message #{index} after the terminal message")]
    MessageAfterTerminal {
        /// The kind of the extra message (Terminal = a second terminal).
        kind: MessageKind,
        /// 0-based position of the extra message in the stream.
        index: u64,
    },
    /// The stream ended before any terminal message.
    #[error("stream ended without a terminal message after {progress_messages} progress messages")]
    EndedWithoutTerminal {
        /// Progress messages seen before the end.
        progress_messages: u64,
    },
}

/// Tracks one response stream.
///
/// ```
/// use weir_engine_contract::stream_rules::{MessageKind, ResponseStreamRules, StreamViolation};
///
/// let mut rules = ResponseStreamRules::new();
/// rules.on_message(MessageKind::Progress).unwrap();
/// rules.on_message(MessageKind::Terminal).unwrap();
/// assert!(rules.is_finished());
/// assert_eq!(
///     rules.on_message(MessageKind::Terminal),
///     Err(StreamViolation::MessageAfterTerminal { kind: MessageKind::Terminal, index: 2 })
/// );
/// assert_eq!(rules.on_end(), Ok(()));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseStreamRules {
    messages: u64,
    progress_messages: u64,
    terminal_seen: bool,
}

impl ResponseStreamRules {
    /// A stream that has seen nothing yet.
    pub const fn new() -> Self {
        Self {
            messages: 0,
            progress_messages: 0,
            terminal_seen: false,
        }
    }

    /// Accounts for the next message. A message after the terminal is a
    /// violation and is not counted as accepted (the caller drops it or
    /// reports it).
    pub fn on_message(&mut self, kind: MessageKind) -> Result<(), StreamViolation> {
        let index = self.messages;
        self.messages += 1;
        if self.terminal_seen {
            return Err(StreamViolation::MessageAfterTerminal { kind, index });
        }
        match kind {
            MessageKind::Progress => self.progress_messages += 1,
            MessageKind::Terminal => self.terminal_seen = true,
        }
        Ok(())
    }

    /// Accounts for the end of the stream.
    pub fn on_end(&self) -> Result<(), StreamViolation> {
        if self.terminal_seen {
            Ok(())
        } else {
            Err(StreamViolation::EndedWithoutTerminal {
                progress_messages: self.progress_messages,
            })
        }
    }

    /// Whether the terminal message has been seen.
    pub const fn is_finished(&self) -> bool {
        self.terminal_seen
    }

    /// Progress messages accepted so far.
    pub const fn progress_messages(&self) -> u64 {
        self.progress_messages
    }

    /// Messages seen so far, including rejected ones.
    pub const fn messages_seen(&self) -> u64 {
        self.messages
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn terminal_alone_is_a_valid_stream() {
        let mut rules = ResponseStreamRules::new();
        assert_eq!(rules.on_message(MessageKind::Terminal), Ok(()));
        assert_eq!(rules.on_end(), Ok(()));
    }

    #[test]
    fn empty_stream_ended_without_terminal() {
        let rules = ResponseStreamRules::new();
        assert_eq!(
            rules.on_end(),
            Err(StreamViolation::EndedWithoutTerminal {
                progress_messages: 0
            })
        );
    }

    #[test]
    fn progress_only_stream_ended_without_terminal() {
        let mut rules = ResponseStreamRules::new();
        for _ in 0..3 {
            rules.on_message(MessageKind::Progress).unwrap();
        }
        assert_eq!(
            rules.on_end(),
            Err(StreamViolation::EndedWithoutTerminal {
                progress_messages: 3
            })
        );
    }

    #[test]
    fn progress_after_terminal_is_a_violation() {
        let mut rules = ResponseStreamRules::new();
        rules.on_message(MessageKind::Terminal).unwrap();
        assert_eq!(
            rules.on_message(MessageKind::Progress),
            Err(StreamViolation::MessageAfterTerminal {
                kind: MessageKind::Progress,
                index: 1
            })
        );
        assert_eq!(rules.progress_messages(), 0);
        assert_eq!(rules.messages_seen(), 2);
    }

    fn kind() -> impl Strategy<Value = MessageKind> {
        prop_oneof![Just(MessageKind::Progress), Just(MessageKind::Terminal)]
    }

    proptest! {
        /// The rules accept exactly the streams `Progress* Terminal`.
        #[test]
        fn accepts_exactly_progress_star_then_one_terminal(
            kinds in proptest::collection::vec(kind(), 0..20)
        ) {
            let mut rules = ResponseStreamRules::new();
            let mut first_violation = None;
            for (i, k) in kinds.iter().enumerate() {
                if let Err(v) = rules.on_message(*k) {
                    first_violation.get_or_insert((i, v));
                }
            }
            let end = rules.on_end();
            let terminal_at = kinds.iter().position(|k| *k == MessageKind::Terminal);
            match terminal_at {
                None => {
                    prop_assert_eq!(first_violation, None);
                    prop_assert_eq!(end, Err(StreamViolation::EndedWithoutTerminal {
                        progress_messages: kinds.len() as u64,
                    }));
                }
                Some(t) if t + 1 == kinds.len() => {
                    prop_assert_eq!(first_violation, None);
                    prop_assert_eq!(end, Ok(()));
                }
                Some(t) => {
                    prop_assert_eq!(first_violation, Some((t + 1, StreamViolation::MessageAfterTerminal {
                        kind: kinds[t + 1],
                        index: (t + 1) as u64,
                    })));
                    prop_assert_eq!(end, Ok(()));
                    prop_assert_eq!(rules.progress_messages(), t as u64);
                }
            }
        }
    }
}
