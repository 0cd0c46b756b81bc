//! Python types.
