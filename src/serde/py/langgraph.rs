//! LangGraph's own types: `Send`, `Interrupt`, `Command`.

use super::{object, read_arg, str_map, str_value, via_value, Object, CONSTRUCTOR_KW_ARGS, CONSTRUCTOR_POS_ARGS};
use crate::error::{Error, Result};
use crate::serde::Value;

const MODULE: &str = "langgraph.types";

/// `langgraph.types.Send`: a message to a node, ext 1 `["langgraph.types",
/// "Send", [node, arg]]`, or `[node, arg, timeout]` with a timeout.
///
/// ```
/// use checkpointer::serde::{msgpack, py::Send, Value};
/// let send = Send::new("node", Value::map([("x", Value::Int(1))]));
/// let hex: String = msgpack::encode(&send.to_value())?.iter().map(|b| format!("{b:02x}")).collect();
/// assert_eq!(hex, "c7200193af6c616e6767726170682e7479706573a453656e6492a46e6f646581a17801");
/// # Ok::<(), checkpointer::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Send {
    /// The node to run.
    pub node: String,
    /// The node's input.
    pub arg: Value,
    /// The `timeout` given to `Send` (a float of seconds, a `timedelta` or a
    /// `TimeoutPolicy`), if any.
    pub timeout: Option<Value>,
}

impl Send {
    /// A `Send(node, arg)`.
    pub fn new(node: impl Into<String>, arg: impl Into<Value>) -> Self {
        Send {
            node: node.into(),
            arg: arg.into(),
            timeout: None,
        }
    }

    /// The same `Send` with a timeout.
    #[must_use]
    pub fn with_timeout(self, timeout: impl Into<Value>) -> Self {
        Send {
            timeout: Some(timeout.into()),
            ..self
        }
    }

    /// The extension Python writes for this `Send`.
    pub fn to_value(&self) -> Value {
        let mut args = vec![str_value(&self.node), self.arg.clone()];
        if let Some(timeout) = &self.timeout {
            args.push(timeout.clone());
        }
        object(CONSTRUCTOR_POS_ARGS, MODULE, "Send", Value::Array(args.into()))
    }

    /// Reads a `langgraph.types.Send` extension.
    ///
    /// # Errors
    /// [`Error::Serde`] when `v` is not one.
    pub fn from_value(v: &Value) -> Result<Self> {
        read_arg(v, CONSTRUCTOR_POS_ARGS, MODULE, "Send", |arg| match arg.as_array()? {
            [Value::Str(node), arg] => Some(Send::new(node.clone(), arg.clone())),
            [Value::Str(node), arg, timeout] => {
                let send = Send::new(node.clone(), arg.clone());
                Some(if timeout.is_nil() {
                    send
                } else {
                    send.with_timeout(timeout.clone())
                })
            }
            _ => None,
        })
    }
}

via_value!(Send);

/// Reads the fields of a LangGraph dataclass into `set`, refusing unknown
/// ones (so nothing is dropped silently).
fn read_fields(
    v: &Value,
    class: &str,
    mut set: impl FnMut(&str, Value) -> Option<std::result::Result<(), ()>>,
) -> Result<()> {
    for (name, value) in Object::read_dataclass(v, MODULE, class)? {
        match set(&name, value) {
            Some(Ok(())) => {}
            Some(Err(())) => {
                return Err(Error::serde(format!(
                    "{MODULE}.{class} field {name:?} has an unexpected value"
                )));
            }
            None => return Err(Error::serde(format!("{MODULE}.{class} has no field {name:?}"))),
        }
    }
    Ok(())
}

/// `langgraph.types.Interrupt` (langgraph 1.2): ext 2 `["langgraph.types",
/// "Interrupt", {value, id, response_schema}]`.
///
/// Reading refuses fields this version does not know, so nothing is dropped
/// silently; read such a value with [`Object`] instead.
#[derive(Debug, Clone, PartialEq)]
pub struct Interrupt {
    /// The value shown to the client.
    pub value: Value,
    /// The interrupt's id.
    pub id: String,
    /// The schema the resume value should follow, `None` (nil) when not set.
    pub response_schema: Value,
}

impl Interrupt {
    /// An interrupt with `value` and `id`, no response schema.
    pub fn new(value: impl Into<Value>, id: impl Into<String>) -> Self {
        Interrupt {
            value: value.into(),
            id: id.into(),
            response_schema: Value::Nil,
        }
    }

