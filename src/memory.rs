//! `InMemorySaver`: the reference backend.

/// The in-memory saver.
#[derive(Debug, Default)]
pub struct InMemorySaver {}
