//! Unit tests of the in-memory saver internals.
