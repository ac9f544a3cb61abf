//! The runtime class `jtap/runtime/Probes` that instrumented code calls, written here with the
//! class-file crate (no javac, no jar), defined once per JVM in the bootstrap loader (JNI
//! `DefineClass` with a null loader, so every class loader sees it) and bound to
//! [`super::probes`] with `RegisterNatives`. It stays for the life of the JVM; between
//! sessions its methods return at once.
//!
//! Besides the `native` probes it holds the field clock of sessions with a threshold (see
//! [`super::ticker`]): `static volatile long now`, which instrumented methods read at entry,
//! and two small Java methods, `leave` and `leaveThrown`, that compare the clock at exit
//! with `threshold` and call into the agent only for a call that lasted that long. They are
//! small enough for the JIT to inline, so the common case costs two field reads and a
//! compare, without a native call.
//!
//! `leave` begins with `VarHandle.acquireFence()`. Without it, once inlined, its volatile
//! read of `now` is a load the JIT may schedule before the traced method's body when the body
//! touches no memory (a loop of arithmetic): the Java memory model allows it, and C2 did it
//! (`workloads.SpinLoop`: all but a few of its 40-ms calls missed once compiled). The fence
//! is a point in the code's control flow that the read must follow, and costs no instruction
//! on x86.

use std::sync::OnceLock;

use jtap_classfile::class_file::{Member, ACC_STATIC};
use jtap_classfile::code::CodeAttribute;
use jtap_classfile::instruction::{emit_cp, emit_local, op};
use jtap_classfile::{Attribute, ClassFile, ConstantPool};

use super::ffi::{Global, Jni, Native};
use super::label_probes;
use super::probes;
use super::ticker::FieldClock;

/// Internal name of the runtime class.
pub const CLASS: &str = "jtap/runtime/Probes";
/// The clock field: ticks, advanced by the `jtap-clock` thread.
pub const CLOCK_FIELD: &str = "now";
/// The native returning the probes' clock, which methods timed from their own frame call at
/// entry.
pub const CLOCK_METHOD: &str = "ticks";
/// Shortest `now - start`, in ticks, for which `leave` calls the agent.
const THRESHOLD_FIELD: &str = "threshold";
/// The Java exit probes of the field clock: name, descriptor, the native they call.
const LEAVES: [(&str, &str, &str); 2] = [
    ("leave", "(JI)V", "slow"),
    ("leaveThrown", "(JILjava/lang/Throwable;)V", "slowThrown"),
];

