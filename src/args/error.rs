//! [`ArgError`]: one problem with one argument, and how it reads.

use std::fmt::Write as _;


/// One problem with one argument.
///
/// Displays as `argument 'volume': must be at most 100 (allowed 0..100), got 101`, with
/// `; did you mean 'volume'?` appended when there are suggestions, and `arguments: …` in place of
/// `argument '…': …` for problems with the whole object (`argument` empty).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", render_error(.argument, .message, .suggestions))]
pub struct ArgError {
    /// Where: `volume`, `a.b` for nested fields, `tags[1]` for array items, `""` for the whole
    /// arguments object.
    pub argument: String,
    /// What is wrong, naming the rule and the allowed values: `must be at most 100 (allowed
    /// 0..100), got 101`.
    pub message: String,
    /// Close names (for unknown arguments) or close enum values, best first, at most 3.
    pub suggestions: Vec<String>,
}

impl ArgError {
    /// An error without suggestions.
    pub fn new(argument: impl Into<String>, message: impl Into<String>) -> Self {
        Self { argument: argument.into(), message: message.into(), suggestions: Vec::new() }
    }

    /// The same error with these suggestions.
    #[must_use]
    pub fn with_suggestions<S: Into<String>>(mut self, suggestions: impl IntoIterator<Item = S>) -> Self {
        self.suggestions = suggestions.into_iter().map(Into::into).collect();
        self
    }
}

pub(super) fn render_error(argument: &str, message: &str, suggestions: &[String]) -> String {
    let mut s =
        if argument.is_empty() { format!("arguments: {message}") } else { format!("argument '{argument}': {message}") };
    if !suggestions.is_empty() {
        let quoted: Vec<String> = suggestions.iter().map(|x| format!("'{x}'")).collect();
        let _ = write!(s, "; did you mean {}?", join_or(&quoted));
    }
    s
}

/// `a`, `a or b`, `a, b or c`.
pub(super) fn join_or(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}
