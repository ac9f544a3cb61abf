//! Instrumenting a whole class: each method a probe of the plan selects is rewritten.

use super::{instrument_method, Refs};
use crate::class_file::ClassFile;
use crate::constant_pool::Constant;
use crate::error::{Error, Result};
use crate::plan::{InjectionPlan, Probe, Registry};

/// The result of instrumenting one class.
#[derive(Clone, Debug)]
pub struct Instrumented {
    /// The rewritten class (identical to the input when nothing matched).
    pub bytes: Vec<u8>,
    /// Number of methods rewritten.
    pub methods_instrumented: usize,
    /// Methods left unchanged because they could not be rewritten: (`name+descriptor`, reason).
    pub refused: Vec<(String, Error)>,
}

/// Applies `plan` to one class file.
///
/// Methods that cannot be rewritten are left as they were and listed in
/// [`Instrumented::refused`]; only a class that cannot be parsed is an error.
pub fn instrument_class(
    data: &[u8],
    plan: &InjectionPlan,
    registry: &mut Registry,
) -> Result<Instrumented> {
    let mut cf = ClassFile::parse(data)?;
    let class_name = cf
        .constant_pool
        .utf8_str(cf.constant_pool.get(cf.this_class).and_then(|c| match c {
            Constant::Class(n) => Ok(n),
            _ => Err(Error::BadConstant {
                index: cf.this_class,
                expected: "Class",
            }),
        })?)?
        .into_owned();
    let mut result = Instrumented {
        bytes: Vec::new(),
        methods_instrumented: 0,
        refused: Vec::new(),
    };
    if class_name == plan.runtime_class {
        result.bytes = data.to_vec();
        return Ok(result);
    }
    let mut refs = Refs::new(plan.probes.len());
    for mi in 0..cf.methods.len() {
        let (name, desc) = {
            let m = &cf.methods[mi];
            (
                cf.constant_pool.utf8_str(m.name_index)?.into_owned(),
                cf.constant_pool.utf8_str(m.descriptor_index)?.into_owned(),
            )
        };
        let probes: Vec<(usize, &Probe)> = plan
            .probes
            .iter()
            .enumerate()
            .filter(|(_, p)| p.methods.matches(&class_name, &name, &desc))
            .collect();
        if probes.is_empty() {
            continue;
        }
        match instrument_method(
            &mut cf,
            mi,
            &class_name,
            &name,
            &desc,
            plan,
            &probes,
            &mut refs,
            registry,
        ) {
            Ok(true) => result.methods_instrumented += 1,
            Ok(false) => {}
            Err(e) => result.refused.push((format!("{name}{desc}"), e)),
        }
    }
    result.bytes = if result.methods_instrumented == 0 {
        data.to_vec()
    } else {
        cf.write()
    };
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version-49 class `A` with `static void m()` using a jsr/ret subroutine.
    fn jsr_class() -> Vec<u8> {
        let mut v = vec![0xCA, 0xFE, 0xBA, 0xBE, 0, 0, 0, 49, 0, 6];
        v.extend_from_slice(
            b"\x01\x00\x01A\x07\x00\x01\x01\x00\x01m\x01\x00\x03()V\x01\x00\x04Code",
        );
        v.extend_from_slice(&[0, 0x21, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1]);
        v.extend_from_slice(&[0, 0x09, 0, 3, 0, 4, 0, 1, 0, 5]);
        let code = [0xa8, 0, 4, 0xb1, 0x4b, 0xa9, 0];
        let mut attr = vec![0, 1, 0, 1, 0, 0, 0, code.len() as u8];
        attr.extend_from_slice(&code);
        attr.extend_from_slice(&[0, 0, 0, 0]);
        v.extend_from_slice(&(attr.len() as u32).to_be_bytes());
        v.extend_from_slice(&attr);
        v.extend_from_slice(&[0, 0]);
        v
    }

    #[test]
    fn subroutines_are_refused_with_a_reason_and_left_intact() {
        let class = jsr_class();
        assert_eq!(ClassFile::parse(&class).unwrap().write(), class);
        let out = instrument_class(
            &class,
            &InjectionPlan::everything("P"),
            &mut Registry::default(),
        )
        .unwrap();
        assert_eq!(out.methods_instrumented, 0);
        assert_eq!(
            out.refused,
            vec![(
                "m()V".to_string(),
                Error::Unsupported("jsr/ret subroutines")
            )]
        );
        assert_eq!(out.bytes, class);
    }
}