/// The native probe methods: name, descriptor, native implementation.
pub fn natives() -> Vec<Native> {
    vec![
        Native {
            name: c"enter",
            signature: c"(I)V",
            function: probes::enter as *mut _,
        },
        Native {
            name: c"enterArgs",
            signature: c"(ILjava/lang/Object;[Ljava/lang/Object;)V",
            function: probes::enter_args as *mut _,
        },
        Native {
            name: c"exit",
            signature: c"(I)V",
            function: probes::exit as *mut _,
        },
        Native {
            name: c"exitValue",
            signature: c"(ILjava/lang/Object;)V",
            function: probes::exit_value as *mut _,
        },
        Native {
            name: c"thrown",
            signature: c"(ILjava/lang/Throwable;)V",
            function: probes::thrown as *mut _,
        },
        Native {
            name: c"ticks",
            signature: c"()J",
            function: probes::ticks_now as *mut _,
        },
        Native {
            name: c"labelAt",
            signature: c"(ILjava/lang/Object;[Ljava/lang/Object;)V",
            function: label_probes::label_at as *mut _,
        },
        Native {
            name: c"labelOut",
            signature: c"(I)V",
            function: label_probes::label_out as *mut _,
        },
        Native {
            name: c"slow",
            signature: c"(JI)V",
            function: probes::slow as *mut _,
        },
        Native {
            name: c"slowValue",
            signature: c"(JILjava/lang/Object;)V",
            function: probes::slow_value as *mut _,
        },
        Native {
            name: c"slowThrown",
            signature: c"(JILjava/lang/Throwable;)V",
            function: probes::slow_thrown as *mut _,
        },
        Native {
            name: c"root",
            signature: c"(I)V",
            function: probes::root as *mut _,
        },
        Native {
            name: c"call",
            signature: c"(II)V",
            function: probes::call as *mut _,
        },
        Native {
            name: c"called",
            signature: c"(II)V",
            function: probes::called as *mut _,
        },
        Native {
            name: c"siteEnter",
            signature: c"(II)V",
            function: probes::site_enter as *mut _,
        },
        Native {
            name: c"siteEnterSelf",
            signature: c"(IILjava/lang/Object;)V",
            function: probes::site_enter_self as *mut _,
        },
        Native {
            name: c"siteEnterCallee",
            signature: c"(IILjava/lang/Object;Ljava/lang/Object;[Ljava/lang/Object;)V",
            function: probes::site_enter_callee as *mut _,
        },
        Native {
            name: c"siteExit",
            signature: c"(IILjava/lang/Object;Ljava/lang/Throwable;)V",
            function: probes::site_exit as *mut _,
        },
        Native {
            name: c"entryReached",
            signature: c"(ILjava/lang/Object;)V",
            function: probes::entry_reached as *mut _,
        },
        Native {
            name: c"entryReachedValues",
            signature: c"(ILjava/lang/Object;[Ljava/lang/Object;)V",
            function: probes::entry_reached_values as *mut _,
        },
        Native {
            name: c"lineReached",
            signature: c"(IILjava/lang/Object;)V",
            function: probes::line_reached as *mut _,
        },
        Native {
            name: c"newReached",
            signature: c"(IILjava/lang/Object;)V",
            function: probes::new_reached as *mut _,
        },
        Native {
            name: c"newReachedValue",
            signature: c"(IILjava/lang/Object;Ljava/lang/Object;)V",
            function: probes::new_reached_value as *mut _,
        },
        Native {
            name: c"syncReached",
            signature: c"(IILjava/lang/Object;Ljava/lang/Object;)V",
            function: probes::sync_reached as *mut _,
        },
        Native {
            name: c"insnReached",
            signature:
                c"(IILjava/lang/Object;Ljava/lang/Object;[Ljava/lang/Object;Ljava/lang/Object;)V",
            function: probes::insn_reached as *mut _,
        },
        Native {
            name: c"fieldReached",
            signature: c"(IILjava/lang/Object;Ljava/lang/Object;Ljava/lang/Object;)V",
            function: probes::field_reached as *mut _,
        },
        Native {
            name: c"alloc",
            signature: c"(Ljava/lang/Object;)V",
            function: probes::alloc as *mut _,
        },
    ]
}

const ACC_PUBLIC: u16 = 0x0001;
const ACC_FINAL: u16 = 0x0010;
const ACC_SUPER: u16 = 0x0020;
const ACC_VOLATILE: u16 = 0x0040;
const ACC_NATIVE: u16 = 0x0100;

