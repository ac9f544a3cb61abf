//! Property test: randomly generated methods (branches, loops, dense and sparse switches,
//! nested try/catch/finally, synchronized blocks, throws, long arithmetic, and sometimes
//! more than 32 KiB of code so that branches must be widened) are compiled with javac,
//! instrumented with every probe kind, and must verify and print exactly what they printed.

mod common;

use std::fmt::Write;
use std::fs;
use std::process::Command;

use jtap_classfile::code::CodeAttribute;
use jtap_classfile::instruction::{decode, op};
use jtap_classfile::{ClassFile, InjectionPlan};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Expr {
    Var(u8),
    Lit(i16),
    Add(Box<Expr>, Box<Expr>),
    Mul(Box<Expr>, Box<Expr>),
    Xor(Box<Expr>, Box<Expr>),
    Call(Box<Expr>),
    Cond(Box<Cond>, Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone)]
struct Cond(Expr, u8, Expr);

#[derive(Debug, Clone)]
enum Stmt {
    Assign(u8, Expr),
    If(Cond, Vec<Stmt>, Vec<Stmt>),
    Loop(u8, Vec<Stmt>),
    Switch(Expr, bool, Vec<Vec<Stmt>>),
    Try(Vec<Stmt>, Vec<Stmt>, bool),
    Throw(Cond),
    Sync(Vec<Stmt>),
    Long(u8, Expr),
    Array(u8),
}

fn expr() -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![
        (0u8..4).prop_map(Expr::Var),
        any::<i16>().prop_map(Expr::Lit)
    ];
    leaf.prop_recursive(3, 12, 2, |e| {
        prop_oneof![
            (e.clone(), e.clone()).prop_map(|(a, b)| Expr::Add(Box::new(a), Box::new(b))),
            (e.clone(), e.clone()).prop_map(|(a, b)| Expr::Mul(Box::new(a), Box::new(b))),
            (e.clone(), e.clone()).prop_map(|(a, b)| Expr::Xor(Box::new(a), Box::new(b))),
            e.clone().prop_map(|a| Expr::Call(Box::new(a))),
            (e.clone(), 0u8..6, e.clone(), e.clone(), e).prop_map(|(a, op, b, t, f)| Expr::Cond(
                Box::new(Cond(a, op, b)),
                Box::new(t),
                Box::new(f)
            )),
        ]
    })
}

fn cond() -> impl Strategy<Value = Cond> {
    (expr(), 0u8..6, expr()).prop_map(|(a, op, b)| Cond(a, op, b))
}

fn stmt() -> impl Strategy<Value = Stmt> {
    let leaf = prop_oneof![
        (0u8..4, expr()).prop_map(|(v, e)| Stmt::Assign(v, e)),
        cond().prop_map(Stmt::Throw),
        (0u8..4, expr()).prop_map(|(v, e)| Stmt::Long(v, e)),
        (0u8..4).prop_map(Stmt::Array),
    ];
    leaf.prop_recursive(4, 40, 4, |s| {
        let block = prop::collection::vec(s, 1..4);
        prop_oneof![
            (cond(), block.clone(), block.clone()).prop_map(|(c, t, f)| Stmt::If(c, t, f)),
            (1u8..4, block.clone()).prop_map(|(n, b)| Stmt::Loop(n, b)),
            (
                expr(),
                any::<bool>(),
                prop::collection::vec(block.clone(), 1..6)
            )
                .prop_map(|(e, d, c)| Stmt::Switch(e, d, c)),
            (block.clone(), block.clone(), any::<bool>()).prop_map(|(t, c, f)| Stmt::Try(t, c, f)),
            block.prop_map(Stmt::Sync),
        ]
    })
}

fn render_expr(e: &Expr, out: &mut String) {
    match e {
        Expr::Var(v) => write!(out, "v{v}").unwrap(),
        Expr::Lit(n) => write!(out, "({n})").unwrap(),
        Expr::Add(a, b) | Expr::Mul(a, b) | Expr::Xor(a, b) => {
            let op = match e {
                Expr::Add(..) => "+",
                Expr::Mul(..) => "*",
                _ => "^",
            };
            out.push('(');
            render_expr(a, out);
            write!(out, " {op} ").unwrap();
            render_expr(b, out);
            out.push(')');
        }
        Expr::Call(a) => {
            out.push_str("h(");
            render_expr(a, out);
            out.push(')');
        }
        Expr::Cond(c, t, f) => {
            out.push('(');
            render_cond(c, out);
            out.push_str(" ? ");
            render_expr(t, out);
            out.push_str(" : ");
            render_expr(f, out);
            out.push(')');
        }
    }
}

fn render_cond(c: &Cond, out: &mut String) {
    let op = ["<", "<=", ">", ">=", "==", "!="][c.1 as usize % 6];
    render_expr(&c.0, out);
    write!(out, " {op} ").unwrap();
    render_expr(&c.2, out);
}

fn render_block(b: &[Stmt], depth: usize, out: &mut String) {
    for s in b {
        render_stmt(s, depth, out);
    }
}

