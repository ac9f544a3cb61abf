//! `jtap bytecode`: exercise the class-file engine on real classes (round trip, instrumentation,
//! optional JVM verification) and list what it does to a class.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use jtap_classfile::inject::instrument_class;
use jtap_classfile::plan::Registry;
use jtap_classfile::{listing::listing, remap::prefix_classes, ClassFile, InjectionPlan};

/// Probe runtime class named in the instrumented code (it need not exist to verify).
const RUNTIME_CLASS: &str = "jtap/runtime/Probes";

use jtap_classfile::remap::VERIFIER_KNOWN_CLASSES as KEEP;

/// Loads and links every class of a directory (getDeclaredMethods links first), printing
/// VerifyErrors and ClassFormatErrors. Run with the source launcher, so any JDK 11+ works.
const VERIFY_JAVA: &str = r#"
import java.nio.file.*;
import java.util.*;
import java.util.stream.*;
public class JtapVerify {
    static final class DirLoader extends ClassLoader {
        final Path root;
        DirLoader(Path root, ClassLoader parent) { super(parent); this.root = root; }
        @Override protected Class<?> findClass(String name) throws ClassNotFoundException {
            try {
                byte[] b = Files.readAllBytes(root.resolve(name.replace('.', '/') + ".class"));
                return defineClass(name, b, 0, b.length);
            } catch (java.io.IOException e) { throw new ClassNotFoundException(name); }
        }
    }
    public static void main(String[] args) throws Exception {
        Path root = Paths.get(args[0]);
        List<String> names;
        try (Stream<Path> s = Files.walk(root)) {
            names = s.filter(p -> p.toString().endsWith(".class")).map(p -> {
                String r = root.relativize(p).toString();
                return r.substring(0, r.length() - 6).replace('/', '.');
            }).sorted().collect(Collectors.toList());
        }
        DirLoader loader = new DirLoader(root, JtapVerify.class.getClassLoader());
        for (String n : names) {
            try {
                Class.forName(n, false, loader).getDeclaredMethods();
            } catch (VerifyError e) {
                System.out.println("VERIFY\t" + n + "\t" + String.valueOf(e.getMessage()).replace('\n', ' ').replace('\t', ' '));
            } catch (ClassFormatError e) {
                System.out.println("FORMAT\t" + n + "\t" + String.valueOf(e.getMessage()).replace('\n', ' ').replace('\t', ' '));
            } catch (Throwable e) {
                System.out.println("OTHER\t" + n + "\t" + e.toString().replace('\n', ' '));
            }
        }
    }
}
"#;

/// `jtap bytecode` subcommands.
#[derive(clap::Subcommand)]
pub enum BytecodeCommand {
    /// Round-trip and fully instrument every class (entry, return, exception exit, call sites,
    /// allocations, monitors, fields, lines); with --verify, load the results in a JVM
    #[command(
        after_help = "Exits with 1 when any class failed to round-trip or instrument, or when an \
                            instrumented class fails verification that its original passes."
    )]
    Check {
        /// Class files, jars, directories of either, or Java homes (their lib/modules)
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// Load every rewritten class with this `java` (JDK 11+) with verification on
        #[arg(long, value_name = "PATH-TO-java")]
        verify: Option<PathBuf>,
    },
    /// Print a javap -c-like listing of a class file
    Dump {
        /// The class file
        class: PathBuf,
        /// List the class after full instrumentation instead
        #[arg(long)]
        instrumented: bool,
    },
}

/// Runs a `jtap bytecode` subcommand; returns the exit code.
pub fn run(cmd: BytecodeCommand) -> Result<i32> {
    match cmd {
        BytecodeCommand::Check { inputs, verify } => check(&inputs, verify.as_deref()),
        BytecodeCommand::Dump {
            class,
            instrumented,
        } => {
            let bytes = fs::read(&class).with_context(|| format!("reading {}", class.display()))?;
            let bytes = if instrumented {
                let out = instrument_class(
                    &bytes,
                    &InjectionPlan::everything(RUNTIME_CLASS),
                    &mut Registry::default(),
                )?;
                for (m, e) in &out.refused {
                    eprintln!("refused {m}: {e}");
                }
                out.bytes
            } else {
                bytes
            };
            print!("{}", listing(&ClassFile::parse(&bytes)?)?);
            Ok(0)
        }
    }
}