/// The runtime class's bytes: `public final class jtap.runtime.Probes` with the clock
/// fields, one `public static native` method per native probe and the Java exit probes.
pub fn class_bytes() -> Result<Vec<u8>, String> {
    // An empty class: magic, version 0.52, an empty constant pool, no members.
    let mut skeleton = vec![0xCA, 0xFE, 0xBA, 0xBE, 0, 0, 0, 52, 0, 1];
    skeleton.extend_from_slice(&[0; 14]);
    let mut cf = ClassFile::parse(&skeleton).map_err(|e| e.to_string())?;
    let error = |e: jtap_classfile::Error| e.to_string();
    cf.access_flags = ACC_PUBLIC | ACC_FINAL | ACC_SUPER;
    cf.this_class = cf.constant_pool.add_class(CLASS).map_err(error)?;
    cf.super_class = cf
        .constant_pool
        .add_class("java/lang/Object")
        .map_err(error)?;
    for field in [CLOCK_FIELD, THRESHOLD_FIELD] {
        cf.fields.push(Member {
            access_flags: ACC_PUBLIC | ACC_STATIC | ACC_VOLATILE,
            name_index: cf.constant_pool.add_utf8(field).map_err(error)?,
            descriptor_index: cf.constant_pool.add_utf8("J").map_err(error)?,
            attributes: Vec::new(),
        });
    }
    for native in natives() {
        let name = native.name.to_str().map_err(|e| e.to_string())?;
        let signature = native.signature.to_str().map_err(|e| e.to_string())?;
        cf.methods.push(Member {
            access_flags: ACC_PUBLIC | ACC_STATIC | ACC_NATIVE,
            name_index: cf.constant_pool.add_utf8(name).map_err(error)?,
            descriptor_index: cf.constant_pool.add_utf8(signature).map_err(error)?,
            attributes: Vec::new(),
        });
    }
    for (name, descriptor, native) in LEAVES {
        let code = leave_code(&mut cf.constant_pool, descriptor, native).map_err(error)?;
        cf.methods.push(Member {
            access_flags: ACC_PUBLIC | ACC_STATIC,
            name_index: cf.constant_pool.add_utf8(name).map_err(error)?,
            descriptor_index: cf.constant_pool.add_utf8(descriptor).map_err(error)?,
            attributes: vec![Attribute {
                name_index: cf.constant_pool.add_utf8("Code").map_err(error)?,
                info: code.write(),
            }],
        });
    }
    Ok(cf.write())
}

/// `static void leave(long start, int id[, Throwable t]) { VarHandle.acquireFence(); if (now
/// - start >= threshold) native(start, id[, t]); }`
fn leave_code(
    cp: &mut ConstantPool,
    descriptor: &str,
    native: &str,
) -> jtap_classfile::Result<CodeAttribute> {
    let now = cp.add_field_ref(CLASS, CLOCK_FIELD, "J")?;
    let threshold = cp.add_field_ref(CLASS, THRESHOLD_FIELD, "J")?;
    let call = cp.add_method_ref(CLASS, native, descriptor)?;
    let with_throwable = descriptor.contains("Throwable");
    let fence = cp.add_method_ref("java/lang/invoke/VarHandle", "acquireFence", "()V")?;
    let mut code = Vec::with_capacity(24);
    emit_cp(&mut code, op::INVOKESTATIC, fence);
    emit_cp(&mut code, op::GETSTATIC, now);
    emit_local(&mut code, op::LLOAD, 0);
    code.push(op::LSUB);
    emit_cp(&mut code, op::GETSTATIC, threshold);
    code.push(op::LCMP);
    let branch = code.len();
    code.extend_from_slice(&[op::IFLT, 0, 0]);
    emit_local(&mut code, op::LLOAD, 0);
    emit_local(&mut code, op::ILOAD, 2);
    if with_throwable {
        emit_local(&mut code, op::ALOAD, 3);
    }
    emit_cp(&mut code, op::INVOKESTATIC, call);
    let end = code.len();
    code.push(op::RETURN);
    code[branch + 1..branch + 3].copy_from_slice(&((end - branch) as u16).to_be_bytes());
    // One frame, at the `return` the branch jumps to: the entry frame again (same_frame).
    let stack_map = vec![0, 1, end as u8];
    Ok(CodeAttribute {
        max_stack: 4,
        max_locals: if with_throwable { 4 } else { 3 },
        code,
        exception_table: Vec::new(),
        attributes: vec![Attribute {
            name_index: cp.add_utf8("StackMapTable")?,
            info: stack_map,
        }],
    })
}

/// The defined and bound runtime class.
pub struct Runtime {
    /// The module of the class: the bootstrap loader's unnamed module.
    pub module: Global,
    /// Its clock fields; None in a class an older jtap defined in this JVM.
    pub clock: Option<FieldClock>,
}

/// The runtime class, defining and binding it on first use (needs the live phase and a
/// thread attached to the VM).
pub fn get(jni: Jni) -> Result<&'static Runtime, String> {
    static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| define(jni))
        .as_ref()
        .map_err(Clone::clone)
}

