//! Python's `set`, `frozenset` and `collections.deque` (ext 0 with a list of
//! items).

use ::serde::de::DeserializeOwned;
use ::serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{foreign, object, read_arg, CONSTRUCTOR_SINGLE_ARG};
use crate::error::{Error, Result};
use crate::serde::typed::{from_value_ref as typed_from_value, to_value as typed_to_value};
use crate::serde::Value;

macro_rules! collection {
    ($(#[$doc:meta])* $name:ident, $module:literal, $class:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
        pub struct $name<T>(pub Vec<T>);

        impl<T: Serialize> $name<T> {
            #[doc = concat!("The extension Python writes for this `", $class, "` (items in order).")]
            ///
            /// # Errors
            /// [`Error::Serde`] when an item cannot be converted (see
            /// [`to_value`](crate::serde::to_value)).
            pub fn to_value(&self) -> Result<Value> {
                let items = self.0.iter().map(typed_to_value).collect::<Result<Vec<_>>>()?;
                Ok(object(CONSTRUCTOR_SINGLE_ARG, $module, $class, Value::Array(items.into())))
            }
        }

        impl<T: DeserializeOwned> $name<T> {
            #[doc = concat!("Reads a `", $module, ".", $class, "` extension.")]
            ///
            /// # Errors
            #[doc = concat!("[`Error::Serde`] when `v` is not a `", $class, "`, or an item is not a `T`.")]
            pub fn from_value(v: &Value) -> Result<Self> {
                let items = read_arg(v, CONSTRUCTOR_SINGLE_ARG, $module, $class, |arg| arg.as_array().map(<[Value]>::to_vec))?;
                items.iter().map(typed_from_value).collect::<Result<Vec<T>>>().map($name)
            }
        }

        impl<T> FromIterator<T> for $name<T> {
            fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
                $name(iter.into_iter().collect())
            }
        }

        impl<T> IntoIterator for $name<T> {
            type Item = T;
            type IntoIter = std::vec::IntoIter<T>;

            fn into_iter(self) -> Self::IntoIter {
                self.0.into_iter()
            }
        }

        impl<T: Serialize> Serialize for $name<T> {
            fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                self.to_value().map_err(::serde::ser::Error::custom)?.serialize(s)
            }
        }

        impl<'de, T: DeserializeOwned> Deserialize<'de> for $name<T> {
            fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
                let v = foreign(Value::deserialize(d)?);
                Self::from_value(&v).map_err(::serde::de::Error::custom)
            }
        }

        impl<T: Serialize> TryFrom<&$name<T>> for Value {
            type Error = Error;

            fn try_from(x: &$name<T>) -> Result<Value> {
                x.to_value()
            }
        }

        impl<T: DeserializeOwned> TryFrom<&Value> for $name<T> {
            type Error = Error;

            fn try_from(v: &Value) -> Result<Self> {
                Self::from_value(v)
            }
        }
    };
}

collection!(
    /// Python's `set`: ext 0 `["builtins", "set", [items…]]`.
    ///
    /// Python writes a set's items in its iteration order, which is not
    /// deterministic; this keeps them in the order given and read.
    Set,
    "builtins",
    "set"
);

collection!(
    /// Python's `frozenset`: ext 0 `["builtins", "frozenset", [items…]]`.
    FrozenSet,
    "builtins",
    "frozenset"
);

collection!(
    /// Python's `collections.deque`: ext 0 `["collections", "deque", [items…]]`
    /// (Python does not record `maxlen`).
    Deque,
    "collections",
    "deque"
);
