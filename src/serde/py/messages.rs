//! LangChain chat messages (pydantic v2 models, ext 5).

use super::{read_any_class, str_value, via_value, ObjectKind, PYDANTIC_V2};
use crate::error::{Error, Result};
use crate::serde::Value;

/// Which LangChain message class a [`Message`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MessageKind {
    /// `langchain_core.messages.human.HumanMessage` (type `"human"`).
    Human,
    /// `langchain_core.messages.ai.AIMessage` (type `"ai"`).
    Ai,
    /// `langchain_core.messages.system.SystemMessage` (type `"system"`).
    System,
    /// `langchain_core.messages.tool.ToolMessage` (type `"tool"`).
    Tool,
    /// `langchain_core.messages.modifier.RemoveMessage` (type `"remove"`):
    /// a marker asking `add_messages` to remove the message of its id.
    Remove,
}

impl MessageKind {
    const ALL: [MessageKind; 5] = [
        MessageKind::Human,
        MessageKind::Ai,
        MessageKind::System,
        MessageKind::Tool,
        MessageKind::Remove,
    ];

    /// The Python module of the class.
    pub fn module(self) -> &'static str {
        match self {
            MessageKind::Human => "langchain_core.messages.human",
            MessageKind::Ai => "langchain_core.messages.ai",
            MessageKind::System => "langchain_core.messages.system",
            MessageKind::Tool => "langchain_core.messages.tool",
            MessageKind::Remove => "langchain_core.messages.modifier",
        }
    }

    /// The Python class name.
    pub fn class(self) -> &'static str {
        match self {
            MessageKind::Human => "HumanMessage",
            MessageKind::Ai => "AIMessage",
            MessageKind::System => "SystemMessage",
            MessageKind::Tool => "ToolMessage",
            MessageKind::Remove => "RemoveMessage",
        }
    }

    /// The message's `type` field.
    pub fn type_name(self) -> &'static str {
        match self {
            MessageKind::Human => "human",
            MessageKind::Ai => "ai",
            MessageKind::System => "system",
            MessageKind::Tool => "tool",
            MessageKind::Remove => "remove",
        }
    }
}

/// A LangChain chat message as Python's serializer writes it: ext 5
/// `[module, class, model_dump(), "model_validate_json"]`.
///
/// The dump's fields are `content, additional_kwargs, response_metadata,
/// type, name, id`, then the class's own fields, kept in [`extra`] in
/// order: for `AIMessage` `tool_calls, invalid_tool_calls, usage_metadata`,
/// for `ToolMessage` `tool_call_id, artifact, status` (langchain-core 1.x).
/// The constructors fill those with Python's defaults, so the bytes are the
/// ones Python writes for the same message:
///
/// ```
/// use checkpointer::serde::{msgpack, py::Message};
/// let m = Message::human("hi").with_id("1");
/// let bytes = msgpack::encode(&m.to_value())?;
/// assert_eq!(bytes.len(), 139);
/// assert_eq!(Message::from_value(&msgpack::decode(&bytes)?)?, m);
/// # Ok::<(), checkpointer::Error>(())
/// ```
///
/// [`extra`]: Message::extra
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// The class.
    pub kind: MessageKind,
    /// A string, or an array of content blocks (maps).
    pub content: Value,
    /// `additional_kwargs`, a map.
    pub additional_kwargs: Value,
    /// `response_metadata`, a map.
    pub response_metadata: Value,
    /// `name`.
    pub name: Option<String>,
    /// `id`.
    pub id: Option<String>,
    /// The fields after `id`, in order.
    pub extra: Vec<(String, Value)>,
}

impl Message {
    fn new(kind: MessageKind, content: Value, extra: Vec<(String, Value)>) -> Self {
        Message {
            kind,
            content,
            additional_kwargs: Value::Map(Vec::new().into()),
            response_metadata: Value::Map(Vec::new().into()),
            name: None,
            id: None,
            extra,
        }
    }

    /// `HumanMessage(content)`.
    pub fn human(content: impl Into<Value>) -> Self {
        Message::new(MessageKind::Human, content.into(), Vec::new())
    }

    /// `SystemMessage(content)`.
    pub fn system(content: impl Into<Value>) -> Self {
        Message::new(MessageKind::System, content.into(), Vec::new())
    }

    /// `AIMessage(content)`: no tool calls, no usage metadata.
    pub fn ai(content: impl Into<Value>) -> Self {
        Message::new(
            MessageKind::Ai,
            content.into(),
            vec![
                ("tool_calls".into(), Value::Array(Vec::new().into())),
                ("invalid_tool_calls".into(), Value::Array(Vec::new().into())),
                ("usage_metadata".into(), Value::Nil),
            ],
        )
    }

