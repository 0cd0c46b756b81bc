//! A synchronous facade over any [`CheckpointSaver`](crate::CheckpointSaver).