/// Every class of the inputs as (name, bytes); `_tmp` keeps jimage extractions alive.
fn collect(inputs: &[PathBuf], tmp: &Path) -> Result<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    for (k, input) in inputs.iter().enumerate() {
        if input.join("lib/modules").is_file() {
            let dir = tmp.join(format!("jimage-{k}"));
            let st = Command::new(input.join("bin/jimage"))
                .arg("extract")
                .arg("--dir")
                .arg(&dir)
                .arg(input.join("lib/modules"))
                .status()
                .context("running jimage")?;
            if !st.success() {
                bail!("jimage extract failed for {}", input.display());
            }
            walk(&dir, &dir, true, &mut out)?;
        } else if input.is_dir() {
            walk(input, input, false, &mut out)?;
        } else {
            read_file(input, Path::new(""), &mut out)?;
        }
    }
    Ok(out)
}

fn walk(root: &Path, dir: &Path, modules: bool, out: &mut Vec<(String, Vec<u8>)>) -> Result<()> {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(root, &p, modules, out)?;
        } else {
            let rel = p.strip_prefix(root).unwrap_or(&p);
            // jimage output is <module>/<package path>; drop the module directory.
            let rel: PathBuf = if modules {
                rel.components().skip(1).collect()
            } else {
                rel.to_path_buf()
            };
            read_file(&p, &rel, out)?;
        }
    }
    Ok(())
}

fn read_file(p: &Path, rel: &Path, out: &mut Vec<(String, Vec<u8>)>) -> Result<()> {
    let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
    match ext {
        "class" => {
            let name = if rel.as_os_str().is_empty() {
                p.file_name().unwrap_or_default().into()
            } else {
                rel.to_path_buf()
            };
            out.push((name.to_string_lossy().into_owned(), fs::read(p)?));
        }
        "jar" | "zip" => {
            let mut z = zip::ZipArchive::new(fs::File::open(p)?)
                .with_context(|| format!("reading {}", p.display()))?;
            for i in 0..z.len() {
                let mut e = z.by_index(i)?;
                let name = e.name().to_string();
                if name.ends_with(".class") && !name.starts_with("META-INF/") {
                    let mut v = Vec::with_capacity(e.size() as usize);
                    e.read_to_end(&mut v)?;
                    out.push((name, v));
                }
            }
        }
        _ => {}
    }
    Ok(())
}

fn check(inputs: &[PathBuf], verify: Option<&Path>) -> Result<i32> {
    let tmp = tempfile::tempdir()?;
    let classes = collect(inputs, tmp.path())?;
    let plan = InjectionPlan::everything(RUNTIME_CLASS);
    let mut registry = Registry::default();
    let (mut methods, mut identical, mut instrumented) = (0usize, 0usize, 0usize);
    let mut refused: BTreeMap<String, usize> = BTreeMap::new();
    let mut failed: Vec<String> = Vec::new();
    let mut rewritten: Vec<(String, Vec<u8>, Vec<u8>)> = Vec::new();
    for (name, bytes) in &classes {
        let cf = match ClassFile::parse(bytes) {
            Ok(cf) => cf,
            Err(e) => {
                failed.push(format!("{name}: {e}"));
                continue;
            }
        };
        methods += cf.methods.len();
        if cf.write() == *bytes {
            identical += 1;
        } else {
            failed.push(format!("{name}: round trip not identical"));
        }
        match instrument_class(bytes, &plan, &mut registry) {
            Ok(out) => {
                instrumented += out.methods_instrumented;
                for (m, e) in &out.refused {
                    *refused.entry(e.to_string()).or_default() += 1;
                    if verify.is_some() {
                        eprintln!("refused {name} {m}: {e}");
                    }
                }
                rewritten.push((name.clone(), bytes.clone(), out.bytes));
            }
            Err(e) => failed.push(format!("{name}: {e}")),
        }
    }
    println!("classes:               {}", classes.len());
    println!("methods:               {methods}");
    println!("identical round trips: {identical}");
    println!("methods instrumented:  {instrumented}");
    println!("methods refused:       {}", refused.values().sum::<usize>());
    for (reason, n) in &refused {
        println!("  {n:>7}  {reason}");
    }
    println!("failed:                {}", failed.len());
    for f in failed.iter().take(50) {
        println!("  {f}");
    }
    let mut bad = !failed.is_empty();
    if let Some(java) = verify {
        bad |= verify_in_jvm(java, &rewritten, tmp.path())? > 0;
    }
    Ok(i32::from(bad))
}

