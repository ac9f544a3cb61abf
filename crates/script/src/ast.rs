//! A compiled script: its state, its handlers and what triggers them, and the statements and
//! expressions of their bodies.

/// A checked script, ready to run.
#[derive(Debug, Clone)]
pub struct Script {
    /// The class's simple name.
    pub name: String,
    /// Static fields (the script's state), in declaration order.
    pub fields: Vec<Field>,
    /// Statements of `static {}` blocks, run once before any handler.
    pub static_init: Vec<Stmt>,
    /// Methods that handle events.
    pub handlers: Vec<Handler>,
    /// The script's other methods, which handlers may call.
    pub methods: Vec<Method>,
    /// What jtap accepts but does differently from BTrace, to tell the user once.
    pub notes: Vec<String>,
    /// The JFR event types it declares (`@Event` fields, `@PeriodicEvent` handlers).
    pub events: Vec<EventType>,
}

/// A JFR event type a script declares, as BTrace's `@Event` and `@PeriodicEvent` do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventType {
    /// `name`.
    pub name: String,
    /// `label`, or empty.
    pub label: String,
    /// `description`, or empty.
    pub description: String,
    /// `category`, outermost first.
    pub category: Vec<String>,
    /// `fields`, in their order.
    pub fields: Vec<EventField>,
}

/// A field of an [`EventType`] (`@Event.Field`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventField {
    /// `name`.
    pub name: String,
    /// `type`, as a Java type: `byte` … `double`, `boolean`, `java.lang.String`.
    pub java_type: &'static str,
    /// `label`, or empty.
    pub label: String,
    /// `description`, or empty.
    pub description: String,
    /// `kind`: the `jdk.jfr` annotation saying what the value is (`jdk.jfr.Timespan`), and
    /// its value (`NANOSECONDS`) when it takes one.
    pub content: Option<(String, Option<String>)>,
}

/// When a `@PeriodicEvent` handler runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    /// Every this many milliseconds (`period = "1 s"`).
    Every(u64),
    /// As a recording's chunk begins (`beginChunk`), ends (`endChunk`), or both
    /// (`everyChunk`, BTrace's default `eachChunk`): jtap's recording is one chunk, from the
    /// script's start to its end.
    Chunk {
        /// At the start.
        begin: bool,
        /// At the end.
        end: bool,
    },
}

/// A static field.
#[derive(Debug, Clone)]
pub struct Field {
    /// Its name.
    pub name: String,
    /// Its declared type.
    pub ty: Type,
    /// Its initial value.
    pub init: Option<Expr>,
    /// `@TLS`: one value per application thread.
    pub thread_local: bool,
    /// `@Export` or `@Property`: shown by `jtap status` while the script runs.
    pub exported: bool,
    /// `@Event`: the field is the factory of this [`Script::events`] type.
    pub event: Option<usize>,
}

/// A method of the script.
#[derive(Debug, Clone)]
pub struct Method {
    /// Its name.
    pub name: String,
    /// Its parameters.
    pub params: Vec<Param>,
    /// Its body.
    pub body: Vec<Stmt>,
    /// Where it is declared (`line:col`), for errors at run time.
    pub at: Pos,
}

/// A parameter and what a probe passes in it.
#[derive(Debug, Clone)]
pub struct Param {
    /// Its name.
    pub name: String,
    /// Its declared type.
    pub ty: Type,
    /// What it receives.
    pub role: Role,
}