    /// The extension Python writes for this interrupt.
    pub fn to_value(&self) -> Value {
        object(
            CONSTRUCTOR_KW_ARGS,
            MODULE,
            "Interrupt",
            str_map([
                ("value", self.value.clone()),
                ("id", str_value(&self.id)),
                ("response_schema", self.response_schema.clone()),
            ]),
        )
    }

    /// Reads a `langgraph.types.Interrupt` extension; a missing
    /// `response_schema` (older langgraph) reads as nil.
    ///
    /// # Errors
    /// [`Error::Serde`] when `v` is not one, lacks `value` or `id`, or has
    /// other fields.
    pub fn from_value(v: &Value) -> Result<Self> {
        let (mut value, mut id, mut response_schema) = (None, None, Value::Nil);
        read_fields(v, "Interrupt", |name, field| {
            match name {
                "value" => value = Some(field),
                "id" => match field {
                    Value::Str(s) => id = Some(s.into_string()),
                    _ => return Some(Err(())),
                },
                "response_schema" => response_schema = field,
                _ => return None,
            }
            Some(Ok(()))
        })?;
        match (value, id) {
            (Some(value), Some(id)) => Ok(Interrupt {
                value,
                id,
                response_schema,
            }),
            _ => Err(Error::serde("langgraph.types.Interrupt lacks `value` or `id`")),
        }
    }
}

via_value!(Interrupt);

/// `langgraph.types.Command`: ext 2 `["langgraph.types", "Command", {graph,
/// update, resume, goto}]`.
///
/// ```
/// use checkpointer::serde::{py::Command, Value};
/// let cmd = Command::new().with_goto("n").with_update(Value::map([("a", Value::Int(1))]));
/// assert_eq!(Command::from_value(&cmd.to_value())?, cmd);
/// # Ok::<(), checkpointer::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    /// The graph to send the command to: `None` for the current one,
    /// [`Command::PARENT`] for the parent.
    pub graph: Option<String>,
    /// The state update.
    pub update: Value,
    /// The value to resume an interrupt with.
    pub resume: Value,
    /// Where to go next: a node name, a [`Send`], or an array of them; an
    /// empty array (Python's default `()`) for nowhere.
    pub goto: Value,
}

impl Default for Command {
    fn default() -> Self {
        Command {
            graph: None,
            update: Value::Nil,
            resume: Value::Nil,
            goto: Value::Array(Vec::new().into()),
        }
    }
}

impl Command {
    /// `Command.PARENT`: send the command to the parent graph.
    pub const PARENT: &'static str = "__parent__";

    /// `Command()`: no update, no resume, no goto.
    pub fn new() -> Self {
        Command::default()
    }

    /// The same command sent to `graph`.
    #[must_use]
    pub fn with_graph(self, graph: impl Into<String>) -> Self {
        Command {
            graph: Some(graph.into()),
            ..self
        }
    }

    /// The same command with a state update.
    #[must_use]
    pub fn with_update(self, update: impl Into<Value>) -> Self {
        Command {
            update: update.into(),
            ..self
        }
    }

    /// The same command with a resume value.
    #[must_use]
    pub fn with_resume(self, resume: impl Into<Value>) -> Self {
        Command {
            resume: resume.into(),
            ..self
        }
    }

    /// The same command going to `goto` (a node name, a [`Send`]'s value or
    /// an array of them).
    #[must_use]
    pub fn with_goto(self, goto: impl Into<Value>) -> Self {
        Command {
            goto: goto.into(),
            ..self
        }
    }

    /// The extension Python writes for this command.
    pub fn to_value(&self) -> Value {
        object(
            CONSTRUCTOR_KW_ARGS,
            MODULE,
            "Command",
            str_map([
                ("graph", self.graph.as_deref().map_or(Value::Nil, str_value)),
                ("update", self.update.clone()),
                ("resume", self.resume.clone()),
                ("goto", self.goto.clone()),
            ]),
        )
    }

    /// Reads a `langgraph.types.Command` extension; missing fields take
    /// Python's defaults.
    ///
    /// # Errors
    /// [`Error::Serde`] when `v` is not one or has other fields.
    pub fn from_value(v: &Value) -> Result<Self> {
        let mut cmd = Command::default();
        read_fields(v, "Command", |name, field| {
            match name {
                "graph" => match field {
                    Value::Nil => cmd.graph = None,
                    Value::Str(s) => cmd.graph = Some(s.into_string()),
                    _ => return Some(Err(())),
                },
                "update" => cmd.update = field,
                "resume" => cmd.resume = field,
                "goto" => cmd.goto = field,
                _ => return None,
            }
            Some(Ok(()))
        })?;
        Ok(cmd)
    }
}

via_value!(Command);
