//! A `javap -c`-like text listing of a class's methods.

use std::fmt::Write;

use crate::class_file::ClassFile;
use crate::code::CodeAttribute;
use crate::constant_pool::{Constant, ConstantPool};
use crate::error::Result;
use crate::instruction::{decode, mnemonic, Operand};
use crate::stackmap::{self, VType};
use crate::typeflow::initial_locals;

fn constant_text(cp: &ConstantPool, index: u16) -> String {
    let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match cp.get(index) {
        Ok(Constant::Class(_)) => format!(
            "class {}",
            cp.class_name(index).map(lossy).unwrap_or_default()
        ),
        Ok(Constant::String(s)) => format!(
            "String {:?}",
            cp.utf8_str(s).map(|c| c.into_owned()).unwrap_or_default()
        ),
        Ok(Constant::Integer(v)) => format!("int {v}"),
        Ok(Constant::Float(v)) => format!("float {}", f32::from_bits(v)),
        Ok(Constant::Long(v)) => format!("long {v}"),
        Ok(Constant::Double(v)) => format!("double {}", f64::from_bits(v)),
        Ok(
            c @ (Constant::Fieldref(..)
            | Constant::Methodref(..)
            | Constant::InterfaceMethodref(..)),
        ) => {
            let kind = match c {
                Constant::Fieldref(..) => "Field",
                Constant::Methodref(..) => "Method",
                _ => "InterfaceMethod",
            };
            match cp.member_ref(index) {
                Ok(r) => format!(
                    "{kind} {}.{}:{}",
                    lossy(r.owner),
                    lossy(r.name),
                    lossy(r.descriptor)
                ),
                Err(e) => format!("<{e}>"),
            }
        }
        Ok(Constant::InvokeDynamic(bsm, nt)) | Ok(Constant::Dynamic(bsm, nt)) => {
            match cp.name_and_type(nt) {
                Ok((n, d)) => format!("InvokeDynamic #{bsm}:{}:{}", lossy(n), lossy(d)),
                Err(e) => format!("<{e}>"),
            }
        }
        Ok(other) => format!("{other:?}"),
        Err(e) => format!("<{e}>"),
    }
}

fn vtype_text(cp: &ConstantPool, t: VType) -> String {
    match t {
        VType::Object(c) => cp
            .class_name(c)
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_else(|e| e.to_string()),
        VType::Uninitialized(o) => format!("uninitialized({o})"),
        other => format!("{other:?}").to_lowercase(),
    }
}

/// Lists every method's code: instructions with resolved constants, exception table and frames.
pub fn listing(cf: &ClassFile) -> Result<String> {
    let mut cp = cf.constant_pool.clone();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "class {} (version {}.{})",
        String::from_utf8_lossy(cf.name()?),
        cf.major_version,
        cf.minor_version
    );
    for m in &cf.methods {
        let name = cp.utf8_str(m.name_index)?.into_owned();
        let desc = cp.utf8_str(m.descriptor_index)?.into_owned();
        let _ = writeln!(out, "\n{name}{desc}  flags {:#06x}", m.access_flags);
        let Some(a) = m.attributes.iter().find(|a| cf.attribute_is(a, b"Code")) else {
            continue;
        };
        let code = CodeAttribute::parse(&a.info)?;
        let _ = writeln!(
            out,
            "  Code: stack={} locals={} length={}",
            code.max_stack,
            code.max_locals,
            code.code.len()
        );
        for insn in decode(&code.code)? {
            let operand = match &insn.operand {
                Operand::None => String::new(),
                Operand::Local(_) if matches!(insn.opcode, 0x1a..=0x2d | 0x3b..=0x4e) => {
                    String::new()
                }
                Operand::Local(i) => i.to_string(),
                Operand::Iinc { index, delta } => format!("{index}, {delta}"),
                Operand::Int(v) => v.to_string(),
                Operand::Cp(c) => format!("#{c}  // {}", constant_text(&cp, *c)),
                Operand::MultiANewArray(c, d) => {
                    format!("#{c}, {d}  // {}", constant_text(&cp, *c))
                }
                Operand::NewArray(t) => format!("type {t}"),
                Operand::Branch(t) => t.to_string(),
                Operand::TableSwitch {
                    default,
                    low,
                    targets,
                } => {
                    let cases: Vec<String> = targets
                        .iter()
                        .enumerate()
                        .map(|(k, t)| format!("{}: {t}", *low as i64 + k as i64))
                        .collect();
                    format!("{{ {}; default: {default} }}", cases.join(", "))
                }
                Operand::LookupSwitch { default, pairs } => {
                    let cases: Vec<String> =
                        pairs.iter().map(|(k, t)| format!("{k}: {t}")).collect();
                    format!("{{ {}; default: {default} }}", cases.join(", "))
                }
            };
            let wide = if insn.wide { "wide " } else { "" };
            let line = format!(
                "  {:>5}: {wide}{} {operand}",
                insn.offset,
                mnemonic(insn.opcode)
            );
            let _ = writeln!(out, "{}", line.trim_end());
        }
        if !code.exception_table.is_empty() {
            let _ = writeln!(out, "  Exception table:");
            for e in &code.exception_table {
                let t = if e.catch_type == 0 {
                    "any".into()
                } else {
                    constant_text(&cp, e.catch_type)
                };
                let _ = writeln!(
                    out,
                    "    {:>5} {:>5} {:>5}  {t}",
                    e.start_pc, e.end_pc, e.handler_pc
                );
            }
        }
        for attr in &code.attributes {
            if !cf.attribute_is(attr, b"StackMapTable") {
                continue;
            }
            let is_static = m.access_flags & crate::class_file::ACC_STATIC != 0;
            let init = initial_locals(
                &mut cp,
                cf.this_class,
                is_static,
                name == "<init>",
                desc.as_bytes(),
                code.max_locals,
            )?;
            let _ = writeln!(out, "  StackMapTable:");
            for f in stackmap::decode(&attr.info, &init)? {
                let l: Vec<String> = stackmap::to_entries(&f.locals)
                    .into_iter()
                    .map(|t| vtype_text(&cp, t))
                    .collect();
                let s: Vec<String> = stackmap::to_entries(&f.stack)
                    .into_iter()
                    .map(|t| vtype_text(&cp, t))
                    .collect();
                let _ = writeln!(
                    out,
                    "    {:>5}: locals [{}] stack [{}]",
                    f.offset,
                    l.join(", "),
                    s.join(", ")
                );
            }
        }
    }
    Ok(out)
}
