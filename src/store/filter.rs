//! [`Filter`]: LangGraph's structured search filter, typed.
//!
//! A filter maps top-level fields of an item's value to a condition:
//! a plain value (equal to the field, as Python's `==` compares JSON:
//! `1 == 1.0`, `true == 1`, objects regardless of key order, a missing field
//! equal to `null`), an object of operators (`{"$gt": 3, "$lte": 9}`, every
//! one must hold), an object of fields without operators (the field is an
//! object whose named fields match, recursively) or a list (a list of the
//! same length whose elements match in order).

use serde_json::{Map, Value};

use super::StoreError;
use crate::Result;

/// How deep a filter may nest (objects and lists).
pub const MAX_FILTER_NESTING: usize = 32;

/// A comparison operator of LangGraph's filters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FilterOp {
    /// `$eq`: equal (Python `==`).
    Eq,
    /// `$ne`: not equal.
    Ne,
    /// `$gt`: greater, compared as floats.
    Gt,
    /// `$gte`: greater or equal, as floats.
    Gte,
    /// `$lt`: less, as floats.
    Lt,
    /// `$lte`: less or equal, as floats.
    Lte,
}

impl FilterOp {
    /// The operator's name in a filter, `$eq` ...
    pub fn name(self) -> &'static str {
        match self {
            FilterOp::Eq => "$eq",
            FilterOp::Ne => "$ne",
            FilterOp::Gt => "$gt",
            FilterOp::Gte => "$gte",
            FilterOp::Lt => "$lt",
            FilterOp::Lte => "$lte",
        }
    }

    /// The operator named `name`, if LangGraph has it.
    pub fn from_name(name: &str) -> Option<FilterOp> {
        Some(match name {
            "$eq" => FilterOp::Eq,
            "$ne" => FilterOp::Ne,
            "$gt" => FilterOp::Gt,
            "$gte" => FilterOp::Gte,
            "$lt" => FilterOp::Lt,
            "$lte" => FilterOp::Lte,
            _ => return None,
        })
    }

    fn is_ordering(self) -> bool {
        !matches!(self, FilterOp::Eq | FilterOp::Ne)
    }
}

/// What a field must satisfy.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// Equal to this value (Python's `==` on JSON).
    Equals(Value),
    /// Every comparison holds.
    Compare(Vec<(FilterOp, Value)>),
    /// The field is an object whose fields match.
    Fields(Vec<(String, Condition)>),
    /// The field is a list of the same length whose elements match.
    Items(Vec<Condition>),
}

/// A search filter: conditions on top-level fields of an item's value, all
/// of which must hold.
///
/// ```
/// use checkpointer::store::{Filter, FilterOp};
/// let filter = Filter::from_json(&serde_json::json!({"kind": "note", "score": {"$gte": 3}}))?;
/// assert!(filter.matches(serde_json::json!({"kind": "note", "score": 4.5}).as_object().unwrap()));
/// assert!(!filter.matches(serde_json::json!({"kind": "note"}).as_object().unwrap()));
/// let same = Filter::new().eq("kind", "note").compare("score", FilterOp::Gte, 3);
/// assert_eq!(filter, same);
/// assert!(Filter::from_json(&serde_json::json!({"x": {"$regex": "a"}})).is_err());
/// # Ok::<(), checkpointer::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Filter {
    fields: Vec<(String, Condition)>,
}

impl Filter {
    /// A filter that matches everything.
    pub fn new() -> Filter {
        Filter::default()
    }

    /// And `field` equals `value`.
    pub fn eq(mut self, field: impl Into<String>, value: impl Into<Value>) -> Filter {
        self.fields.push((field.into(), Condition::Equals(value.into())));
        self
    }

    /// And `field` compares to `value` by `op`.
    ///
    /// An ordering operand that is not a number, a boolean or a numeric
    /// string matches nothing ([`Filter::from_json`] refuses it).
    pub fn compare(mut self, field: impl Into<String>, op: FilterOp, value: impl Into<Value>) -> Filter {
        let field = field.into();
        let value = value.into();
        if let Some((_, Condition::Compare(ops))) = self.fields.iter_mut().find(|(f, _)| *f == field) {
            ops.push((op, value));
        } else {
            self.fields.push((field, Condition::Compare(vec![(op, value)])));
        }
        self
    }

    /// The conditions, by field.
    pub fn fields(&self) -> &[(String, Condition)] {
        &self.fields
    }

    /// Whether the filter has no condition.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Parses LangGraph's filter object.
    ///
    /// # Errors
    /// [`StoreError::UnknownFilterOperator`] for an operator other than
    /// `$eq $ne $gt $gte $lt $lte`, or an object mixing operators and
    /// fields; [`StoreError::InvalidFilter`] when `json` is not an object,
    /// an ordering operand is not numeric, or the filter nests deeper than
    /// [`MAX_FILTER_NESTING`].
    pub fn from_json(json: &Value) -> Result<Filter> {
        let Value::Object(map) = json else {
            return Err(invalid("a filter must be a JSON object"));
        };
        Ok(Filter {
            fields: parse_fields(map, 1)?,
        })
    }