fn render_stmt(s: &Stmt, depth: usize, out: &mut String) {
    let pad = "    ".repeat(depth + 2);
    match s {
        Stmt::Assign(v, e) => {
            write!(out, "{pad}v{v} = ").unwrap();
            render_expr(e, out);
            out.push_str(";\n");
        }
        Stmt::If(c, t, f) => {
            write!(out, "{pad}if (").unwrap();
            render_cond(c, out);
            out.push_str(") {\n");
            render_block(t, depth + 1, out);
            writeln!(out, "{pad}}} else {{").unwrap();
            render_block(f, depth + 1, out);
            writeln!(out, "{pad}}}").unwrap();
        }
        Stmt::Loop(n, b) => {
            writeln!(
                out,
                "{pad}for (int i{depth} = 0; i{depth} < {n}; i{depth}++) {{"
            )
            .unwrap();
            render_block(b, depth + 1, out);
            writeln!(out, "{pad}    v{} += i{depth};", depth % 4).unwrap();
            writeln!(out, "{pad}}}").unwrap();
        }
        Stmt::Switch(e, dense, cases) => {
            write!(out, "{pad}switch ((").unwrap();
            render_expr(e, out);
            writeln!(out, ") & 7) {{").unwrap();
            for (k, c) in cases.iter().enumerate() {
                let label = if *dense {
                    k as i64
                } else {
                    k as i64 * 1000 - 2000
                };
                writeln!(out, "{pad}case {label}: {{").unwrap();
                render_block(c, depth + 1, out);
                writeln!(out, "{pad}    {}", if k % 2 == 0 { "break;" } else { "" }).unwrap();
                writeln!(out, "{pad}}}").unwrap();
            }
            writeln!(out, "{pad}default: v3 ^= 77;").unwrap();
            writeln!(out, "{pad}}}").unwrap();
        }
        Stmt::Try(t, c, fin) => {
            writeln!(out, "{pad}try {{").unwrap();
            render_block(t, depth + 1, out);
            writeln!(out, "{pad}}} catch (IllegalStateException e{depth}) {{").unwrap();
            writeln!(out, "{pad}    v1 += e{depth}.getMessage().length();").unwrap();
            render_block(c, depth + 1, out);
            if *fin {
                writeln!(out, "{pad}}} finally {{ v2 ^= 5; acc += v2;").unwrap();
            }
            writeln!(out, "{pad}}}").unwrap();
        }
        Stmt::Throw(c) => {
            write!(out, "{pad}if (").unwrap();
            render_cond(c, out);
            writeln!(out, ") throw new IllegalStateException(\"t\" + v0);").unwrap();
        }
        Stmt::Sync(b) => {
            writeln!(out, "{pad}synchronized (LOCK) {{").unwrap();
            render_block(b, depth + 1, out);
            writeln!(out, "{pad}}}").unwrap();
        }
        Stmt::Long(v, e) => {
            write!(out, "{pad}acc = acc * 31L + (long) ").unwrap();
            render_expr(e, out);
            writeln!(out, " + v{v};").unwrap();
        }
        Stmt::Array(v) => {
            writeln!(out, "{pad}{{ int[] arr = new int[(v{v} & 3) + 1]; arr[0] = v{v}; Object[] o = {{ arr }}; v{v} = arr[0] + o.length; }}").unwrap();
        }
    }
}

/// A straight run of `lines` assignments (about 9 bytes each), inside a branch so that the
/// branch spans it.
fn big_block(lines: usize, out: &mut String) {
    out.push_str("        if (v0 != 12345) {\n");
    for k in 0..lines {
        writeln!(
            out,
            "            v{} = v{} * 31 + {};",
            k % 4,
            (k + 1) % 4,
            k % 1000
        )
        .unwrap();
    }
    out.push_str("        } else { v1 = 7; }\n");
}

fn render_class(name: &str, methods: &[(Vec<Stmt>, usize)]) -> String {
    let mut out = String::new();
    writeln!(out, "public class {name} {{").unwrap();
    out.push_str("    static final Object LOCK = new Object();\n    static long acc;\n");
    out.push_str("    static int h(int x) { return x * 7 + 3; }\n");
    for (k, (body, big)) in methods.iter().enumerate() {
        writeln!(out, "    static int m{k}(int a, int b) {{").unwrap();
        out.push_str("        int v0 = a, v1 = b, v2 = a ^ b, v3 = 1;\n");
        if *big > 0 {
            big_block(*big, &mut out);
        }
        render_block(body, 0, &mut out);
        out.push_str("        return v0 + v1 * 3 + v2 * 5 + v3 * 7 + (int) acc;\n    }\n");
    }
    out.push_str("    public static void main(String[] args) {\n");
    out.push_str("        int[][] inputs = { {0, 0}, {1, 2}, {-5, 7}, {100, -3}, {12345, 1} };\n");
    for k in 0..methods.len() {
        writeln!(out, "        for (int[] in : inputs) {{ acc = 0; try {{ System.out.println(\"m{k} \" + m{k}(in[0], in[1]) + \" \" + acc); }} catch (RuntimeException e) {{ System.out.println(\"m{k} threw \" + e); }} }}").unwrap();
    }
    out.push_str("    }\n}\n");
    out
}