    /// `ToolMessage(content, tool_call_id=…)`: no artifact, status
    /// `"success"`.
    pub fn tool(content: impl Into<Value>, tool_call_id: impl Into<String>) -> Self {
        Message::new(
            MessageKind::Tool,
            content.into(),
            vec![
                ("tool_call_id".into(), Value::from(tool_call_id.into())),
                ("artifact".into(), Value::Nil),
                ("status".into(), str_value("success")),
            ],
        )
    }

    /// `RemoveMessage(id=…)`: the marker that removes the message `id` when
    /// merged by [`add_messages`](crate::reducer::add_messages), or every
    /// message before it when `id` is
    /// [`REMOVE_ALL_MESSAGES`](crate::reducer::REMOVE_ALL_MESSAGES).
    pub fn remove(id: impl Into<String>) -> Self {
        Message::new(MessageKind::Remove, Value::from(""), Vec::new()).with_id(id)
    }

    /// The same message with an id.
    #[must_use]
    pub fn with_id(self, id: impl Into<String>) -> Self {
        Message {
            id: Some(id.into()),
            ..self
        }
    }

    /// The same message with a name.
    #[must_use]
    pub fn with_name(self, name: impl Into<String>) -> Self {
        Message {
            name: Some(name.into()),
            ..self
        }
    }

    /// The same message with field `name` of [`extra`](Self::extra) set,
    /// replacing its value or appending it.
    #[must_use]
    pub fn with_field(mut self, name: &str, value: impl Into<Value>) -> Self {
        let value = value.into();
        match self.extra.iter_mut().find(|(k, _)| k == name) {
            Some((_, v)) => *v = value,
            None => self.extra.push((name.to_owned(), value)),
        }
        self
    }

    /// The content, if it is a string.
    pub fn text(&self) -> Option<&str> {
        self.content.as_str()
    }

    /// Field `name` of [`extra`](Self::extra) (e.g. `tool_calls`).
    pub fn field(&self, name: &str) -> Option<&Value> {
        self.extra.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// The extension Python writes for this message.
    pub fn to_value(&self) -> Value {
        let opt = |s: &Option<String>| s.as_deref().map_or(Value::Nil, str_value);
        let mut fields = vec![
            (str_value("content"), self.content.clone()),
            (str_value("additional_kwargs"), self.additional_kwargs.clone()),
            (str_value("response_metadata"), self.response_metadata.clone()),
            (str_value("type"), str_value(self.kind.type_name())),
            (str_value("name"), opt(&self.name)),
            (str_value("id"), opt(&self.id)),
        ];
        fields.extend(self.extra.iter().map(|(k, v)| (str_value(k), v.clone())));
        ObjectKind::PydanticV2.encode(self.kind.module(), self.kind.class(), Value::Map(fields.into()))
    }

    /// Reads a `HumanMessage`, `AIMessage`, `SystemMessage`, `ToolMessage` or `RemoveMessage`
    /// extension. Missing `additional_kwargs`/`response_metadata` read as
    /// empty maps; `type` is implied by the class.
    ///
    /// # Errors
    /// [`Error::Serde`] when `v` is not one of these messages, lacks
    /// `content`, or `name`/`id` are not strings or nil.
    pub fn from_value(v: &Value) -> Result<Self> {
        let (kind, fields) = read_any_class(v, PYDANTIC_V2, "a LangChain message", |p| {
            let kind = MessageKind::ALL
                .into_iter()
                .find(|k| k.module() == p.module && k.class() == p.class)?;
            Some((kind, p.arg.as_map()?.to_vec()))
        })?;
        let mut content = None;
        let mut m = Message::new(kind, Value::Nil, Vec::new());
        for (k, val) in fields {
            let Value::Str(k) = k else {
                return Err(Error::serde("a LangChain message field name is not a string"));
            };
            let opt_str = |val: Value| match val {
                Value::Nil => Ok(None),
                Value::Str(s) => Ok(Some(s.into_string())),
                _ => Err(Error::serde(format!("LangChain message field {k:?} is not a string"))),
            };
            match k.as_str() {
                "content" => content = Some(val),
                "additional_kwargs" => m.additional_kwargs = val,
                "response_metadata" => m.response_metadata = val,
                "type" => {}
                "name" => m.name = opt_str(val)?,
                "id" => m.id = opt_str(val)?,
                _ => m.extra.push((k.into_string(), val)),
            }
        }
        m.content = content.ok_or_else(|| Error::serde(format!("{} lacks `content`", kind.class())))?;
        Ok(m)
    }
}

via_value!(Message);
