//! The bridge's error: a message and the path to where it happened.

use std::fmt;

use ::serde::de::{self};
use ::serde::ser::{self};

use crate::error::Error;
use crate::serde::value::Value;

/// The bridge's serde error: a message plus the path to where it happened,
/// collected innermost first while the error travels up.
#[derive(Debug)]
pub(crate) struct BridgeError {
    msg: String,
    path: Vec<Seg>,
}

#[derive(Debug)]
pub(super) enum Seg {
    Field(String),
    Index(usize),
}

impl Seg {
    /// The segment a map key names in a path: string and integer keys only
    /// (any other key could nest without bound).
    pub(super) fn of_key(key: &Value) -> Option<Seg> {
        match key {
            Value::Str(s) => Some(Seg::Field(s.as_str().to_owned())),
            Value::Int(i) => Some(Seg::Field(i.to_string())),
            _ => None,
        }
    }
}

impl BridgeError {
    pub(super) fn new(msg: impl fmt::Display) -> Self {
        BridgeError {
            msg: msg.to_string(),
            path: Vec::new(),
        }
    }

    pub(super) fn at(mut self, seg: Seg) -> Self {
        self.path.push(seg);
        self
    }

    pub(super) fn at_field(self, name: &str) -> Self {
        self.at(Seg::Field(name.to_owned()))
    }

    /// At `seg`, when there is one.
    pub(super) fn at_opt(self, seg: Option<Seg>) -> Self {
        match seg {
            Some(seg) => self.at(seg),
            None => self,
        }
    }

    pub(super) fn at_key(self, key: &Value) -> Self {
        self.at_opt(Seg::of_key(key))
    }

    pub(super) fn into_error(self) -> Error {
        if self.path.is_empty() {
            return Error::serde(self.msg);
        }
        let mut path = String::new();
        for seg in self.path.iter().rev() {
            match seg {
                Seg::Field(name) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(name);
                }
                Seg::Index(i) => {
                    path.push('[');
                    path.push_str(&i.to_string());
                    path.push(']');
                }
            }
        }
        Error::serde(format!("at `{path}`: {}", self.msg))
    }
}

impl fmt::Display for BridgeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for BridgeError {}

impl ser::Error for BridgeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        BridgeError::new(msg)
    }
}

impl de::Error for BridgeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        BridgeError::new(msg)
    }
}

pub(super) type BResult<T> = std::result::Result<T, BridgeError>;
