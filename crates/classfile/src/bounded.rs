//! Methods whose running time their bytecode bounds: a method that calls nothing, cannot
//! loop, takes no monitor, allocates no array and touches nothing that could load or
//! initialise another class runs each of its instructions at most once, each in bounded time.
//! Only a pause of the whole JVM (a safepoint, a garbage collection) or of the machine can
//! make one call of it last long. A trace under a threshold leaves such methods out when
//! their bound is far below the threshold: their probes could report nothing else and would
//! only make them bigger (and too big for the JIT to inline where they are called).

use crate::class_file::{ClassFile, Member};
use crate::code::CodeAttribute;
use crate::constant_pool::Constant;
use crate::instruction::{self, op, Operand};

/// The length in bytes of `method`'s bytecode when that length bounds its running time, as
/// the module describes; None for every other method (and for abstract and native ones, and
/// for code that does not decode).
///
/// Left out, because one of them can take any time: `synchronized` methods; invocations
/// (`invokedynamic` too); a
/// branch to itself or backwards, `jsr`/`ret` or an exception handler (loops); `monitorenter`;
/// `newarray`, `anewarray` and `multianewarray` (zeroing a large array); `new`, `getstatic`,
/// `putstatic`, `checkcast` and `instanceof` naming another class (its loading by a class
/// loader's Java code, its static initialiser); `ldc` of a class, method handle, method type
/// or dynamic constant (the same, or a bootstrap method).
pub fn bounded_length(cf: &ClassFile, method: &Member) -> Option<usize> {
    const ACC_SYNCHRONIZED: u16 = 0x0020;
    if method.access_flags & ACC_SYNCHRONIZED != 0 {
        return None;
    }
    let cp = &cf.constant_pool;
    let attribute = method
        .attributes
        .iter()
        .find(|a| cf.attribute_is(a, b"Code"))?;
    let code = CodeAttribute::parse(&attribute.info).ok()?;
    if !code.exception_table.is_empty() {
        return None;
    }
    let this = cp.class_name(cf.this_class).ok()?;
    let names_this_class = |index: u16| cp.class_name(index).is_ok_and(|name| name == this);
    let owned_by_this_class = |index: u16| cp.member_ref(index).is_ok_and(|m| m.owner == this);
    for insn in instruction::decode(&code.code).ok()? {
        if insn.targets().iter().any(|&target| target <= insn.offset) {
            return None;
        }
        let index = match insn.operand {
            Operand::Cp(index) => index,
            _ => 0,
        };
        let bounded = match insn.opcode {
            op::INVOKEVIRTUAL..=op::INVOKEDYNAMIC
            | op::JSR
            | op::JSR_W
            | op::RET
            | op::MONITORENTER
            | op::NEWARRAY
            | op::ANEWARRAY
            | op::MULTIANEWARRAY => false,
            op::NEW | op::CHECKCAST | op::INSTANCEOF => names_this_class(index),
            op::GETSTATIC | op::PUTSTATIC => owned_by_this_class(index),
            op::LDC | op::LDC_W => matches!(
                cp.get(index),
                Ok(Constant::Integer(_) | Constant::Float(_) | Constant::String(_))
            ),
            _ => true,
        };
        if !bounded {
            return None;
        }
    }
    Some(code.code.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::class_file::Attribute;
    use crate::constant_pool::ConstantPool;

    /// Class `t/T` with one static method whose bytecode `code` writes, given the pool.
    fn bounded(code: impl FnOnce(&mut ConstantPool) -> Vec<u8>) -> Option<usize> {
        bounded_with(0x0008, code)
    }

    /// The same, with the method's access flags.
    fn bounded_with(
        access_flags: u16,
        code: impl FnOnce(&mut ConstantPool) -> Vec<u8>,
    ) -> Option<usize> {
        // An empty class named `t/T`.
        let mut bytes = vec![0xCA, 0xFE, 0xBA, 0xBE, 0, 0, 0, 52, 0, 3];
        bytes.extend_from_slice(b"\x01\x00\x03t/T\x07\x00\x01");
        bytes.extend_from_slice(&[0, 0x21, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let mut cf = ClassFile::parse(&bytes).unwrap();
        let code = CodeAttribute {
            max_stack: 4,
            max_locals: 2,
            code: code(&mut cf.constant_pool),
            exception_table: Vec::new(),
            attributes: Vec::new(),
        };
        let cp = &mut cf.constant_pool;
        let method = Member {
            access_flags,
            name_index: cp.add_utf8("m").unwrap(),
            descriptor_index: cp.add_utf8("(I)I").unwrap(),
            attributes: vec![Attribute {
                name_index: cp.add_utf8("Code").unwrap(),
                info: code.write(),
            }],
        };
        bounded_length(&cf, &method)
    }

    fn u16s(index: u16) -> [u8; 2] {
        index.to_be_bytes()
    }

    #[test]
    fn straight_line_code_is_bounded_by_its_length() {
        // return (x > 0 ? x + T.bias : -x), a forward branch and this class's own static.
        let length = bounded(|cp| {
            let [b1, b2] = u16s(cp.add_field_ref("t/T", "bias", "I").unwrap());
            vec![
                0x1a,
                0x9e,
                0,
                9, // iload_0; ifle +9
                0x1a,
                op::GETSTATIC,
                b1,
                b2,
                0x60,
                0xac, // iload_0; getstatic; iadd; ireturn
                0x1a,
                0x74,
                0xac, // iload_0; ineg; ireturn
            ]
        });
        assert_eq!(length, Some(13));
    }

    #[test]
    fn calls_loops_locks_arrays_and_other_classes_are_not() {
        type Code = Box<dyn FnOnce(&mut ConstantPool) -> Vec<u8>>;
        let unbounded: [(&str, Code); 6] = [
            (
                "a call",
                Box::new(|cp| {
                    let [b1, b2] = u16s(cp.add_method_ref("t/T", "m", "(I)I").unwrap());
                    vec![0x1a, 0xb8, b1, b2, 0xac]
                }),
            ),
            // iinc 0 -1; iload_0; ifgt -4 (back to the iinc); iload_0; ireturn
            (
                "a loop",
                Box::new(|_| vec![0x84, 0, 0xff, 0x1a, 0x9d, 0xff, 0xfc, 0x1a, 0xac]),
            ),
            (
                "a monitor",
                Box::new(|_| vec![0x2a, op::MONITORENTER, 0x1a, 0xac]),
            ),
            // iload_0; newarray int; arraylength; ireturn
            (
                "an array",
                Box::new(|_| vec![0x1a, op::NEWARRAY, 10, 0xbe, 0xac]),
            ),
            (
                "another class's static",
                Box::new(|cp| {
                    let [b1, b2] = u16s(cp.add_field_ref("t/Other", "n", "I").unwrap());
                    vec![op::GETSTATIC, b1, b2, 0xac]
                }),
            ),
            (
                "a class constant",
                Box::new(|cp| {
                    let [b1, b2] = u16s(cp.add_class("t/Other").unwrap());
                    vec![op::LDC_W, b1, b2, op::POP, 0x1a, 0xac]
                }),
            ),
        ];
        for (what, code) in unbounded {
            assert_eq!(bounded(code), None, "{what}");
        }
        // A synchronized method waits for its monitor.
        assert_eq!(bounded_with(0x0028, |_| vec![0x1a, 0xac]), None);
        assert_eq!(bounded_with(0x0008, |_| vec![0x1a, 0xac]), Some(2));
    }
}
