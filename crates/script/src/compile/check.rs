//! The checks that need the whole script or a whole method: names resolve, own methods
//! exist and are not recursive, writes go to fields or locals, what `sizeof` measures, and
//! whether a handler takes stacks.

use std::collections::{HashMap, HashSet};

use super::Result;
use crate::ast::{Expr, ExprKind, Method, Role, Script, Stmt};
use crate::builtins;

/// Whether statements call `jstack` or `probeLine` (the probe then captures stacks).
pub(super) fn calls_stack(body: &[Stmt]) -> bool {
    calls_any(body, &["jstack", "jstackStr", "probeLine"])
}

/// Whether statements call one of `functions`.
pub(super) fn calls_any(body: &[Stmt], functions: &[&str]) -> bool {
    let mut found = false;
    visit_stmts(body, &mut |e| {
        if let ExprKind::Builtin(name, _) | ExprKind::Own(name, _) = &e.kind {
            found |= functions.contains(&name.as_str());
        }
    });
    found
}

/// Whether `method` calls `sizeof`, and checks that each call measures a parameter of a
/// handler that holds one of the probed method's objects (`@Self`, an argument, `@Return`,
/// `@TargetInstance`): the agent measures those as it captures them, and nothing else.
pub(super) fn measures(method: &Method, handler: bool) -> Result<bool> {
    let mut found = Ok(false);
    visit_stmts(&method.body, &mut |e| {
        let (ExprKind::Builtin(name, args) | ExprKind::Own(name, args)) = &e.kind else {
            return;
        };
        if name != "sizeof" || found.is_err() {
            return;
        }
        let measured = match args.as_slice() {
            [Expr {
                kind: ExprKind::Name(arg),
                ..
            }] => method.params.iter().any(|p| {
                &p.name == arg
                    && matches!(
                        p.role,
                        Role::This | Role::Arg(_) | Role::Return | Role::TargetInstance
                    )
            }),
            _ => false,
        };
        found = match measured && handler {
            true => Ok(true),
            false => Err((
                e.at,
                "sizeof measures a handler's parameter holding one of the probed method's objects (@Self, an argument, @Return or @TargetInstance)".into(),
            )),
        };
    });
    found
}

fn visit_stmts(stmts: &[Stmt], f: &mut dyn FnMut(&Expr)) {
    for s in stmts {
        match s {
            Stmt::Local(_, _, e) | Stmt::Return(e) => {
                if let Some(e) = e {
                    visit_expr(e, f);
                }
            }
            Stmt::Expr(e) => visit_expr(e, f),
            Stmt::If(c, a, b) => {
                visit_expr(c, f);
                visit_stmts(a, f);
                visit_stmts(b, f);
            }
            Stmt::Block(b) => visit_stmts(b, f),
        }
    }
}

fn visit_expr(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    f(e);
    match &e.kind {
        ExprKind::Binary(_, a, b) | ExprKind::Index(a, b) => {
            visit_expr(a, f);
            visit_expr(b, f);
        }
        ExprKind::Unary(_, a)
        | ExprKind::Assign(_, _, a)
        | ExprKind::Cast(_, a)
        | ExprKind::InstanceOf(a, _)
        | ExprKind::FieldOf(a, _) => visit_expr(a, f),
        ExprKind::Conditional(a, b, c) => {
            visit_expr(a, f);
            visit_expr(b, f);
            visit_expr(c, f);
        }
        ExprKind::Builtin(_, args) | ExprKind::Own(_, args) => {
            args.iter().for_each(|a| visit_expr(a, f))
        }
        ExprKind::Literal(_) | ExprKind::Name(_) | ExprKind::Constant(_) | ExprKind::Step(..) => {}
    }
}

/// The checks that need the whole script: names resolve, own methods exist and are not
/// recursive, writes go to fields or locals.
pub(super) struct Checker<'a> {
    script: &'a Script,
    fields: HashSet<&'a str>,
    methods: HashMap<&'a str, &'a Method>,
}

