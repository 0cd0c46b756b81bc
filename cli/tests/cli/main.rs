//! The `checkpointer` command run as a user runs it: one test binary, one
//! module per area.

mod commands;
mod copy;
mod crash;
mod errors;
mod export;
mod hardening;
mod support;