fn define(jni: Jni) -> Result<Runtime, String> {
    let bytes = class_bytes()?;
    let class = match jni.define_boot_class(c"jtap/runtime/Probes", &bytes) {
        Ok(class) => class,
        // Another copy of the agent library defined it before: bind that one to us.
        Err(e) => jni.find_class(c"jtap/runtime/Probes").ok_or(e)?,
    };
    jni.register_natives(class, &natives())?;
    let module = jni.module_of(class.raw());
    let module = jni
        .global(module)
        .ok_or("the runtime class has no module")?;
    let clock = jni
        .static_long(class, c"now")
        .zip(jni.static_long(class, c"threshold"))
        .map(|(now, threshold)| FieldClock { now, threshold });
    if let Some(clock) = clock {
        jni.set_static_long(clock.threshold, i64::MAX);
    }
    Ok(Runtime { module, clock })
}

#[cfg(test)]
mod tests {
    use super::*;
    use jtap_classfile::instruction::decode;

    fn name_and_descriptor(cf: &ClassFile, m: &Member) -> (String, String) {
        let utf8 = |i| cf.constant_pool.utf8_str(i).unwrap().into_owned();
        (utf8(m.name_index), utf8(m.descriptor_index))
    }

    #[test]
    fn the_class_declares_every_native_probe_and_the_java_exit_probes() {
        let bytes = class_bytes().unwrap();
        let cf = ClassFile::parse(&bytes).unwrap();
        assert_eq!(cf.name().unwrap(), CLASS.as_bytes());
        assert_eq!(cf.write(), bytes);
        let (natives_declared, java): (Vec<&Member>, Vec<&Member>) = cf
            .methods
            .iter()
            .partition(|m| m.access_flags & ACC_NATIVE != 0);
        let declared: Vec<_> = natives_declared
            .iter()
            .map(|m| {
                assert_eq!(m.access_flags, 0x0109);
                name_and_descriptor(&cf, m)
            })
            .collect();
        let expected: Vec<(String, String)> = natives()
            .iter()
            .map(|n| {
                (
                    n.name.to_str().unwrap().into(),
                    n.signature.to_str().unwrap().into(),
                )
            })
            .collect();
        assert_eq!(declared, expected);
        let fields: Vec<_> = cf
            .fields
            .iter()
            .map(|f| name_and_descriptor(&cf, f))
            .collect();
        assert_eq!(
            fields,
            [
                ("now".to_string(), "J".to_string()),
                ("threshold".into(), "J".into())
            ]
        );
        for (m, (name, descriptor, native)) in java.iter().zip(LEAVES) {
            assert_eq!(m.access_flags, ACC_PUBLIC | ACC_STATIC);
            assert_eq!(
                name_and_descriptor(&cf, m),
                (name.into(), descriptor.into())
            );
            let code = CodeAttribute::parse(&m.attributes[0].info).unwrap();
            let insns = decode(&code.code).unwrap();
            // The fence, getstatic now, lload 0, lsub, getstatic threshold, lcmp, iflt
            // →return, the call.
            let called: Vec<String> = insns
                .iter()
                .filter(|i| i.opcode == op::INVOKESTATIC)
                .map(|i| {
                    let jtap_classfile::instruction::Operand::Cp(c) = i.operand else {
                        panic!()
                    };
                    let m = cf.constant_pool.member_ref(c).unwrap();
                    String::from_utf8_lossy(m.name).into_owned()
                })
                .collect();
            assert_eq!(called, ["acquireFence", native]);
            assert_eq!(insns[1].opcode, op::GETSTATIC, "the fence comes first");
            let branch = insns.iter().find(|i| i.opcode == op::IFLT).unwrap();
            let target = branch.targets()[0] as usize;
            assert_eq!(code.code[target], op::RETURN);
            assert_eq!(code.attributes.len(), 1, "one StackMapTable");
        }
        assert_eq!(java.len(), LEAVES.len());
    }
}