/// What a handler parameter receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// `@ProbeClassName`: the probed method's class.
    ClassName,
    /// `@ProbeMethodName`: the probed method's name (`fqn`: `Class.method`).
    MethodName {
        /// `@ProbeMethodName(fqn = true)`.
        fqn: bool,
    },
    /// `@Duration`: nanoseconds the call took.
    Duration,
    /// `@Return`: the value returned.
    Return,
    /// `@Self`: `this` (of the caller, at `Kind.CALL`).
    This,
    /// `@TargetMethodOrField`: at `Kind.CALL`, the called method's name (`fqn`: BTrace's
    /// `virtual void pkg.Class#method(int)`); at `Kind.FIELD_GET`/`FIELD_SET`, the field's
    /// (`fqn`: `pkg.Class.field`).
    TargetMethod {
        /// `@TargetMethodOrField(fqn = true)`.
        fqn: bool,
    },
    /// `@TargetInstance`: at `Kind.CALL`, the receiver of the called method (`null` for
    /// static calls and constructors); at `Kind.FIELD_GET`/`FIELD_SET`, the object whose
    /// field it is (`null` for static fields).
    TargetInstance,
    /// At `Kind.FIELD_SET`: the value written.
    FieldValue,
    /// An argument of the probed method, by position (at `Kind.CALL`, of the called method).
    Arg(usize),
    /// `AnyType[]`: all the arguments (at `Kind.CALL`, the called method's).
    AllArgs,
    /// The exception thrown (a `Throwable` parameter at `Kind.ERROR`).
    Thrown,
    /// At `Kind.LINE`: the line number.
    Line,
    /// At `Kind.NEW`: the class allocated (`pkg.Class`).
    NewClass,
    /// At `Kind.NEWARRAY`: the array's element type (`int`, `pkg.Class`).
    ArrayType,
    /// At `Kind.NEWARRAY`: the array's dimensions.
    ArrayDimensions,
    /// At `Kind.SYNC_ENTRY`/`SYNC_EXIT`: the monitor.
    Lock,
    /// At `Kind.ARRAY_GET`/`ARRAY_SET`: the index (0) or the value written (1).
    Operand(usize),
    /// At `Kind.CHECKCAST`/`INSTANCEOF`: the type cast to or tested (`pkg.Class`).
    CheckedType,
    /// A parameter of a method that is not a handler.
    Plain,
}

/// A handler: a method and what triggers it.
#[derive(Debug, Clone)]
pub struct Handler {
    /// What triggers it.
    pub trigger: Trigger,
    /// The method run.
    pub method: Method,
    /// It calls `jstack()`: its probe captures stacks.
    pub uses_stack: bool,
    /// It calls `sizeof`: its probe measures the objects it captures.
    pub uses_sizes: bool,
    /// `@Sampled`: which of the calls it takes it handles.
    pub sampled: Option<Sampling>,
    /// `@OnMethod(enableAt = @Level(...))`: the instrumentation levels it runs at.
    pub enabled_at: Option<Levels>,
}

/// The instrumentation levels (`setInstrumentationLevel`) a handler runs at, both ends
/// included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Levels {
    /// The lowest.
    pub min: i64,
    /// The highest.
    pub max: i64,
}

/// `@Sampled(kind, mean)`: a handler that handles some of its calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampling {
    /// `Sampler.Const`: one call in `n`.
    Every(u64),
    /// `Sampler.Adaptive`: at most one call in this many nanoseconds.
    Interval(u64),
}

impl Handler {
    /// The shortest call the handler can act on, in nanoseconds, when its body is locals and
    /// one `if` (no `else`) whose condition requires its `@Duration` parameter to exceed a
    /// constant (`d > N`, `d >= N`, also inside `&&`, and on both sides of `||`): shorter
    /// calls do nothing, so the agent need not report them.
    pub fn duration_floor(&self) -> Option<u64> {
        let duration = &self
            .method
            .params
            .iter()
            .find(|p| p.role == Role::Duration)?
            .name;
        let mut body = self
            .method
            .body
            .iter()
            .skip_while(|s| matches!(s, Stmt::Local(..)));
        let (Some(Stmt::If(condition, _, otherwise)), None) = (body.next(), body.next()) else {
            return None;
        };
        if !otherwise.is_empty() {
            return None;
        }
        floor(condition, duration)
    }
}

/// The least duration a condition requires of the variable `duration`.
fn floor(condition: &Expr, duration: &str) -> Option<u64> {
    let ExprKind::Binary(op, left, right) = &condition.kind else {
        return None;
    };
    match op.as_str() {
        "&&" => match (floor(left, duration), floor(right, duration)) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        },
        "||" => Some(floor(left, duration)?.min(floor(right, duration)?)),
        ">" | ">=" => {
            let (ExprKind::Name(name), ExprKind::Literal(Literal::Int(n))) =
                (&left.kind, &right.kind)
            else {
                return None;
            };
            let n = u64::try_from(*n).ok()?;
            (name == duration).then_some(if op == ">" { n + 1 } else { n })
        }
        _ => None,
    }
}

