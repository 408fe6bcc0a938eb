//! Long conversations: past a token estimate, the older part of a run's transcript is
//! summarised — by the model or by the application — into one message. A tool call is
//! never separated from its result, the system prompt and the turn being worked on are
//! never touched, and the run keeps what was compacted in its log
//! ([`Event::Compacted`](crate::Event::Compacted)). The setting and where a
//! transcript may be cut; the compaction itself is in `compact`.

use std::sync::Arc;

use crate::model::{Block, Message, Role};

pub(super) type SummaryFn = Arc<dyn Fn(&[Message]) -> String + Send + Sync>;

/// When and how a run's transcript is compacted
/// ([`AgentBuilder::compaction`](crate::AgentBuilder::compaction)).
#[derive(Clone)]
pub struct Compaction {
    pub(super) threshold: u64,
    pub(super) keep_recent: u64,
    pub(super) summarize: Option<SummaryFn>,
}

impl std::fmt::Debug for Compaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compaction")
            .field("threshold", &self.threshold)
            .field("keep_recent", &self.keep_recent)
            .field("by_model", &self.summarize.is_none())
            .finish()
    }
}

/// The tokens an image counts for in the estimate.
const IMAGE_TOKENS: u64 = 1_500;

impl Compaction {
    /// Compact once the transcript's estimate passes `tokens` (about four characters
    /// a token; an image counts for 1,500): the older part is summarised by the model,
    /// the most recent half kept as it is.
    pub fn at_tokens(tokens: u64) -> Compaction {
        Compaction {
            threshold: tokens,
            keep_recent: tokens / 2,
            summarize: None,
        }
    }

    /// Keep about this many tokens of the most recent messages as they are (default
    /// half the threshold). The turn being worked on is always kept, whatever its size.
    pub fn keep_recent(mut self, tokens: u64) -> Compaction {
        self.keep_recent = tokens;
        self
    }

    /// Summarise with the application's function instead of the model (given the
    /// messages to compact, in order; what it returns replaces them).
    pub fn summarize_with(
        mut self,
        f: impl Fn(&[Message]) -> String + Send + Sync + 'static,
    ) -> Compaction {
        self.summarize = Some(Arc::new(f));
        self
    }
}

/// The transcript's size, estimated: characters / 4, images a fixed count.
pub(super) fn estimate(messages: &[Message]) -> u64 {
    tokens(messages.iter().map(size).fold((0, 0), add))
}

/// The estimate of every suffix of the transcript (`[i]`: of `messages[i..]`), each
/// message measured once.
pub(super) fn suffix_estimates(messages: &[Message]) -> Vec<u64> {
    let mut sums = vec![0; messages.len() + 1];
    let mut acc = (0, 0);
    for (i, m) in messages.iter().enumerate().rev() {
        acc = add(acc, size(m));
        sums[i] = tokens(acc);
    }
    sums
}

/// One message's characters and images.
fn size(m: &Message) -> (usize, u64) {
    let mut chars = 0usize;
    let mut images = 0u64;
    for b in &m.content {
        match b {
            Block::Text { text } => chars += text.len(),
            Block::ToolCall {
                name, arguments, ..
            } => chars += name.len() + arguments.to_string().len(),
            Block::ToolResult { content, parts, .. } => {
                chars += content.len();
                images += parts.len() as u64;
            }
            Block::Image { .. } | Block::Audio { .. } | Block::File { .. } => images += 1,
            Block::Provider { value } => chars += value.to_string().len(),
        }
    }
    (chars, images)
}

fn add(a: (usize, u64), b: (usize, u64)) -> (usize, u64) {
    (a.0 + b.0, a.1 + b.1)
}

fn tokens((chars, images): (usize, u64)) -> u64 {
    (chars as u64) / 4 + images * IMAGE_TOKENS
}

/// Where the transcript may be cut: before a person's message, or before the model's
/// turn that follows a complete call-and-result pair — never between a call and its
/// result. The first candidate is after the system prompt and the first message.
pub(super) fn cuts(messages: &[Message]) -> Vec<usize> {
    let start = messages
        .iter()
        .position(|m| m.role != Role::System)
        .unwrap_or(messages.len());
    (start + 1..messages.len())
        .filter(|&i| match messages[i].role {
            Role::User => messages[i - 1].role != Role::User,
            Role::Assistant => messages[i - 1].role == Role::Tool,
            _ => false,
        })
        .collect()
}

/// The messages as plain text, for a summary request: every wire takes it.
pub(super) fn as_text(messages: &[Message]) -> String {
    let mut out = String::new();
    for m in messages {
        for b in &m.content {
            let line = match (m.role, b) {
                (Role::User, Block::Text { text }) => format!("person: {text}"),
                (Role::Assistant, Block::Text { text }) => format!("assistant: {text}"),
                (Role::System, Block::Text { text }) => format!("instructions: {text}"),
                (
                    _,
                    Block::ToolCall {
                        name, arguments, ..
                    },
                ) => format!("assistant called `{name}` with {arguments}"),
                (
                    _,
                    Block::ToolResult {
                        content, is_error, ..
                    },
                ) => {
                    let kind = if *is_error { "error" } else { "result" };
                    format!("tool {kind}: {}", crate::error::clip(content, 4000))
                }
                (_, Block::Image { .. }) => "[an image]".to_owned(),
                (_, Block::Audio { .. }) => "[audio]".to_owned(),
                (_, Block::File { .. }) => "[a file]".to_owned(),
                _ => continue,
            };
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str) -> Message {
        Message {
            role: Role::Assistant,
            content: vec![Block::ToolCall {
                id: id.into(),
                name: "f".into(),
                arguments: json!({}),
            }],
        }
    }

    fn result(id: &str) -> Message {
        Message {
            role: Role::Tool,
            content: vec![Block::tool_result(id, "r", false)],
        }
    }

    #[test]
    fn cuts_never_separate_a_call_from_its_result() {
        let messages = vec![
            Message::text(Role::System, "s"),
            Message::text(Role::User, "u1"),
            call("a"),
            result("a"),
            call("b"),
            result("b"),
            Message::text(Role::Assistant, "done"),
            Message::text(Role::User, "u2"),
        ];
        // Before the second call (after a's pair), before the answer (after b's
        // pair), before the second person's message.
        assert_eq!(cuts(&messages), [4, 6, 7]);
        for c in cuts(&messages) {
            assert_ne!(messages[c].role, Role::Tool);
        }
    }
}
