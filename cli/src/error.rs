//! Errors of the command line tool and their exit codes.

use std::fmt;

/// What went wrong, as the process exit code tells it.
///
/// | code | meaning |
/// |---:|---|
/// | 0 | success |
/// | 1 | any other failure (the output file cannot be written, …) |
/// | 2 | usage: bad arguments, a bad store URL, a bad `--filter` |
/// | 3 | not found: no such file, thread, namespace or checkpoint |
/// | 4 | store error: cannot connect, cannot read or write, undecodable data |
/// | 5 | conflict: the target thread exists (`copy` without `--overwrite`) |
/// | 6 | `export`, `threads`, `check`: the store reads inconsistently (errors on stderr) |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 1
    Failure,
    /// 2
    Usage,
    /// 3
    NotFound,
    /// 4
    Store,
    /// 5
    Conflict,
    /// 6
    Inconsistent,
}

impl Exit {
    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            Exit::Failure => 1,
            Exit::Usage => 2,
            Exit::NotFound => 3,
            Exit::Store => 4,
            Exit::Conflict => 5,
            Exit::Inconsistent => 6,
        }
    }
}

/// An error to report on stderr, with its exit code and an optional hint.
#[derive(Debug)]
pub struct CliError {
    /// The exit code.
    pub exit: Exit,
    /// What happened.
    pub message: String,
    /// What to do about it.
    pub hint: Option<String>,
}

impl CliError {
    pub fn new(exit: Exit, message: impl Into<String>) -> Self {
        CliError {
            exit,
            message: message.into(),
            hint: None,
        }
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(Exit::Usage, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(Exit::NotFound, message)
    }

    pub fn store(message: impl Into<String>) -> Self {
        Self::new(Exit::Store, message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(Exit::Conflict, message)
    }

    pub fn failure(message: impl Into<String>) -> Self {
        Self::new(Exit::Failure, message)
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// The error with every one of `secrets` masked in its message and hint.
    pub fn scrubbed(mut self, secrets: &checkpointer::secret::Secrets) -> Self {
        self.message = secrets.scrub(&self.message);
        self.hint = self.hint.map(|h| secrets.scrub(&h));
        self
    }

    /// A library error met while working on `what` (a store, a thread).
    pub fn from_lib(what: &str, e: checkpointer::Error) -> Self {
        use checkpointer::Error as E;
        let exit = match &e {
            E::ThreadExists { .. } => Exit::Conflict,
            E::BlockingInAsync { .. } => Exit::Failure,
            _ => Exit::Store,
        };
        // the library's messages include their cause
        let message = format!("{what}: {e}");
        CliError::new(exit, message)
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The result of a command.
pub type CliResult<T = ()> = Result<T, CliError>;

/// Adds the store or thread an error happened on.
pub trait Context<T> {
    fn context(self, what: impl fmt::Display) -> CliResult<T>;
}

impl<T> Context<T> for checkpointer::Result<T> {
    fn context(self, what: impl fmt::Display) -> CliResult<T> {
        self.map_err(|e| CliError::from_lib(&what.to_string(), e))
    }
}
