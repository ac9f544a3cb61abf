//! Handler annotations to probes: what each parameter receives, sampling, and where the
//! probe fires (`@OnMethod`'s location, `@OnTimer`, `@OnEvent`, …).

use tree_sitter::Node;

use super::{fail, named_children, pos, Annotation, Compiler, Result};
use crate::ast::{Levels, Location, Probe, Role, Sampling, Target, Trigger, Type};

impl Compiler<'_> {
    /// What a handler parameter receives, from its annotation (or its position).
    pub(super) fn role(
        &self,
        p: Node,
        ty: &Type,
        location: Location,
        arg: &mut usize,
    ) -> Result<Role> {
        let annotations = self.annotations(p)?;
        let Some(a) = annotations.first() else {
            let values = location.point_values();
            if !values.is_empty() {
                *arg += 1;
                return match values.get(*arg - 1) {
                    Some(role) => Ok(role.clone()),
                    None => fail(p, "this location passes no more values without an annotation (the line, the class allocated, the array's type and dimensions, the monitor, the value written, an array's index and value, or the type checked)"),
                };
            }
            if matches!(ty, Type::Object(t) if t == "AnyType[]") {
                return Ok(Role::AllArgs);
            }
            if location == Location::Error && is_throwable(ty) {
                return Ok(Role::Thrown);
            }
            *arg += 1;
            return Ok(Role::Arg(*arg - 1));
        };
        let role = match a.name.as_str() {
            "ProbeClassName" => Role::ClassName,
            "ProbeMethodName" => Role::MethodName {
                fqn: a
                    .arguments
                    .iter()
                    .any(|(k, v)| k == "fqn" && self.text(*v) == "true"),
            },
            "Duration" => Role::Duration,
            "Return" => Role::Return,
            "Self" => Role::This,
            "TargetMethodOrField" if location.has_member() => Role::TargetMethod {
                fqn: a
                    .arguments
                    .iter()
                    .any(|(k, v)| k == "fqn" && self.text(*v) == "true"),
            },
            "TargetInstance" if location.has_target() => Role::TargetInstance,
            "TargetMethodOrField" | "TargetInstance" => {
                return fail(
                    a.node,
                    format!("@{} needs location = @Location(value = Kind.CALL, ...) (or Kind.FIELD_GET, Kind.FIELD_SET{})", a.name, if a.name == "TargetInstance" { ", ARRAY_GET, ARRAY_SET, THROW, CATCH, CHECKCAST, INSTANCEOF" } else { "" }),
                )
            }
            other => {
                return fail(
                    a.node,
                    format!("@{other} parameters are not supported (yet): @ProbeClassName, @ProbeMethodName, @Duration, @Return, @Self, @TargetInstance, @TargetMethodOrField and the arguments are"),
                )
            }
        };
        match (&role, location) {
            (Role::Duration | Role::Return, Location::Entry) => fail(
                a.node,
                format!(
                    "@{} needs location = @Location(Kind.RETURN) (or Kind.ERROR, or Kind.CALL with Where.AFTER): a call has no {} at its entry, and BTrace's verifier refuses it there too",
                    a.name,
                    if a.name == "Duration" { "duration" } else { "return value" }
                ),
            ),
            (Role::Return, Location::Field { write: false, after: true })
            | (Role::Return, Location::Array { write: false, after: true })
            | (Role::Return, Location::New { after: true } | Location::NewArray { after: true }) => {
                Ok(role)
            }
            (Role::Return, Location::New { after: false } | Location::NewArray { after: false }) => {
                fail(
                    a.node,
                    "@Return at Kind.NEW and Kind.NEWARRAY needs where = Where.AFTER",
                )
            }
            (Role::Return, Location::Field { write: false, after: false }) => fail(
                a.node,
                "@Return at Kind.FIELD_GET needs where = Where.AFTER",
            ),
            (Role::Return, Location::Array { write: false, after: false }) => fail(
                a.node,
                "@Return at Kind.ARRAY_GET needs where = Where.AFTER",
            ),
            (Role::Duration | Role::Return, location) if location.is_point() => fail(
                a.node,
                format!(
                    "@{} needs location = @Location(Kind.RETURN) (or Kind.ERROR, or Kind.CALL with Where.AFTER)",
                    a.name
                ),
            ),
            (Role::Duration | Role::Return, Location::Call { after: false }) => fail(
                a.node,
                format!("@{} at Kind.CALL needs where = Where.AFTER", a.name),
            ),
            _ => Ok(role),
        }
    }

    /// `@Sampled(kind = Sampled.Sampler.X, mean = N)` (BTrace's defaults: `Const`, 10).
    pub(super) fn sampling(&self, annotations: &[Annotation]) -> Result<Option<Sampling>> {
        let Some(a) = annotations.iter().find(|a| a.name == "Sampled") else {
            return Ok(None);
        };
        let argument = |key: &str| a.arguments.iter().find(|(k, _)| k == key).map(|(_, v)| *v);
        let mean = match argument("mean") {
            Some(v) => self
                .text(v)
                .replace('_', "")
                .parse::<u64>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or((pos(v), "@Sampled takes a mean of 1 or more".to_string()))?,
            None => 10,
        };
        let kind = argument("kind").map_or("Const", |v| {
            let text = self.text(v);
            text.rsplit('.').next().unwrap_or(text)
        });
        match kind {
            "None" => Ok(None),
            "Const" => Ok(Some(Sampling::Every(mean))),
            "Adaptive" => Ok(Some(Sampling::Interval(mean))),
            other => fail(
                a.node,
                format!("@Sampled kind {other} is not None, Const or Adaptive"),
            ),
        }
    }

    /// `@OnMethod(enableAt = @Level("..."))`: `N` or `>=N`, `>N`, `=N`, `<N`, `<=N`.
    pub(super) fn levels(&self, annotations: &[Annotation]) -> Result<Option<Levels>> {
        let enable_at = annotations
            .iter()
            .filter(|a| a.name == "OnMethod")
            .flat_map(|a| &a.arguments)
            .find_map(|(k, v)| (k == "enableAt").then_some(*v));
        let Some(level) = enable_at else {
            return Ok(None);
        };
        let value = level
            .child_by_field_name("arguments")
            .map(named_children)
            .unwrap_or_default()
            .into_iter()
            .map(|arg| arg.child_by_field_name("value").unwrap_or(arg))
            .next();
        let text = match value {
            Some(v) => self.string_constant(v)?,
            None => String::new(),
        };
        let bad = || {
            (pos(level), format!("@Level takes N, =N, >N, >=N, <N or <=N with N a number of 0 or more, not {text:?}"))
        };
        let (op, number) = text
            .trim()
            .find(|c: char| c.is_ascii_digit())
            .map(|at| text.trim().split_at(at))
            .ok_or_else(bad)?;
        let n: i64 = number.parse().map_err(|_| bad())?;
        let (min, max) = match op {
            "" | ">=" => (n, i64::MAX),
            ">" => (n.saturating_add(1), i64::MAX),
            "=" => (n, n),
            "<" => (0, n - 1),
            "<=" => (0, n),
            _ => return Err(bad()),
        };
        Ok(Some(Levels { min, max }))
    }

    /// A handler's trigger, from its annotations; None for plain methods.
    pub(super) fn trigger(&self, annotations: &[Annotation]) -> Result<Option<Trigger>> {
        for a in annotations {
            let argument = |key: &str| a.arguments.iter().find(|(k, _)| k == key).map(|(_, v)| *v);
            match a.name.as_str() {
                "OnMethod" => {
                    let string = |key: &str| -> Result<String> {
                        match argument(key) {
                            Some(v) => self.templated(v),
                            None => Ok(String::new()),
                        }
                    };
                    let class = string("clazz")?;
                    if class.is_empty() {
                        return fail(a.node, "@OnMethod needs clazz");
                    }
                    let method = match string("method")? {
                        m if m.is_empty() => "/.*/".to_string(),
                        m => m,
                    };
                    let (location, target) = match argument("location") {
                        Some(v) => self.location(v)?,
                        None => (Location::Entry, None),
                    };
                    return Ok(Some(Trigger::Probe(Probe {
                        class,
                        method,
                        descriptor: string("type")?,
                        location,
                        target,
                    })));
                }
                "OnTimer" => return self.timer(a).map(Some),
                "OnExit" => return Ok(Some(Trigger::Exit)),
                "OnEvent" => {
                    let name = argument("value").map(|v| self.templated(v)).transpose()?;
                    return Ok(Some(Trigger::Event(name)));
                }
                "OnError" => return Ok(Some(Trigger::Error)),
                "OnLowMemory" => return self.low_memory(a).map(Some),
                "OnCheckPoint" => {
                    return fail(
                        a.node,
                        format!("@{} handlers are not supported yet", a.name),
                    );
                }
                "Sampled" | "Export" | "Property" | "DTrace" | "DTraceRef" => {}
                _ => {}
            }
        }
        Ok(None)
    }

    /// `@OnProbe(namespace = "...", name = "...")`: the probes its descriptor maps it to.
    pub(super) fn on_probe(&self, a: &Annotation) -> Result<Vec<Probe>> {
        let argument = |key: &str| a.arguments.iter().find(|(k, _)| k == key).map(|(_, v)| *v);
        let (Some(namespace), Some(name)) = (argument("namespace"), argument("name")) else {
            return fail(a.node, "@OnProbe needs namespace and name");
        };
        let (namespace, name) = (
            self.string_constant(namespace)?,
            self.string_constant(name)?,
        );
        let failed = |e: String| (pos(a.node), format!("@OnProbe({namespace}, {name}): {e}"));
        let xml = (self.descriptors)(&namespace).map_err(failed)?;
        super::descriptor::probes(&xml, &name).map_err(failed)
    }

    /// `@OnTimer(ms)`, or `@OnTimer(from = "${name}")`: the period script argument `name`
    /// gives (as in BTrace: when it gives no number, `value`'s, by default 1000).
    fn timer(&self, a: &Annotation) -> Result<Trigger> {
        let argument = |key: &str| a.arguments.iter().find(|(k, _)| k == key).map(|(_, v)| *v);
        let value = argument("value")
            .map(|v| {
                self.text(v)
                    .trim_end_matches(['l', 'L'])
                    .replace('_', "")
                    .parse::<u64>()
                    .ok()
                    .filter(|&ms| ms > 0)
                    .ok_or((
                        pos(v),
                        "@OnTimer takes a period in milliseconds, more than 0".to_string(),
                    ))
            })
            .transpose()?;
        if let Some(from) = argument("from") {
            let given = self.templated(from)?.trim().parse::<u64>().ok();
            let period = given.filter(|&ms| ms > 0).or(value).unwrap_or(1000);
            return Ok(Trigger::Timer(period));
        }
        value.map(Trigger::Timer).ok_or((
            pos(a.node),
            "@OnTimer needs its period in milliseconds".to_string(),
        ))
    }

    /// `@OnLowMemory(pool = "...", threshold = N)`.
    fn low_memory(&self, a: &Annotation) -> Result<Trigger> {
        let argument = |key: &str| a.arguments.iter().find(|(k, _)| k == key).map(|(_, v)| *v);
        let (Some(pool), Some(threshold)) = (argument("pool"), argument("threshold")) else {
            return fail(a.node, "@OnLowMemory needs pool and threshold");
        };
        let bytes = self
            .text(threshold)
            .trim_end_matches(['l', 'L'])
            .replace('_', "")
            .parse::<i64>()
            .ok()
            .filter(|&bytes| bytes >= 0)
            .ok_or((
                pos(threshold),
                "@OnLowMemory takes a threshold in bytes, 0 or more".to_string(),
            ))?;
        Ok(Trigger::LowMemory {
            pool: self.templated(pool)?,
            threshold: bytes,
        })
    }

    /// `@Location(Kind.RETURN)`, `@Location(value = Kind.RETURN, ...)`, and for `Kind.CALL`
    /// the called methods (`clazz`, `method`, `type`) and `where`.
    fn location(&self, node: Node) -> Result<(Location, Option<Target>)> {
        let mut kind = None;
        let mut keyed = Vec::new();
        for arg in node
            .child_by_field_name("arguments")
            .map(named_children)
            .unwrap_or_default()
        {
            match arg.kind() {
                "element_value_pair" => {
                    let key = arg.child_by_field_name("key").map(|k| self.text(k));
                    let value = arg.child_by_field_name("value");
                    match (key, value) {
                        (Some("value"), Some(v)) => kind = Some(v),
                        (Some(key), Some(v)) => keyed.push((key, v)),
                        _ => {}
                    }
                }
                k if k.ends_with("comment") => {}
                _ => kind = Some(arg),
            }
        }
        let Some(kind) = kind else {
            return Ok((Location::Entry, None));
        };
        let last = |n: Node| self.text(n).rsplit('.').next().unwrap_or("").to_string();
        let mut target = Target {
            class: "/.*/".into(),
            method: "/.*/".into(),
            descriptor: String::new(),
        };
        let mut after = false;
        let mut line = None;
        for (key, value) in keyed {
            match key {
                "clazz" => target.class = self.templated(value)?,
                "method" | "field" => target.method = self.templated(value)?,
                "type" => target.descriptor = self.templated(value)?,
                "where" => after = last(value) == "AFTER",
                "line" => {
                    let text = self.text(value).replace(' ', "");
                    line = match text.parse::<i64>() {
                        Ok(-1) => None,
                        Ok(n) if n > 0 => u32::try_from(n).ok(),
                        _ => return fail(value, "line takes a line number, or -1 for every line"),
                    };
                }
                _ => {}
            }
        }
        let location = match last(kind).as_str() {
            "ENTRY" => Location::Entry,
            "RETURN" => Location::Return,
            "ERROR" => Location::Error,
            "CALL" => return Ok((Location::Call { after }, Some(target))),
            "NEW" => return Ok((Location::New { after }, Some(target))),
            "NEWARRAY" => return Ok((Location::NewArray { after }, Some(target))),
            "LINE" => Location::Line(line),
            "SYNC_ENTRY" => Location::Sync { exit: false },
            "SYNC_EXIT" => Location::Sync { exit: true },
            access @ ("ARRAY_GET" | "ARRAY_SET") => Location::Array {
                write: access == "ARRAY_SET",
                after,
            },
            "THROW" => Location::Throw,
            "CATCH" => Location::Catch,
            check @ ("CHECKCAST" | "INSTANCEOF") => Location::TypeCheck {
                instance_of: check == "INSTANCEOF",
            },
            access @ ("FIELD_GET" | "FIELD_SET") => {
                // A field's `type` is its own; fields are told apart by class and name.
                let target = Target {
                    descriptor: String::new(),
                    ..target
                };
                let write = access == "FIELD_SET";
                return Ok((Location::Field { write, after }, Some(target)));
            }
            other => {
                return fail(
                    kind,
                    format!("location Kind.{other} is not a BTrace location (ENTRY, RETURN, ERROR, CALL, LINE, NEW, NEWARRAY, SYNC_ENTRY, SYNC_EXIT, FIELD_GET, FIELD_SET, ARRAY_GET, ARRAY_SET, THROW, CATCH, CHECKCAST and INSTANCEOF are)"),
                )
            }
        };
        Ok((location, None))
    }
}

/// Whether a parameter of type `ty` takes an exception (`Throwable`, `Exception`, …).
pub(super) fn is_throwable(ty: &Type) -> bool {
    matches!(ty, Type::Object(t) if t.ends_with("Throwable") || t.ends_with("Exception"))
}