/// What triggers a handler.
#[derive(Debug, Clone, PartialEq)]
pub enum Trigger {
    /// `@OnMethod`.
    Probe(Probe),
    /// `@OnTimer(ms)`.
    Timer(u64),
    /// `@OnExit`: the script ends (`exit()`, Ctrl-C, the session's end).
    Exit,
    /// `@OnEvent` (None) or `@OnEvent("name")`: `jtap btrace event <pid> [name]` sent it.
    Event(Option<String>),
    /// `@OnError`: another handler failed (its `Throwable` parameter receives the error).
    Error,
    /// `@OnLowMemory(pool, threshold)`: the pool's usage rose to the threshold (bytes); its
    /// parameter receives the pool's `MemoryUsage`.
    LowMemory {
        /// The pool, as its `MemoryPoolMXBean` is named (`G1 Old Gen`, `Tenured Gen`).
        pool: String,
        /// Bytes used.
        threshold: i64,
    },
    /// `@PeriodicEvent`: its parameter receives a new event of [`Script::events`] type
    /// `event`, to fill and commit.
    Periodic {
        /// The event type.
        event: usize,
        /// When it runs.
        period: Period,
    },
}

/// Which methods an `@OnMethod` handler probes, and where.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    /// `clazz`: a class name, `/regex/` or `+Supertype`.
    pub class: String,
    /// `method`: a name or `/regex/`.
    pub method: String,
    /// `type`: a method descriptor, or empty.
    pub descriptor: String,
    /// `location`.
    pub location: Location,
    /// What the `@Location` names with its `clazz`, `method` and `type`: at `Kind.CALL` the
    /// called methods, at `Kind.NEW` the classes allocated and at `Kind.NEWARRAY` the
    /// arrays' element types (`method` unused).
    pub target: Option<Target>,
}

impl Probe {
    /// The first `${name}` its patterns still hold: no script argument gave `name`, and the
    /// probe (as in BTrace, where the pattern then names no class or method) probes nothing.
    pub fn unresolved(&self) -> Option<&str> {
        let target = self
            .target
            .iter()
            .flat_map(|t| [&t.class, &t.method, &t.descriptor]);
        [&self.class, &self.method, &self.descriptor]
            .into_iter()
            .chain(target)
            .find_map(|text| crate::arguments::unresolved(text))
    }
}

/// Methods or classes a `@Location` names.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// `clazz`: a class name or `/regex/`.
    pub class: String,
    /// `method`: a name or `/regex/`.
    pub method: String,
    /// `type`: a method descriptor, or empty.
    pub descriptor: String,
}

/// Where in a probed method the handler runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// `Kind.ENTRY` (the default).
    Entry,
    /// `Kind.RETURN`.
    Return,
    /// `Kind.ERROR`: the method ends by throwing.
    Error,
    /// `Kind.CALL`: calls the probed method makes (to the [`Probe::target`] methods), before
    /// (`Where.BEFORE`, the default) or after them (`Where.AFTER`).
    Call {
        /// `where = Where.AFTER`.
        after: bool,
    },
    /// `Kind.LINE`: a source line reached (`line = N`), or every line (`line = -1`).
    Line(Option<u32>),
    /// `Kind.NEW`: an object of a [`Probe::target`] class allocated (and constructed).
    New {
        /// `where = Where.AFTER`: handlers may take the object as `@Return`.
        after: bool,
    },
    /// `Kind.NEWARRAY`: an array of a [`Probe::target`] element type allocated.
    NewArray {
        /// `where = Where.AFTER`: handlers may take the array as `@Return`.
        after: bool,
    },
    /// `Kind.SYNC_ENTRY` (false) or `Kind.SYNC_EXIT` (true): a `synchronized` block entered
    /// or left.
    Sync {
        /// `Kind.SYNC_EXIT`.
        exit: bool,
    },
    /// `Kind.FIELD_GET` (false) or `Kind.FIELD_SET` (true): a read or write of a
    /// [`Probe::target`] field (`clazz`, `field`). A read is reported once it is done, so
    /// `Where.AFTER` (which passes the value read as `@Return`) and `Where.BEFORE` differ only
    /// in that; a write is reported before it is done.
    Field {
        /// `Kind.FIELD_SET`.
        write: bool,
        /// `where = Where.AFTER`.
        after: bool,
    },
    /// `Kind.ARRAY_GET` (false) or `Kind.ARRAY_SET` (true): an array element read or
    /// written. A read is reported once it is done (`Where.AFTER` passes the element as
    /// `@Return`), a write before it is done.
    Array {
        /// `Kind.ARRAY_SET`.
        write: bool,
        /// `where = Where.AFTER`.
        after: bool,
    },
    /// `Kind.THROW`: an exception about to be thrown by `throw`.
    Throw,
    /// `Kind.CATCH`: an exception caught by a typed `catch`.
    Catch,
    /// `Kind.CHECKCAST` (false) or `Kind.INSTANCEOF` (true): an object about to be checked.
    TypeCheck {
        /// `Kind.INSTANCEOF`.
        instance_of: bool,
    },
}

