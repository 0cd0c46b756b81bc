//! [`Namespace`]: the tuple of labels an item lives under, validated as
//! LangGraph validates it.

use std::fmt;
use std::sync::Arc;

use super::StoreError;
use crate::Result;

/// The first label no stored item may have: LangGraph reserves it.
pub const RESERVED_ROOT: &str = "langgraph";

/// A namespace: a tuple of labels, each not empty and without `.` or NUL
/// (LangGraph's rules; `.` joins the labels in the SQL stores' `prefix`
/// column). The empty namespace is valid here, as a search prefix or a
/// `list_namespaces` path; storing an item also needs a first label, not
/// [`RESERVED_ROOT`] (checked by the store: [`Namespace::check_writable`]).
/// `*` is an ordinary label, a wildcard only in a [`MatchCondition`] path.
///
/// Cheap to clone (shared labels). Ordered as Python orders tuples of
/// strings: label by label (code points), a prefix before its extensions.
///
/// ```
/// use checkpointer::store::Namespace;
/// let ns = Namespace::new(["users", "42", "prefs"])?;
/// assert_eq!(ns.labels(), ["users", "42", "prefs"]);
/// assert_eq!(ns.to_string(), "users.42.prefs");
/// assert!(ns.starts_with(&Namespace::new(["users"])?));
/// assert!(Namespace::new(["a.b"]).is_err());
/// # Ok::<(), checkpointer::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Namespace(Arc<[String]>);

impl Namespace {
    /// A namespace of `labels`.
    ///
    /// # Errors
    /// [`StoreError::InvalidNamespace`] when a label is empty or holds `.`
    /// or NUL.
    pub fn new<I, S>(labels: I) -> Result<Namespace>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let labels: Vec<String> = labels.into_iter().map(Into::into).collect();
        let problem = labels.iter().find_map(|label| {
            if label.is_empty() {
                Some("labels cannot be empty strings")
            } else if label.contains('.') {
                Some("labels cannot contain periods ('.')")
            } else if label.contains('\0') {
                Some("labels cannot contain NUL")
            } else {
                None
            }
        });
        match problem {
            Some(reason) => Err(StoreError::InvalidNamespace {
                namespace: labels,
                reason,
            }
            .into()),
            None => Ok(Namespace(labels.into())),
        }
    }

    /// The empty namespace: the prefix of every namespace.
    pub fn root() -> Namespace {
        Namespace::default()
    }

    /// The labels.
    pub fn labels(&self) -> &[String] {
        &self.0
    }

    /// The number of labels.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether this is the empty namespace.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `prefix`'s labels are this namespace's first labels (whole
    /// labels: `("a",)` is not a prefix of `("ab",)`).
    pub fn starts_with(&self, prefix: &Namespace) -> bool {
        self.0.starts_with(&prefix.0)
    }

    /// The first `depth` labels (all of them when there are fewer).
    pub fn truncated(&self, depth: usize) -> Namespace {
        if depth >= self.0.len() {
            self.clone()
        } else {
            Namespace(self.0[..depth].to_vec().into())
        }
    }

    /// The labels joined with `.`: the `prefix` column of the SQL stores.
    pub fn dotted(&self) -> String {
        self.0.join(".")
    }

    /// Whether an item may be stored under this namespace: at least one
    /// label, and not [`RESERVED_ROOT`] first.
    ///
    /// # Errors
    /// [`StoreError::InvalidNamespace`].
    pub fn check_writable(&self) -> Result<()> {
        let reason = match self.0.first() {
            None => "a namespace cannot be empty",
            Some(root) if root == RESERVED_ROOT => "the root label cannot be \"langgraph\"",
            Some(_) => return Ok(()),
        };
        Err(StoreError::InvalidNamespace {
            namespace: self.0.to_vec(),
            reason,
        }
        .into())
    }
}

impl fmt::Debug for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Namespace").field(&&*self.0).finish()
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.dotted())
    }
}

/// Which end of a namespace a [`MatchCondition`] path is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatchKind {
    /// The path's labels are the namespace's first labels.
    Prefix,
    /// The path's labels are the namespace's last labels.
    Suffix,
}

/// A condition of `list_namespaces`: `path` matches the namespace's first
/// (prefix) or last (suffix) labels, a `*` label matching any one label.
/// A namespace shorter than the path never matches; an empty path matches
/// every namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MatchCondition {
    /// Prefix or suffix.
    pub kind: MatchKind,
    /// The labels to match, `*` for any label.
    pub path: Namespace,
}

impl MatchCondition {
    /// A prefix condition.
    pub fn prefix(path: Namespace) -> MatchCondition {
        MatchCondition {
            kind: MatchKind::Prefix,
            path,
        }
    }

    /// A suffix condition.
    pub fn suffix(path: Namespace) -> MatchCondition {
        MatchCondition {
            kind: MatchKind::Suffix,
            path,
        }
    }

    /// Whether `namespace` satisfies the condition.
    pub fn matches(&self, namespace: &Namespace) -> bool {
        let (ns, path) = (namespace.labels(), self.path.labels());
        if ns.len() < path.len() {
            return false;
        }
        let same = |(n, p): (&String, &String)| p == "*" || n == p;
        match self.kind {
            MatchKind::Prefix => ns.iter().zip(path).all(same),
            MatchKind::Suffix => ns.iter().rev().zip(path.iter().rev()).all(same),
        }
    }
}
