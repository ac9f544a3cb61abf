//! JFR event types a script declares: `@Event(name, label, description, category, fields)`
//! on a `JfrEvent.Factory` field, and `@PeriodicEvent(..., period)` on the handler that
//! fills one event each period.

use tree_sitter::Node;

use super::{fail, named_children, Annotation, Compiler, Result};
use crate::ast::{EventField, EventType, Period, Script, Trigger};

impl Compiler<'_> {
    /// Declares the event type of annotation `a` in `script`: its index.
    pub(super) fn declare_event(&self, a: &Annotation, script: &mut Script) -> Result<usize> {
        let event = self.event_type(a)?;
        if script.events.iter().any(|e| e.name == event.name) {
            return fail(a.node, format!("event {} is declared twice", event.name));
        }
        script.events.push(event);
        Ok(script.events.len() - 1)
    }

    /// `@PeriodicEvent` on method `node`: a handler taking one `JfrEvent`.
    pub(super) fn periodic(
        &self,
        a: &Annotation,
        node: Node,
        script: &mut Script,
    ) -> Result<Trigger> {
        let params = node
            .child_by_field_name("parameters")
            .map(named_children)
            .unwrap_or_default();
        if params
            .iter()
            .filter(|p| p.kind() != "line_comment" && p.kind() != "block_comment")
            .count()
            != 1
        {
            return fail(
                node,
                "a @PeriodicEvent handler takes one parameter, the JfrEvent to fill",
            );
        }
        let period = self.period(a)?;
        let event = self.declare_event(a, script)?;
        Ok(Trigger::Periodic { event, period })
    }

    /// The event type `@Event` or `@PeriodicEvent` annotation `a` declares.
    pub(super) fn event_type(&self, a: &Annotation) -> Result<EventType> {
        let argument = |key: &str| a.arguments.iter().find(|(k, _)| k == key).map(|(_, v)| *v);
        let text = |key: &str| argument(key).map_or(Ok(String::new()), |v| self.string_constant(v));
        let name = text("name")?;
        if name.is_empty() {
            return fail(a.node, format!("@{} needs a name", a.name));
        }
        let category = match argument("category") {
            Some(v) => self
                .elements(v)
                .into_iter()
                .map(|c| self.string_constant(c))
                .collect::<Result<Vec<_>>>()?
                .into_iter()
                .filter(|c| !c.is_empty())
                .collect(),
            None => Vec::new(),
        };
        let Some(list) = argument("fields") else {
            return fail(a.node, format!("@{} needs its fields", a.name));
        };
        let mut fields: Vec<EventField> = Vec::new();
        for node in self.elements(list) {
            let field = self.event_field(node)?;
            if fields.iter().any(|f| f.name == field.name) {
                return fail(node, format!("event {name} has two fields {}", field.name));
            }
            fields.push(field);
        }
        Ok(EventType {
            name,
            label: text("label")?,
            description: text("description")?,
            category,
            fields,
        })
    }

    /// `@PeriodicEvent`'s `period`: `"eachChunk"` (the default), `"everyChunk"`,
    /// `"beginChunk"`, `"endChunk"`, or a number and a unit (`"1 s"`, `"500 ms"`).
    pub(super) fn period(&self, a: &Annotation) -> Result<Period> {
        let Some((_, node)) = a.arguments.iter().find(|(k, _)| k == "period") else {
            return Ok(Period::Chunk {
                begin: true,
                end: true,
            });
        };
        let text = self.string_constant(*node)?;
        let chunk = |begin, end| Ok(Period::Chunk { begin, end });
        match text.trim() {
            "eachChunk" | "everyChunk" => return chunk(true, true),
            "beginChunk" => return chunk(true, false),
            "endChunk" => return chunk(false, true),
            _ => {}
        }
        let digits = text.trim().find(|c: char| !c.is_ascii_digit()).unwrap_or(0);
        let (number, unit) = text.trim().split_at(digits);
        let ns_per = match unit.trim() {
            "ns" => 1,
            "us" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "d" => 86_400_000_000_000,
            _ => 0,
        };
        match number.parse::<u64>() {
            Ok(n) if n > 0 && ns_per > 0 => {
                let ms = n.saturating_mul(ns_per).div_ceil(1_000_000);
                Ok(Period::Every(ms))
            }
            _ => fail(*node, format!("period {text:?} is neither a chunk (eachChunk, beginChunk, endChunk) nor a number of ns, us, ms, s, m, h or d above 0")),
        }
    }

    /// The values of an annotation element: those of an array (`{a, b}`), or the value.
    fn elements<'t>(&self, node: Node<'t>) -> Vec<Node<'t>> {
        match node.kind() {
            "element_value_array_initializer" => named_children(node)
                .into_iter()
                .filter(|n| !n.kind().ends_with("comment"))
                .collect(),
            _ => vec![node],
        }
    }

    /// `@Event.Field(type = Event.FieldType.X, name = "...", label, description, kind)`.
    fn event_field(&self, node: Node) -> Result<EventField> {
        if node.kind() != "annotation" {
            return fail(node, "an event's fields are @Event.Field annotations");
        }
        let a = self.annotation(node);
        let argument = |key: &str| a.arguments.iter().find(|(k, _)| k == key).map(|(_, v)| *v);
        let text = |key: &str| argument(key).map_or(Ok(String::new()), |v| self.string_constant(v));
        let (Some(ty), name) = (argument("type"), text("name")?) else {
            return fail(node, "@Event.Field needs a type");
        };
        if name.is_empty() {
            return fail(node, "@Event.Field needs a name");
        }
        let java_type = match self.constant(ty) {
            "BYTE" => "byte",
            "CHAR" => "char",
            "SHORT" => "short",
            "INT" => "int",
            "LONG" => "long",
            "FLOAT" => "float",
            "DOUBLE" => "double",
            "BOOLEAN" => "boolean",
            "STRING" => "java.lang.String",
            "CLASS" | "THREAD" => return fail(ty, format!("Event.FieldType.{} fields are refused: setEventField sets no Class or Thread (BTrace cannot declare them either)", self.constant(ty))),
            other => return fail(ty, format!("Event.FieldType.{other} is not a field type (BYTE, CHAR, SHORT, INT, LONG, FLOAT, DOUBLE, BOOLEAN, STRING)")),
        };
        let content = match argument("kind") {
            Some(kind) => self.content(kind)?,
            None => None,
        };
        Ok(EventField {
            name,
            java_type,
            label: text("label")?,
            description: text("description")?,
            content,
        })
    }

    /// `@Event.Field.Kind(name = Event.FieldKind.X, value = "...")` as the `jdk.jfr`
    /// annotation it stands for, with its value (the JDK's default when none is given).
    fn content(&self, node: Node) -> Result<Option<(String, Option<String>)>> {
        let a = self.annotation(node);
        let argument = |key: &str| a.arguments.iter().find(|(k, _)| k == key).map(|(_, v)| *v);
        let Some(name) = argument("name") else {
            return fail(node, "@Event.Field.Kind needs a name");
        };
        let value = argument("value")
            .map(|v| self.string_constant(v))
            .transpose()?
            .filter(|v| !v.is_empty());
        let (class, default) = match self.constant(name) {
            "NONE" => return Ok(None),
            "TIMESTAMP" => ("Timestamp", Some("MILLISECONDS_SINCE_EPOCH")),
            "TIMESPAN" => ("Timespan", Some("NANOSECONDS")),
            "DATAAMOUNT" => ("DataAmount", Some("BYTES")),
            "FREQUENCY" => ("Frequency", None),
            "MEMORYADDRESS" => ("MemoryAddress", None),
            "PERCENTAGE" => ("Percentage", None),
            "BOOLEANFLAG" => ("BooleanFlag", None),
            "UNSIGNED" => ("Unsigned", None),
            other => return fail(name, format!("Event.FieldKind.{other} is not a field kind (TIMESTAMP, TIMESPAN, DATAAMOUNT, FREQUENCY, MEMORYADDRESS, PERCENTAGE, BOOLEANFLAG, UNSIGNED, NONE)")),
        };
        let value = default.map(|d| value.unwrap_or_else(|| d.to_string()));
        Ok(Some((format!("jdk.jfr.{class}"), value)))
    }

    /// An enum constant's name (`Event.FieldType.INT` is `INT`).
    fn constant(&self, node: Node) -> &str {
        let text = self.text(node);
        text.rsplit('.').next().unwrap_or(text).trim()
    }
}