impl Location {
    /// The values the first parameters without an annotation receive at this location, in
    /// order.
    pub fn point_values(self) -> &'static [Role] {
        match self {
            Location::Line(_) => &[Role::Line],
            Location::New { .. } => &[Role::NewClass],
            Location::NewArray { .. } => &[Role::ArrayType, Role::ArrayDimensions],
            Location::Sync { .. } => &[Role::Lock],
            Location::Field { write: true, .. } => &[Role::FieldValue],
            Location::Array { write: false, .. } => &[Role::Operand(0)],
            Location::Array { write: true, .. } => &[Role::Operand(0), Role::Operand(1)],
            Location::TypeCheck { .. } => &[Role::CheckedType],
            _ => &[],
        }
    }

    /// Whether `@TargetInstance` means something here: a call or a field access (and
    /// `@TargetMethodOrField` there), an array access, a throw, a catch or a type check.
    pub fn has_target(self) -> bool {
        self.has_member() || self.is_instruction()
    }

    /// Whether `@TargetMethodOrField` means something here: a call or a field access.
    pub fn has_member(self) -> bool {
        matches!(self, Location::Call { .. } | Location::Field { .. })
    }

    /// Whether handlers here take instructions of a kind: array accesses, throws, catches
    /// or type checks.
    pub fn is_instruction(self) -> bool {
        matches!(
            self,
            Location::Array { .. } | Location::Throw | Location::Catch | Location::TypeCheck { .. }
        )
    }

    /// Whether handlers at this location take the points a method reaches, not its calls.
    pub fn is_point(self) -> bool {
        !self.point_values().is_empty()
            || matches!(self, Location::Field { .. })
            || self.is_instruction()
    }
}

/// A declared type, as far as running the script needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Type {
    /// `boolean`.
    Boolean,
    /// `byte`, `short`, `char`, `int`, `long`.
    Integral(&'static str),
    /// `float`, `double`.
    Floating(&'static str),
    /// `String`.
    String,
    /// Any other class or array type, by its name as written.
    Object(String),
}

/// A literal's value (the AST holds no run-time objects, so a compiled script can be shared
/// between threads).
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// `null`.
    Null,
    /// `true`, `false`.
    Bool(bool),
    /// An integer or character literal.
    Int(i64),
    /// A floating-point literal.
    Float(f64),
    /// A string literal.
    Str(String),
}

/// A position in the script: 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    /// Line.
    pub line: usize,
    /// Column.
    pub col: usize,
}

/// A statement.
#[derive(Debug, Clone)]
pub enum Stmt {
    /// `T x = e;` (several declarators give several).
    Local(String, Type, Option<Expr>),
    /// `e;`
    Expr(Expr),
    /// `if (c) a else b`.
    If(Expr, Vec<Stmt>, Vec<Stmt>),
    /// `return e;`
    Return(Option<Expr>),
    /// `{ ... }`
    Block(Vec<Stmt>),
}

/// An expression, with where it starts.
#[derive(Debug, Clone)]
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Where.
    pub at: Pos,
}

/// What an expression is.
#[derive(Debug, Clone)]
pub enum ExprKind {
    /// A literal.
    Literal(Literal),
    /// A local, parameter or static field.
    Name(String),
    /// An enum constant or class literal the runtime knows (`AggregationFunction.COUNT`).
    Constant(String),
    /// `a op b`.
    Binary(String, Box<Expr>, Box<Expr>),
    /// `op a` (`!`, `-`, `+`, `~`).
    Unary(String, Box<Expr>),
    /// `x op= e` (`=` included): the variable, the operator (`=`, `+=`, …), the value.
    Assign(String, String, Box<Expr>),
    /// `++x`, `x--`, …: the variable, +1 or -1, whether the old value is the result.
    Step(String, i64, bool),
    /// `c ? a : b`.
    Conditional(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `(T) e`.
    Cast(Type, Box<Expr>),
    /// `e instanceof T`.
    InstanceOf(Box<Expr>, String),
    /// `a[i]`.
    Index(Box<Expr>, Box<Expr>),
    /// `o.f`: a field of an application object, read from the agent's description of it
    /// (no getter runs).
    FieldOf(Box<Expr>, String),
    /// A `BTraceUtils` function (by its unqualified name).
    Builtin(String, Vec<Expr>),
    /// One of the script's own methods.
    Own(String, Vec<Expr>),
}