impl<'a> Checker<'a> {
    pub(super) fn new(script: &'a Script) -> Checker<'a> {
        Checker {
            script,
            fields: script.fields.iter().map(|f| f.name.as_str()).collect(),
            methods: script
                .methods
                .iter()
                .map(|m| (m.name.as_str(), m))
                .collect(),
        }
    }

    pub(super) fn check(&self) -> Result<()> {
        let field_inits: Vec<Stmt> = self
            .script
            .fields
            .iter()
            .filter_map(|f| f.init.clone().map(Stmt::Expr))
            .collect();
        self.body(&field_inits, &[])?;
        self.body(&self.script.static_init, &[])?;
        for method in self
            .script
            .handlers
            .iter()
            .map(|h| &h.method)
            .chain(&self.script.methods)
        {
            let params: Vec<&str> = method.params.iter().map(|p| p.name.as_str()).collect();
            self.body(&method.body, &params)?;
        }
        for method in &self.script.methods {
            self.no_cycle(method, &mut Vec::new())?;
        }
        Ok(())
    }

    fn body(&self, stmts: &[Stmt], params: &[&str]) -> Result<()> {
        let mut scope: Vec<String> = params.iter().map(|p| p.to_string()).collect();
        self.stmts(stmts, &mut scope)
    }

    fn stmts(&self, stmts: &[Stmt], scope: &mut Vec<String>) -> Result<()> {
        let mark = scope.len();
        for s in stmts {
            match s {
                Stmt::Local(name, _, init) => {
                    if let Some(e) = init {
                        self.expr(e, scope)?;
                    }
                    scope.push(name.clone());
                }
                Stmt::Expr(e) => self.expr(e, scope)?,
                Stmt::Return(e) => {
                    if let Some(e) = e {
                        self.expr(e, scope)?;
                    }
                }
                Stmt::If(c, a, b) => {
                    self.expr(c, scope)?;
                    self.stmts(a, scope)?;
                    self.stmts(b, scope)?;
                }
                Stmt::Block(b) => self.stmts(b, scope)?,
            }
        }
        scope.truncate(mark);
        Ok(())
    }

    fn known(&self, name: &str, scope: &[String]) -> bool {
        scope.iter().any(|s| s == name) || self.fields.contains(name)
    }

    fn expr(&self, e: &Expr, scope: &[String]) -> Result<()> {
        let mut problem = None;
        visit_expr(e, &mut |e| {
            if problem.is_some() {
                return;
            }
            problem = match &e.kind {
                ExprKind::Name(n) | ExprKind::Assign(n, _, _) | ExprKind::Step(n, _, _)
                    if !self.known(n, scope) =>
                {
                    Some((e.at, format!("cannot find symbol: {n}")))
                }
                ExprKind::Own(name, _) if !self.methods.contains_key(name.as_str()) => {
                    if let Some(why) = builtins::refusal(None, name) {
                        Some((e.at, format!("{name} is refused: {why}")))
                    } else if builtins::exists(name) {
                        None
                    } else {
                        Some((e.at, format!("{name} is neither a BTraceUtils function jtap knows nor a method of the script (calls to application methods are not allowed)")))
                    }
                }
                _ => None,
            };
        });
        problem.map_or(Ok(()), Err)
    }

    /// Fails when `method` calls itself, directly or through others.
    fn no_cycle(&self, method: &'a Method, path: &mut Vec<&'a str>) -> Result<()> {
        if path.contains(&method.name.as_str()) {
            return Err((
                method.at,
                format!("recursion is not allowed: {} calls itself", method.name),
            ));
        }
        path.push(&method.name);
        let mut callees = Vec::new();
        visit_stmts(&method.body, &mut |e| {
            if let ExprKind::Own(name, _) = &e.kind {
                if let Some(m) = self.methods.get(name.as_str()) {
                    callees.push(*m);
                }
            }
        });
        for callee in callees {
            self.no_cycle(callee, path)?;
        }
        path.pop();
        Ok(())
    }
}