/// Rewrites a class as a version-49 class file without StackMapTables, as compilers before
/// Java 6 produced them (verified by the old type-inferencing verifier).
fn downgrade(bytes: &[u8]) -> Vec<u8> {
    let mut cf = ClassFile::parse(bytes).unwrap();
    cf.major_version = 49;
    let cp = cf.constant_pool.clone();
    for m in &mut cf.methods {
        for a in &mut m.attributes {
            if cp.utf8(a.name_index).unwrap() == b"Code" {
                let mut code = CodeAttribute::parse(&a.info).unwrap();
                code.attributes
                    .retain(|x| cp.utf8(x.name_index).unwrap() != b"StackMapTable");
                a.info = code.write();
            }
        }
    }
    cf.write()
}

/// Compiles, runs, instruments, runs again; returns whether any method was widened (goto_w).
fn check_program(name: &str, source: &str) -> bool {
    check_program_as(name, source, false)
}

fn check_program_as(name: &str, source: &str, old: bool) -> bool {
    let tmp = tempfile::tempdir().unwrap();
    let (src, orig, inst) = (
        tmp.path().join("src"),
        tmp.path().join("orig"),
        tmp.path().join("inst"),
    );
    for d in [&src, &orig, &inst] {
        fs::create_dir_all(d).unwrap();
    }
    let file = src.join(format!("{name}.java"));
    fs::write(&file, source).unwrap();
    let st = Command::new(format!("{}/bin/javac", common::JDK17))
        .args([
            "-nowarn",
            "-Xlint:-options",
            "-g",
            "--release",
            if old { "7" } else { "11" },
            "-d",
        ])
        .arg(&orig)
        .arg(&file)
        .output()
        .unwrap();
    if old {
        for p in common::class_files(&orig) {
            let b = downgrade(&fs::read(&p).unwrap());
            fs::write(&p, b).unwrap();
        }
    }
    if !st.status.success() {
        // javac refuses some generated programs (e.g. a method over 64 KiB); nothing to test.
        let err = String::from_utf8_lossy(&st.stderr);
        assert!(
            err.contains("code too large"),
            "javac failed:\n{err}\n{source}"
        );
        return false;
    }
    let harness = common::harness();
    let (expected, _, _) =
        common::run_java(&format!("{}:{}", orig.display(), harness.display()), name);
    // A generated method just past 32 KiB can outgrow 64 KiB with every probe kind (a probe
    // per line start); it is then refused and left unchanged, which must still verify and
    // behave.
    common::instrument_dir_allowing(
        &orig,
        &inst,
        &InjectionPlan::everything(common::PROBES),
        |reason| matches!(reason, jtap_classfile::Error::TooLarge(_)),
    );
    let (actual, calls, _) =
        common::run_java(&format!("{}:{}", inst.display(), harness.display()), name);
    assert_eq!(expected, actual, "behaviour changed for\n{source}");
    assert!(calls > 0);
    let cf = ClassFile::parse(&fs::read(inst.join(format!("{name}.class"))).unwrap()).unwrap();
    cf.methods.iter().any(|m| {
        m.attributes.iter().any(|a| {
            cf.attribute_is(a, b"Code")
                && decode(&CodeAttribute::parse(&a.info).unwrap().code)
                    .unwrap()
                    .iter()
                    .any(|i| i.opcode == op::GOTO_W)
        })
    })
}

#[test]
fn branches_past_32k_are_widened() {
    let mut body = String::new();
    big_block(3200, &mut body);
    let methods = vec![(
        vec![Stmt::Loop(
            3,
            vec![Stmt::Assign(
                1,
                Expr::Add(Box::new(Expr::Var(1)), Box::new(Expr::Lit(3))),
            )],
        )],
        3200,
    )];
    assert!(
        check_program("Big", &render_class("Big", &methods)),
        "expected goto_w after instrumentation"
    );
}

#[test]
fn old_class_files_without_frames() {
    use Expr::*;
    let body = vec![
        Stmt::Try(
            vec![
                Stmt::Throw(crate::Cond(Var(0), 2, Lit(50))),
                Stmt::Sync(vec![Stmt::Long(1, Var(2))]),
            ],
            vec![Stmt::Switch(
                Var(1),
                true,
                vec![
                    vec![Stmt::Array(2)],
                    vec![Stmt::Assign(3, Call(Box::new(Var(0))))],
                ],
            )],
            true,
        ),
        Stmt::Loop(
            3,
            vec![Stmt::If(
                crate::Cond(Var(3), 4, Lit(1)),
                vec![Stmt::Assign(0, Lit(9))],
                vec![Stmt::Array(1)],
            )],
        ),
    ];
    let methods = vec![(body, 0), (vec![Stmt::Assign(2, Lit(1))], 3000)];
    check_program_as("Old", &render_class("Old", &methods), true);
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(10),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn generated_methods_verify_and_behave(
        methods in prop::collection::vec((prop::collection::vec(stmt(), 1..6), prop_oneof![4 => Just(0usize), 1 => 2500usize..3300]), 1..5)
    ) {
        check_program("Gen", &render_class("Gen", &methods));
    }
}