/// Loads originals and rewritten classes; returns the number of classes that fail verification
/// only after rewriting.
fn verify_in_jvm(java: &Path, classes: &[(String, Vec<u8>, Vec<u8>)], tmp: &Path) -> Result<usize> {
    let names: HashSet<Vec<u8>> = classes
        .iter()
        .filter_map(|(_, b, _)| ClassFile::parse(b).ok()?.name().ok().map(<[u8]>::to_vec))
        .filter(|n| !KEEP.iter().any(|k| k.as_bytes() == &n[..]))
        .collect();
    let (orig_dir, inst_dir) = (tmp.join("original"), tmp.join("instrumented"));
    let mut skipped = 0;
    for (name, orig, inst) in classes {
        let Ok(cf) = ClassFile::parse(orig) else {
            continue;
        };
        let Ok(cname) = cf.name() else { continue };
        if !names.contains(cname) {
            skipped += 1;
            continue;
        }
        let rel = format!("jvfy/{}.class", String::from_utf8_lossy(cname));
        for (dir, bytes) in [(&orig_dir, orig), (&inst_dir, inst)] {
            let p = dir.join(&rel);
            fs::create_dir_all(p.parent().unwrap_or(dir))?;
            fs::write(
                &p,
                prefix_classes(bytes, &names, "jvfy/")
                    .with_context(|| format!("renaming {name}"))?,
            )?;
        }
    }
    let src = tmp.join("JtapVerify.java");
    fs::write(&src, VERIFY_JAVA)?;
    let run = |dir: &Path| -> Result<Vec<(String, String, String)>> {
        let out = Command::new(java)
            .arg("-Xshare:off")
            .arg(&src)
            .arg(dir)
            .output()
            .with_context(|| format!("running {}", java.display()))?;
        if !out.status.success() {
            bail!(
                "verification harness failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let mut p = l.splitn(3, '\t');
                Some((
                    p.next()?.to_string(),
                    p.next()?.to_string(),
                    p.next().unwrap_or("").to_string(),
                ))
            })
            .collect())
    };
    let before = run(&orig_dir)?;
    let after = run(&inst_dir)?;
    let failing: HashSet<&str> = before
        .iter()
        .filter(|e| e.0 != "OTHER")
        .map(|e| e.1.as_str())
        .collect();
    let count = |v: &[(String, String, String)], k: &str| v.iter().filter(|e| e.0 == k).count();
    println!(
        "verified in {}: {} classes ({skipped} core classes cannot be verified by renaming)",
        java.display(),
        names.len()
    );
    println!(
        "  original:     {} VerifyError, {} ClassFormatError, {} other linkage errors",
        count(&before, "VERIFY"),
        count(&before, "FORMAT"),
        count(&before, "OTHER")
    );
    println!(
        "  instrumented: {} VerifyError, {} ClassFormatError, {} other linkage errors",
        count(&after, "VERIFY"),
        count(&after, "FORMAT"),
        count(&after, "OTHER")
    );
    let new: Vec<_> = after
        .iter()
        .filter(|e| e.0 != "OTHER" && !failing.contains(e.1.as_str()))
        .collect();
    println!("  new failures: {}", new.len());
    for (kind, class, msg) in &new {
        let method = msg
            .split("Location:")
            .nth(1)
            .and_then(|s| s.split(" @").next())
            .map(str::trim)
            .unwrap_or("?");
        let class = class.strip_prefix("jvfy.").unwrap_or(class);
        let kind = if kind == "VERIFY" {
            "VerifyError"
        } else {
            "ClassFormatError"
        };
        println!("  {kind} {class} {method}: {}", &msg[..msg.len().min(400)]);
    }
    Ok(new.len())
}
