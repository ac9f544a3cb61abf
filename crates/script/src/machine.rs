//! Runs a script's handlers in the client: static state, `@TLS` state per application
//! thread, locals, and the values a probe captured. Scripts have no loops and no recursion
//! (the compiler refuses them), so every handler ends; a failing handler (a division by zero,
//! a function given the wrong value) reports its error and the script goes on, as BTrace's do:
//! to its `@OnError` handlers if it has some, else as a line for stderr.

use std::collections::HashMap;

use crate::ast::{
    Expr, ExprKind, Literal, Method, Period, Pos, Role, Sampling, Script, Stmt, Trigger,
};
use crate::builtins::{self, Context, Facts};
use crate::firing::Fired;
use crate::operators::{binary, coerce, default_of, element, field_of, instance_of};
use crate::roles::{role_size, role_value};
use crate::value::Value;

/// A running script.
pub struct Machine<'s> {
    script: &'s Script,
    file: String,
    statics: HashMap<String, Value>,
    thread_locals: HashMap<(u32, String), Value>,
    out: String,
    errors: Vec<String>,
    /// Inside `@OnError` handlers: a failure there is not handled again.
    handling_error: bool,
    /// `@Sampled` handlers: calls taken so far, and when the last one handled ended (ns).
    sampling: HashMap<usize, (u64, i64)>,
    exit: Option<i32>,
    /// `setInstrumentationLevel`'s level.
    level: i64,
    /// `Speculation`'s buffers.
    speculations: builtins::Speculations,
    /// `@OnLowMemory` handlers: whether their pool was at its threshold at the last look.
    above_threshold: HashMap<usize, bool>,
    args: Vec<String>,
    facts: Option<Box<dyn Facts + 's>>,
    /// Committed JFR events, when the session records them ([`Machine::record_events`]).
    committed: Option<Vec<builtins::Committed>>,
}

/// Where a handler failed, and why.
type Fault = (Pos, String);

/// How a statement ended.
enum Flow {
    Next,
    Return(Value),
}

/// One handler's run: its locals and the probe it handles.
struct Frame<'p> {
    locals: Vec<(String, Value)>,
    probe: Option<&'p Fired>,
    depth: usize,
    /// A handler's parameters holding objects the probe measured, with their sizes
    /// (`sizeof`).
    sizes: Vec<(String, u64)>,
}

/// Deepest nesting of the script's own method calls (they cannot recurse; this bounds
/// chains of them).
const MAX_DEPTH: usize = 64;