    /// Whether an item's value satisfies every condition.
    pub fn matches(&self, value: &Map<String, Value>) -> bool {
        self.fields
            .iter()
            .all(|(field, cond)| cond.matches(value.get(field).unwrap_or(&Value::Null)))
    }
}

fn invalid(reason: impl Into<String>) -> crate::Error {
    StoreError::InvalidFilter { reason: reason.into() }.into()
}

fn parse_fields(map: &Map<String, Value>, depth: usize) -> Result<Vec<(String, Condition)>> {
    map.iter()
        .map(|(k, v)| Ok((k.clone(), parse_condition(v, depth)?)))
        .collect()
}

fn parse_condition(value: &Value, depth: usize) -> Result<Condition> {
    if depth > MAX_FILTER_NESTING {
        return Err(invalid(format!("nests deeper than {MAX_FILTER_NESTING} levels")));
    }
    Ok(match value {
        Value::Object(map) if map.keys().any(|k| k.starts_with('$')) => {
            let mut ops = Vec::with_capacity(map.len());
            for (name, operand) in map {
                let op = FilterOp::from_name(name)
                    .ok_or_else(|| StoreError::UnknownFilterOperator { operator: name.clone() })?;
                if op.is_ordering() && py_float(operand).is_none() {
                    return Err(invalid(format!("the operand of {} must be a number", op.name())));
                }
                ops.push((op, operand.clone()));
            }
            Condition::Compare(ops)
        }
        Value::Object(map) => Condition::Fields(parse_fields(map, depth + 1)?),
        Value::Array(items) => Condition::Items(
            items
                .iter()
                .map(|v| parse_condition(v, depth + 1))
                .collect::<Result<_>>()?,
        ),
        other => Condition::Equals(other.clone()),
    })
}

impl Condition {
    /// Whether `value` (`null` for a missing field) satisfies the condition.
    pub fn matches(&self, value: &Value) -> bool {
        match self {
            Condition::Equals(expected) => py_eq(value, expected),
            Condition::Compare(ops) => ops.iter().all(|(op, operand)| compare(value, *op, operand)),
            Condition::Fields(fields) => match value {
                Value::Object(map) => fields
                    .iter()
                    .all(|(k, c)| c.matches(map.get(k).unwrap_or(&Value::Null))),
                _ => false,
            },
            Condition::Items(conds) => match value {
                Value::Array(items) => items.len() == conds.len() && items.iter().zip(conds).all(|(v, c)| c.matches(v)),
                _ => false,
            },
        }
    }
}

fn compare(value: &Value, op: FilterOp, operand: &Value) -> bool {
    match op {
        FilterOp::Eq => py_eq(value, operand),
        FilterOp::Ne => !py_eq(value, operand),
        _ => {
            // Python's float() of both sides; a side it refuses (null, a
            // list, a word) matches nothing instead of failing the search.
            let (Some(a), Some(b)) = (py_float(value), py_float(operand)) else {
                return false;
            };
            match op {
                FilterOp::Gt => a > b,
                FilterOp::Gte => a >= b,
                FilterOp::Lt => a < b,
                _ => a <= b,
            }
        }
    }
}

/// Python's `float(x)` of a JSON value: numbers, booleans and numeric strings.
pub(crate) fn py_float(value: &Value) -> Option<f64> {
    match value {
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
}

enum Num {
    Int(i128),
    Float(f64),
}

fn num(value: &Value) -> Option<Num> {
    match value {
        Value::Bool(b) => Some(Num::Int(i128::from(*b))),
        Value::Number(n) => n
            .as_i64()
            .map(|i| Num::Int(i128::from(i)))
            .or_else(|| n.as_u64().map(|u| Num::Int(i128::from(u))))
            .or_else(|| n.as_f64().map(Num::Float)),
        _ => None,
    }
}

fn num_eq(a: Num, b: Num) -> bool {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x == y,
        (Num::Float(x), Num::Float(y)) => x == y,
        (Num::Int(i), Num::Float(f)) | (Num::Float(f), Num::Int(i)) => {
            // exact, as Python compares an int with a float
            f.fract() == 0.0 && f.abs() < 1.7e38 && f as i128 == i
        }
    }
}

/// Python's `==` between two JSON values, without recursion.
pub(crate) fn py_eq(a: &Value, b: &Value) -> bool {
    let mut stack = vec![(a, b)];
    while let Some((a, b)) = stack.pop() {
        let equal = match (a, b) {
            (Value::Null, Value::Null) => true,
            (Value::String(x), Value::String(y)) => x == y,
            (Value::Array(x), Value::Array(y)) => {
                if x.len() != y.len() {
                    return false;
                }
                stack.extend(x.iter().zip(y));
                true
            }
            (Value::Object(x), Value::Object(y)) => {
                if x.len() != y.len() {
                    return false;
                }
                for (k, v) in x {
                    match y.get(k) {
                        Some(w) => stack.push((v, w)),
                        None => return false,
                    }
                }
                true
            }
            _ => match (num(a), num(b)) {
                (Some(x), Some(y)) => num_eq(x, y),
                _ => false,
            },
        };
        if !equal {
            return false;
        }
    }
    true
}
