//! The value layer without a saver: the spec's byte vectors, the typed bridge
//! and Python's types, values deeper than the decoder's limit, hostile and
//! malformed input, and untrusted data that never executes. One test binary,
//! one module per former test file.

mod bad_input;
#[cfg(feature = "render")]
mod deep_values;
mod py_types;
mod typed_bridge;
mod untrusted_data;
mod vectors;