impl<'s> Machine<'s> {
    /// Starts a script: its fields get their initial values and its `static {}` blocks run.
    /// `file` names it in errors; `args` are what `$(n)` reads; `facts` answer `Sys.*`.
    pub fn new(
        script: &'s Script,
        file: &str,
        args: Vec<String>,
        facts: Option<Box<dyn Facts + 's>>,
    ) -> Machine<'s> {
        let mut machine = Machine {
            script,
            file: file.to_string(),
            statics: HashMap::new(),
            thread_locals: HashMap::new(),
            out: String::new(),
            errors: Vec::new(),
            handling_error: false,
            sampling: HashMap::new(),
            exit: None,
            level: 0,
            above_threshold: HashMap::new(),
            speculations: builtins::Speculations::default(),
            args,
            facts,
            committed: None,
        };
        for field in &script.fields {
            let value = match (field.event, &field.init) {
                (Some(event), _) => Value::EventFactory(event),
                (None, Some(init)) => machine
                    .eval(
                        init,
                        &mut Frame {
                            locals: Vec::new(),
                            probe: None,
                            depth: 0,
                            sizes: Vec::new(),
                        },
                    )
                    .unwrap_or_else(|(at, message)| {
                        let file = &machine.file;
                        machine.errors.push(format!(
                            "{file}:{}:{}: {message} (in {})",
                            at.line, at.col, field.name
                        ));
                        Value::Null
                    }),
                (None, None) => default_of(&field.ty),
            };
            machine.statics.insert(field.name.clone(), value);
        }
        let init = &script.static_init;
        machine.run_body(
            init,
            &mut Frame {
                locals: Vec::new(),
                probe: None,
                depth: 0,
                sizes: Vec::new(),
            },
            "static initialiser",
        );
        machine
    }

    /// Runs handler `index` for a probe firing (unless `@Sampled` leaves this call out).
    pub fn fire(&mut self, index: usize, probe: &Fired) {
        if !self.due(index, probe) {
            return;
        }
        let handler = &self.script.handlers[index];
        let (mut locals, mut sizes) = (Vec::new(), Vec::new());
        let mut arg_values = probe
            .values
            .iter()
            .skip(1)
            .map(|v| Value::from_described(v));
        for param in &handler.method.params {
            let value = role_value(&param.role, probe, &mut arg_values);
            if let Some(size) = role_size(&param.role, probe) {
                sizes.push((param.name.clone(), size));
            }
            locals.push((param.name.clone(), coerce(&param.ty, value)));
        }
        let mut frame = Frame {
            locals,
            probe: Some(probe),
            depth: 0,
            sizes,
        };
        let name = handler.method.name.clone();
        self.run_body(&handler.method.body, &mut frame, &name);
    }

    /// Whether handler `index` runs for this firing: always, unless the instrumentation
    /// level is outside its `@Level` or `@Sampled` leaves it out.
    fn due(&mut self, index: usize, probe: &Fired) -> bool {
        let handler = &self.script.handlers[index];
        if let Some(levels) = handler.enabled_at {
            if !(levels.min..=levels.max).contains(&self.level) {
                return false;
            }
        }
        let Some(sampling) = handler.sampled else {
            return true;
        };
        let (calls, last_ns) = self.sampling.entry(index).or_insert((0, i64::MIN));
        *calls += 1;
        let now = probe.start_ns as i64 + probe.duration_ns as i64;
        let due = match sampling {
            Sampling::Every(n) => (*calls - 1) % n == 0,
            Sampling::Interval(ns) => now.saturating_sub(*last_ns) >= ns as i64,
        };
        if due {
            *last_ns = now;
        }
        due
    }

    /// Runs the handlers of a trigger that takes no probe (`@OnTimer` of this period,
    /// `@OnExit`).
    pub fn run(&mut self, index: usize) {
        let handler = &self.script.handlers[index];
        let mut given = Vec::new();
        match &handler.trigger {
            Trigger::LowMemory { pool, threshold } => {
                match self.low_memory(index, pool, *threshold) {
                    Some(usage) => given.push(Value::Object(usage.into())),
                    None => return,
                }
            }
            Trigger::Periodic { event, .. } => {
                given.push(builtins::new_event(&self.script.events, *event))
            }
            _ => {}
        }
        let method = &handler.method;
        let name = method.name.clone();
        let mut given = given.into_iter();
        let locals = method
            .params
            .iter()
            .map(|p| {
                (
                    p.name.clone(),
                    given.next().unwrap_or_else(|| default_of(&p.ty)),
                )
            })
            .collect();
        self.run_body(
            &method.body,
            &mut Frame {
                locals,
                probe: None,
                depth: 0,
                sizes: Vec::new(),
            },
            &name,
        );
    }

    /// For `@OnLowMemory` handler `index`: the pool's usage (as `MemoryUsage` prints it)
    /// when it has risen to `threshold` since the last look, as the JVM's usage threshold
    /// notifies once per crossing.
    fn low_memory(&mut self, index: usize, pool: &str, threshold: i64) -> Option<String> {
        let usage = builtins::pool_usage(self.facts.as_deref()?, pool);
        let above = usage.is_some_and(|u| u.used >= threshold);
        let was_above = self.above_threshold.insert(index, above).unwrap_or(false);
        usage.filter(|_| above && !was_above).map(|u| u.describe())
    }

    /// Runs the `@OnEvent` handlers of an event: named ones for `Some(name)`, unnamed ones
    /// for `None`. Returns how many ran.
    pub fn event(&mut self, name: Option<&str>) -> usize {
        let takers: Vec<usize> = (0..self.script.handlers.len())
            .filter(|&i| match &self.script.handlers[i].trigger {
                Trigger::Event(handled) => handled.as_deref() == name,
                _ => false,
            })
            .collect();
        for &index in &takers {
            self.run(index);
        }
        takers.len()
    }

    /// Ends the script: runs its `@OnExit` handlers (also after `exit()`, as BTrace does).
    pub fn finish(&mut self) {
        let code = self.exit.take();
        for index in 0..self.script.handlers.len() {
            if self.script.handlers[index].trigger == Trigger::Exit {
                self.run(index);
            }
        }
        self.exit = self.exit.or(code);
    }

    /// Runs the `@PeriodicEvent` handlers that run as a recording's chunk begins (`begin`)
    /// or ends.
    pub fn chunk_events(&mut self, begin: bool) {
        for index in 0..self.script.handlers.len() {
            if let Trigger::Periodic {
                period: Period::Chunk { begin: b, end: e },
                ..
            } = self.script.handlers[index].trigger
            {
                if (begin && b) || (!begin && e) {
                    self.run(index);
                }
            }
        }
    }

    /// Keeps committed JFR events for [`Machine::take_events`] instead of printing them.
    pub fn record_events(&mut self) {
        self.committed = Some(Vec::new());
    }

    /// The JFR events committed since the last call, when they are recorded.
    pub fn take_events(&mut self) -> Vec<builtins::Committed> {
        self.committed
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// The `@Export` and `@Property` fields and their values now (a `@TLS` one's own value).
    pub fn exported(&self) -> Vec<(String, String)> {
        self.script
            .fields
            .iter()
            .filter(|f| f.exported)
            .map(|f| {
                let value = self.statics.get(&f.name).cloned().unwrap_or_default();
                (f.name.clone(), value.to_string())
            })
            .collect()
    }

    /// `Counters.perf*("btrace.pkg.Script.field")`: BTrace names an `@Export` field's
    /// counter so; jtap's are the script's own fields.
    fn exported_counter(&self, name: &str, args: &[Value]) -> Option<Value> {
        if !matches!(name, "perfLong" | "perfInt" | "perfString") {
            return None;
        }
        let Some(Value::Str(counter)) = args.first() else {
            return None;
        };
        let (class, field) = counter.strip_prefix("btrace.")?.rsplit_once('.')?;
        let script = class.rsplit('.').next()?;
        let exported = self
            .script
            .fields
            .iter()
            .any(|f| f.exported && f.name == field);
        if script != self.script.name || !exported {
            return None;
        }
        let value = self.statics.get(field).cloned().unwrap_or_default();
        Some(match name {
            "perfString" => Value::str(&value.to_string()),
            _ => value,
        })
    }

    /// Text printed since the last call.
    pub fn take_output(&mut self) -> String {
        std::mem::take(&mut self.out)
    }

    /// Errors of failing handlers since the last call, one line each.
    pub fn take_errors(&mut self) -> Vec<String> {
        std::mem::take(&mut self.errors)
    }

    /// The code `exit()` was called with, once it was.
    pub fn exit_code(&self) -> Option<i32> {
        self.exit
    }

    fn run_body(&mut self, body: &[Stmt], frame: &mut Frame, what: &str) {
        let Err((at, message)) = self.stmts(body, frame) else {
            return;
        };
        let error = format!(
            "{}:{}:{}: {message} (in {what})",
            self.file, at.line, at.col
        );
        let on_error: Vec<usize> = (0..self.script.handlers.len())
            .filter(|&i| self.script.handlers[i].trigger == Trigger::Error)
            .collect();
        // An error in an @OnError handler itself goes to stderr.
        if on_error.is_empty() || self.handling_error {
            self.errors.push(error);
            return;
        }
        // What BTrace's handler would have thrown, as an exception's description.
        let thrown = Value::Object(format!("java.lang.RuntimeException: {error}").into());
        self.handling_error = true;
        for index in on_error {
            let method = &self.script.handlers[index].method;
            let name = method.name.clone();
            let locals = method
                .params
                .iter()
                .map(|p| {
                    let value = match p.role {
                        Role::Thrown => thrown.clone(),
                        _ => default_of(&p.ty),
                    };
                    (p.name.clone(), value)
                })
                .collect();
            let mut frame = Frame {
                locals,
                probe: None,
                depth: 0,
                sizes: Vec::new(),
            };
            self.run_body(&method.body, &mut frame, &name);
        }
        self.handling_error = false;
    }

    fn stmts(&mut self, stmts: &[Stmt], frame: &mut Frame) -> Result<Flow, Fault> {
        let mark = frame.locals.len();
        for s in stmts {
            if self.exit.is_some() {
                break;
            }
            if let Flow::Return(v) = self.stmt(s, frame)? {
                frame.locals.truncate(mark);
                return Ok(Flow::Return(v));
            }
        }
        frame.locals.truncate(mark);
        Ok(Flow::Next)
    }

    fn stmt(&mut self, stmt: &Stmt, frame: &mut Frame) -> Result<Flow, Fault> {
        match stmt {
            Stmt::Local(name, ty, init) => {
                let value = match init {
                    Some(e) => coerce(ty, self.eval(e, frame)?),
                    None => default_of(ty),
                };
                frame.locals.push((name.clone(), value));
            }
            Stmt::Expr(e) => {
                self.eval(e, frame)?;
            }
            Stmt::If(c, then, otherwise) => {
                let branch = if self.eval(c, frame)?.truthy() {
                    then
                } else {
                    otherwise
                };
                return self.stmts(branch, frame);
            }
            Stmt::Return(e) => {
                let value = match e {
                    Some(e) => self.eval(e, frame)?,
                    None => Value::Null,
                };
                return Ok(Flow::Return(value));
            }
            Stmt::Block(b) => return self.stmts(b, frame),
        }
        Ok(Flow::Next)
    }

    fn field(&self, name: &str) -> Option<&crate::ast::Field> {
        self.script.fields.iter().find(|f| f.name == name)
    }

    fn read(&self, name: &str, frame: &Frame) -> Value {
        if let Some((_, v)) = frame.locals.iter().rev().find(|(n, _)| n == name) {
            return v.clone();
        }
        match self.field(name) {
            Some(f) if f.thread_local => {
                let tid = frame.probe.map_or(0, |p| p.tid);
                self.thread_locals
                    .get(&(tid, name.to_string()))
                    .cloned()
                    .unwrap_or_else(|| self.statics.get(name).cloned().unwrap_or_default())
            }
            _ => self.statics.get(name).cloned().unwrap_or_default(),
        }
    }

    fn write(&mut self, name: &str, value: Value, frame: &mut Frame) {
        if let Some((_, v)) = frame.locals.iter_mut().rev().find(|(n, _)| n == name) {
            *v = value;
            return;
        }
        let Some(field) = self.field(name) else {
            return;
        };
        let value = coerce(&field.ty, value);
        if field.thread_local {
            let tid = frame.probe.map_or(0, |p| p.tid);
            self.thread_locals.insert((tid, name.to_string()), value);
        } else {
            self.statics.insert(name.to_string(), value);
        }
    }

    fn eval(&mut self, e: &Expr, frame: &mut Frame) -> Result<Value, Fault> {
        let at = |message: String| (e.at, message);
        Ok(match &e.kind {
            ExprKind::Literal(literal) => match literal {
                Literal::Null => Value::Null,
                Literal::Bool(b) => Value::Bool(*b),
                Literal::Int(n) => Value::Int(*n),
                Literal::Float(x) => Value::Float(*x),
                Literal::Str(s) => Value::str(s),
            },
            ExprKind::Name(n) => self.read(n, frame),
            ExprKind::Constant(c) => Value::Constant(c.as_str().into()),
            ExprKind::Binary(op, a, b) => {
                // && and || short-circuit.
                if op == "&&" || op == "||" {
                    let left = self.eval(a, frame)?.truthy();
                    if (op == "&&") != left {
                        return Ok(Value::Bool(left));
                    }
                    return Ok(Value::Bool(self.eval(b, frame)?.truthy()));
                }
                let (x, y) = (self.eval(a, frame)?, self.eval(b, frame)?);
                binary(op, &x, &y).map_err(at)?
            }
            ExprKind::Unary(op, a) => {
                let x = self.eval(a, frame)?;
                match (op.as_str(), &x) {
                    ("!", Value::Bool(b)) => Value::Bool(!b),
                    ("-", Value::Int(n)) => Value::Int(n.wrapping_neg()),
                    ("-", Value::Float(f)) => Value::Float(-f),
                    ("+", Value::Int(_) | Value::Float(_)) => x,
                    ("~", Value::Int(n)) => Value::Int(!n),
                    _ => return Err(at(format!("{op} does not apply to {x}"))),
                }
            }
            ExprKind::Assign(name, op, value) => {
                let v = self.eval(value, frame)?;
                let v = match op.as_str() {
                    "=" => v,
                    compound => {
                        let old = self.read(name, frame);
                        binary(compound.trim_end_matches('='), &old, &v).map_err(at)?
                    }
                };
                self.write(name, v.clone(), frame);
                v
            }
            ExprKind::Step(name, step, postfix) => {
                let old = self.read(name, frame);
                let new = binary("+", &old, &Value::Int(*step)).map_err(at)?;
                self.write(name, new.clone(), frame);
                if *postfix {
                    old
                } else {
                    new
                }
            }
            ExprKind::Conditional(c, a, b) => {
                if self.eval(c, frame)?.truthy() {
                    self.eval(a, frame)?
                } else {
                    self.eval(b, frame)?
                }
            }
            ExprKind::Cast(ty, a) => coerce(ty, self.eval(a, frame)?),
            ExprKind::InstanceOf(a, ty) => Value::Bool(instance_of(&self.eval(a, frame)?, ty)),
            ExprKind::Index(a, i) => {
                let array = self.eval(a, frame)?;
                let index = self
                    .eval(i, frame)?
                    .as_int()
                    .ok_or_else(|| at("array index is not a number".into()))?;
                element(array, index).map_err(at)?
            }
            ExprKind::FieldOf(object, field) => {
                field_of(&self.eval(object, frame)?, field).map_err(at)?
            }
            ExprKind::Builtin(name, args) => self.builtin(name, args, e, frame)?,
            ExprKind::Own(name, args) => match self.script.methods.iter().find(|m| &m.name == name)
            {
                Some(method) => self.own(method, args, e, frame)?,
                None => self.builtin(name, args, e, frame)?,
            },
        })
    }

    fn builtin(
        &mut self,
        name: &str,
        args: &[Expr],
        call: &Expr,
        frame: &mut Frame,
    ) -> Result<Value, Fault> {
        if name == "sizeof" {
            return self.size_of(args, call, frame);
        }
        let values = args
            .iter()
            .map(|a| self.eval(a, frame))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(value) = self.exported_counter(name, &values) {
            return Ok(value);
        }
        let mut cx = Context {
            probe: frame.probe,
            out: &mut self.out,
            exit: &mut self.exit,
            args: &self.args,
            level: &mut self.level,
            speculations: &mut self.speculations,
            facts: self.facts.as_deref(),
            events: &self.script.events,
            committed: self.committed.as_mut(),
        };
        let printed_from = cx.out.len();
        let value = builtins::call(name, values, &mut cx).map_err(|m| (call.at, m));
        let tid = frame.probe.map_or(0, |p| p.tid);
        self.speculations.divert(tid, &mut self.out, printed_from);
        value
    }

    /// `sizeof(p)`: the size the probe measured of the object parameter `p` holds (the
    /// compiler lets `sizeof` take nothing else).
    fn size_of(&mut self, args: &[Expr], call: &Expr, frame: &mut Frame) -> Result<Value, Fault> {
        let value = match args {
            [arg] => self.eval(arg, frame)?,
            _ => return Err((call.at, "sizeof takes one parameter".into())),
        };
        if matches!(value, Value::Null) {
            return Err((
                call.at,
                "java.lang.NullPointerException: sizeof(null)".into(),
            ));
        }
        let size = match args.first().map(|a| &a.kind) {
            Some(ExprKind::Name(name)) => frame.sizes.iter().find(|(n, _)| n == name),
            _ => None,
        };
        match size {
            Some(&(_, size)) => Ok(Value::Int(size as i64)),
            None => Err((call.at, "the probe did not measure this value".into())),
        }
    }

    fn own(
        &mut self,
        method: &Method,
        args: &[Expr],
        call: &Expr,
        frame: &mut Frame,
    ) -> Result<Value, Fault> {
        if frame.depth >= MAX_DEPTH {
            return Err((call.at, format!("calls nested deeper than {MAX_DEPTH}")));
        }
        if args.len() != method.params.len() {
            return Err((
                call.at,
                format!(
                    "{} takes {} arguments, not {}",
                    method.name,
                    method.params.len(),
                    args.len()
                ),
            ));
        }
        let mut locals = Vec::new();
        for (param, arg) in method.params.iter().zip(args) {
            locals.push((
                param.name.clone(),
                coerce(&param.ty, self.eval(arg, frame)?),
            ));
        }
        let mut inner = Frame {
            locals,
            probe: frame.probe,
            depth: frame.depth + 1,
            sizes: Vec::new(),
        };
        Ok(match self.stmts(&method.body, &mut inner)? {
            Flow::Return(v) => v,
            Flow::Next => Value::Null,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::compile;
    use jtap_protocol::records::Callee;

    fn script(body: &str) -> Script {
        let source = format!(
            "import com.sun.btrace.annotations.*;\nimport static com.sun.btrace.BTraceUtils.*;\n@BTrace public class S {{\n{body}\n}}\n"
        );
        compile(&source, "S.java").unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_issues_tracker_prints_what_btrace_prints() {
        let s = script(
            r##"@OnMethod(clazz = "/me\\.kisimple\\.just4fun\\..*/", method = "/.*/", location = @Location(Kind.RETURN))
    public static void trace(@ProbeClassName String pcn, @ProbeMethodName String pmn, @Duration long duration) {
        if (duration > 3000000000l) {
            print(Strings.strcat("#Duration of ", Strings.strcat(Strings.strcat(pcn, "."), pmn)));
            print(" is "); print(duration); println("#");
            jstack();
        }
    }"##,
        );
        let mut m = Machine::new(&s, "S.java", Vec::new(), None);
        let mut probe = Fired {
            class: "me.kisimple.just4fun.Main".into(),
            method: "bar".into(),
            duration_ns: 5_000_179_210,
            stack: vec![
                "me.kisimple.just4fun.Main.bar(Main.java:17)".into(),
                "me.kisimple.just4fun.Main.main(Main.java:9)".into(),
            ],
            ..Fired::default()
        };
        m.fire(0, &probe);
        assert_eq!(
            m.take_output(),
            "#Duration of me.kisimple.just4fun.Main.bar is 5000179210#\nme.kisimple.just4fun.Main.bar(Main.java:17)\nme.kisimple.just4fun.Main.main(Main.java:9)\n"
        );
        probe.duration_ns = 1_000;
        m.fire(0, &probe);
        assert_eq!(m.take_output(), "", "under the threshold");
    }

    #[test]
    fn call_handlers_see_the_called_method_as_btrace_names_it() {
        let s = script(
            r#"@OnMethod(clazz = "app.App", method = "add", location = @Location(value = Kind.CALL, clazz = "java.lang.String", method = "/to.*Case/", where = Where.AFTER))
    public static void h(@ProbeMethodName(fqn = true) String pmn, @TargetMethodOrField(fqn = true) String fqn, @TargetMethodOrField String name, @Duration long d) {
        println(pmn + " -> " + fqn + " / " + name + " " + d);
    }"#,
        );
        let Trigger::Probe(probe) = &s.handlers[0].trigger else {
            panic!("a probe handler");
        };
        assert_eq!(probe.location, crate::ast::Location::Call { after: true });
        let callee = probe.target.as_ref().expect("CALL names its callees");
        assert_eq!(
            (&*callee.class, &*callee.method),
            ("java.lang.String", "/to.*Case/")
        );
        let mut m = Machine::new(&s, "S.java", Vec::new(), None);
        let fired = |class: &str, method: &str, descriptor: &str, invoke: &str| Fired {
            class: "app.App".into(),
            method: "add".into(),
            duration_ns: 1200,
            callee: Some(Callee {
                class: class.into(),
                method: method.into(),
                descriptor: descriptor.into(),
                invoke: invoke.into(),
            }),
            ..Fired::default()
        };
        m.fire(
            0,
            &fired(
                "java.lang.String",
                "toUpperCase",
                "()Ljava/lang/String;",
                "virtual",
            ),
        );
        m.fire(
            0,
            &fired("app.Db", "query", "(Ljava/lang/String;[[I)V", "static"),
        );
        assert_eq!(
            m.take_output(),
            "app.App.add -> virtual java.lang.String java.lang.String#toUpperCase / toUpperCase 1200\n\
             app.App.add -> static void app.Db#query(java.lang.String, int[][]) / query 1200\n"
        );
    }

    #[test]
    fn reflective_fields_are_read_from_descriptions() {
        let s = script(
            r#"@OnMethod(clazz = "a.B", method = "run")
    public static void h(@Self Object self) {
        println(Reflective.getInt(Reflective.field("a.B", "count"), self) + 1);
        println(get(field(classOf(self), "name"), self));
        println(getLong(field("a.B", "missing"), self));
    }"#,
        );
        let mut m = Machine::new(&s, "S.java", Vec::new(), None);
        let fired = Fired {
            class: "a.B".into(),
            method: "run".into(),
            values: vec!["a.B@1f{count=3, name=\"x, y\"}".into()],
            ..Fired::default()
        };
        m.fire(0, &fired);
        assert_eq!(m.take_output(), "4\nx, y\n");
        let errors = m.take_errors();
        assert!(
            errors.len() == 1 && errors[0].contains("getLong: a.B shows no field missing"),
            "{errors:?}"
        );
    }

    #[test]
    fn profiling_prints_btraces_snapshot_grid() {
        let s = script(
            r#"@Property static Profiler profiler = Profiling.newProfiler();
    @OnMethod(clazz = "a.B", method = "/.*/")
    public static void entry(@ProbeMethodName(fqn = true) String pmn) { Profiling.recordEntry(profiler, pmn); }
    @OnMethod(clazz = "a.B", method = "/.*/", location = @Location(Kind.RETURN))
    public static void exit(@ProbeMethodName(fqn = true) String pmn, @Duration long d) { Profiling.recordExit(profiler, pmn, d); }
    @OnExit public static void done() { Profiling.printSnapshot("Profile", Profiling.snapshotAndReset(profiler)); Profiling.printSnapshot("Again", profiler); }"#,
        );
        let mut m = Machine::new(&s, "S.java", Vec::new(), None);
        let call = |method: &str, start_ns, duration_ns| Fired {
            class: "a.B".into(),
            method: method.into(),
            start_ns,
            duration_ns,
            tid: 7,
            ..Fired::default()
        };
        // inner runs twice inside outer; each call reaches both handlers.
        for fired in [
            call("inner", 110, 20),
            call("inner", 140, 30),
            call("outer", 100, 100),
        ] {
            m.fire(0, &fired);
            m.fire(1, &fired);
        }
        m.finish();
        assert_eq!(
            m.take_output(),
            "Profile\n\
             \x20 Block      Invocations  SelfTime.Total  SelfTime.Avg  SelfTime.Min  SelfTime.Max  WallTime.Total  WallTime.Avg  WallTime.Min  WallTime.Max\n\
             \x20 a.B.inner            2              50            25            20            30              50            25            20            30\n\
             \x20 a.B.outer            1              50            50            50            50             100           100           100           100\n\
             Again\n\
             \x20 Block  Invocations  SelfTime.Total  SelfTime.Avg  SelfTime.Min  SelfTime.Max  WallTime.Total  WallTime.Avg  WallTime.Min  WallTime.Max\n"
        );
    }

    #[test]
    fn state_locals_thread_locals_own_methods_and_arguments() {
        let s = script(
            r#"private static long calls;
    @TLS private static int mine;
    private static Map<String, AtomicInteger> perMethod = Collections.newHashMap();
    static { calls = 100; }
    static String twice(String s) { return s + s; }
    @OnMethod(clazz = "a.B", method = "put")
    public static void h(@ProbeMethodName String pmn, @Self Object self, String key, int n, AnyType[] all) {
        calls++;
        mine += n;
        AtomicInteger c = Collections.get(perMethod, pmn);
        if (c == null) { c = Atomic.newAtomicInteger(0); Collections.put(perMethod, pmn, c); }
        Atomic.incrementAndGet(c);
        long half = n / 2;
        println(twice(key) + " " + half + " " + (n > 3 ? "big" : "small") + " " + all[1] + " " + self);
    }
    @OnExit
    public static void done() { println(calls); println(mine); printNumberMap("calls", perMethod); }"#,
        );
        let mut m = Machine::new(&s, "S.java", Vec::new(), None);
        let probe = |tid, n: i32| Fired {
            class: "a.B".into(),
            method: "put".into(),
            values: vec!["a.B@1f".into(), "\"k\"".into(), n.to_string()],
            tid,
            ..Fired::default()
        };
        m.fire(0, &probe(1, 5));
        m.fire(0, &probe(2, 3));
        m.fire(0, &probe(1, 7));
        assert_eq!(
            m.take_output(),
            "kk 2 big 5 a.B@1f\nkk 1 small 3 a.B@1f\nkk 3 big 7 a.B@1f\n"
        );
        m.finish();
        // @TLS outside a probe is the field's own value (0); calls counted from 100.
        assert_eq!(m.take_output(), "103\n0\ncalls\nput = 3\n");
        assert!(m.take_errors().is_empty());
    }

    #[test]
    fn a_failing_handler_reports_and_the_script_goes_on() {
        let s = script(
            r#"private static int zero;
    @OnTimer(1000) public static void t() { println(1 / zero); }
    @OnTimer(2000) public static void u() { println("still here"); exit(3); println("not printed"); }"#,
        );
        let mut m = Machine::new(&s, "S.java", Vec::new(), None);
        m.run(0);
        assert_eq!(m.take_errors(), ["S.java:5:53: division by zero (in t)"]);
        m.run(1);
        assert_eq!(m.take_output(), "still here\n");
        assert_eq!(m.exit_code(), Some(3));
    }

    #[test]
    fn sampled_handlers_handle_one_call_in_mean() {
        let s = script(
            r#"private static long handled;
    @Sampled(kind = Sampled.Sampler.Const, mean = 4)
    @OnMethod(clazz = "a.B", method = "run", location = @Location(Kind.RETURN))
    public static void h() { handled++; }
    @Sampled(kind = Sampled.Sampler.Adaptive, mean = 1000)
    @OnMethod(clazz = "a.B", method = "run", location = @Location(Kind.RETURN))
    public static void t() { println("at most one per microsecond"); }
    @OnExit public static void done() { println(handled); }"#,
        );
        let mut m = Machine::new(&s, "S.java", Vec::new(), None);
        for start_ns in 0..10u64 {
            let call = Fired {
                start_ns: start_ns * 400,
                ..Fired::default()
            };
            m.fire(0, &call);
            m.fire(1, &call);
        }
        m.finish();
        // Calls 1, 5 and 9 of 10; ends at 0, 1200, 2400, 3600 ns: four a microsecond apart.
        assert_eq!(
            m.take_output(),
            "at most one per microsecond\n".repeat(4) + "3\n"
        );
    }

    #[test]
    fn on_error_handlers_take_the_errors_of_the_others() {
        let s = script(
            r#"private static int zero;
    @OnTimer(1000) public static void t() { println(1 / zero); }
    @OnError public static void failed(Throwable e) { println(strcat("failed: ", str(e))); println(1 / zero); }"#,
        );
        let mut m = Machine::new(&s, "S.java", Vec::new(), None);
        m.run(0);
        assert_eq!(
            m.take_output(),
            "failed: java.lang.RuntimeException: S.java:5:53: division by zero (in t)\n"
        );
        // The @OnError handler's own failure is reported, not handled again.
        assert_eq!(
            m.take_errors(),
            ["S.java:6:100: division by zero (in failed)"]
        );
    }

    #[test]
    fn a_script_that_grows_without_end_fails_its_handler_not_the_client() {
        let s = script(
            r#"private static String s = "x";
    private static Map<String, String> m = Collections.newHashMap();
    @OnTimer(10) public static void grow() { s = s + s; }
    @OnTimer(20) public static void fill() { Collections.put(m, str(Collections.size(m)), s); }"#,
        );
        let mut m = Machine::new(&s, "S.java", Vec::new(), None);
        for _ in 0..25 {
            m.run(0);
            m.run(1);
        }
        // 2^20 bytes is the cap: the 21st doubling fails, and so does every later one.
        let errors = m.take_errors();
        assert_eq!(errors.len(), 5, "{errors:?}");
        assert!(
            errors[0].contains("scripts' strings are capped at 1 MiB"),
            "{errors:?}"
        );
        assert!(m.take_output().is_empty());
    }

    #[test]
    fn sizeof_gives_what_the_probe_measured() {
        let s = script(
            r#"@OnMethod(clazz = "a.B", method = "put", location = @Location(Kind.RETURN))
    public static void h(@Self Object self, String key, int[] data, @Return Object r) {
        println(sizeof(self) + " " + sizeof(key) + " " + sizeof(data) + " " + sizeof(r));
    }"#,
        );
        assert!(s.handlers[0].uses_sizes);
        let mut m = Machine::new(&s, "S.java", Vec::new(), None);
        let fired = Fired {
            class: "a.B".into(),
            method: "put".into(),
            values: vec!["a.B@1f".into(), "\"k\"".into(), "[1, 2, 3]".into()],
            sizes: vec![16, 24, 32],
            returned: Some("a.C@2e".into()),
            returned_size: Some(40),
            ..Fired::default()
        };
        m.fire(0, &fired);
        assert_eq!(m.take_output(), "16 24 32 40\n");
        // A null has no size: Java's NullPointerException, as a failed handler.
        let null_key = Fired {
            values: vec!["a.B@1f".into(), "null".into(), "[1]".into()],
            sizes: vec![16, 0, 24],
            ..fired
        };
        m.fire(0, &null_key);
        assert_eq!(m.take_output(), "");
        assert!(
            m.take_errors()[0].contains("NullPointerException: sizeof(null)"),
            "{:?}",
            m.take_errors()
        );
    }

    #[test]
    fn quantize_prints_a_power_of_two_distribution_as_btrace_does() {
        let s = script(
            r#"private static Aggregation dist = Aggregations.newAggregation(AggregationFunction.QUANTIZE);
    @OnTimer(1000) public static void t() {
        AggregationKey k = Aggregations.newAggregationKey("k");
        Aggregations.addToAggregation(dist, k, 1);
        Aggregations.addToAggregation(dist, k, 2);
        Aggregations.addToAggregation(dist, k, 3);
        Aggregations.addToAggregation(dist, k, 5);
        Aggregations.addToAggregation(dist, k, 8);
        Aggregations.addToAggregation(dist, k, 8);
        Aggregations.printAggregation("Dist", dist);
    }"#,
        );
        let mut m = Machine::new(&s, "S.java", Vec::new(), None);
        m.run(0);
        assert!(m.take_errors().is_empty());
        let bar = |n: usize| format!("{}{}", "@".repeat(n), " ".repeat(40 - n));
        let expected = format!(
            "Dist\n  k  \n\t          value  ------------- Distribution ------------- count\n\
             \t              0 |{} 0\n\t              1 |{} 1\n\t              2 |{} 2\n\
             \t              4 |{} 1\n\t              8 |{} 2\n\t             16 |{} 0\n\n",
            bar(0),
            bar(6),
            bar(13),
            bar(6),
            bar(13),
            bar(0)
        );
        assert_eq!(m.take_output(), expected);
    }

    #[test]
    fn aggregations_count_and_average_per_key() {
        let s = script(
            r#"private static Aggregation avg = Aggregations.newAggregation(AggregationFunction.AVERAGE);
    @OnMethod(clazz = "a.B", method = "run", location = @Location(Kind.RETURN))
    public static void h(@ProbeMethodName String pmn, @Duration long d) {
        Aggregations.addToAggregation(avg, Aggregations.newAggregationKey(pmn), d);
    }
    @OnExit public static void done() { Aggregations.printAggregation("Average", avg); }"#,
        );
        let mut m = Machine::new(&s, "S.java", Vec::new(), None);
        for d in [10, 20, 30] {
            m.fire(
                0,
                &Fired {
                    method: "run".into(),
                    duration_ns: d,
                    ..Fired::default()
                },
            );
        }
        m.run(1);
        assert_eq!(m.take_output(), "Average\n  run  20\n");
    }
}
