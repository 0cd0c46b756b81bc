//! Shared by the benches (a module `support` of each; a folder, so cargo
//! does not take it for a bench of its own).

/// The comma-separated list in environment variable `name`, or `default`.
pub fn env_list(name: &str, default: &str) -> Vec<String> {
    std::env::var(name)
        .unwrap_or_else(|_| default.to_owned())
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}
