//! The runtime class `jtap/runtime/Probes` that instrumented code calls: a class of `public
//! static native` methods only, written here with the class-file crate (no javac, no jar),
//! defined once per JVM in the bootstrap loader (JNI `DefineClass` with a null loader, so
//! every class loader sees it) and bound to [`super::probes`] with `RegisterNatives`. It stays
//! for the life of the JVM; between sessions its methods return at once.

use std::sync::OnceLock;

use jtap_classfile::class_file::{Member, ACC_STATIC};
use jtap_classfile::ClassFile;

use super::ffi::{Global, Jni, Native};
use super::probes;

/// Internal name of the runtime class.
pub const CLASS: &str = "jtap/runtime/Probes";

/// The probe methods: name, descriptor, native implementation.
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
            name: c"alloc",
            signature: c"(Ljava/lang/Object;)V",
            function: probes::alloc as *mut _,
        },
    ]
}

/// The runtime class's bytes: `public final class jtap.runtime.Probes` with one `public
/// static native` method per probe (class-file version 52: no StackMapTable needed, and no
/// code at all).
pub fn class_bytes() -> Result<Vec<u8>, String> {
    const ACC_PUBLIC: u16 = 0x0001;
    const ACC_FINAL: u16 = 0x0010;
    const ACC_SUPER: u16 = 0x0020;
    const ACC_NATIVE: u16 = 0x0100;
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
    Ok(cf.write())
}

/// The defined and bound runtime class.
pub struct Runtime {
    /// The module of the class: the bootstrap loader's unnamed module.
    pub module: Global,
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
    Ok(Runtime { module })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_class_declares_every_probe_as_static_native() {
        let bytes = class_bytes().unwrap();
        let cf = ClassFile::parse(&bytes).unwrap();
        assert_eq!(cf.name().unwrap(), CLASS.as_bytes());
        assert_eq!(cf.write(), bytes);
        let declared: Vec<(String, String)> = cf
            .methods
            .iter()
            .map(|m| {
                assert_eq!(m.access_flags, 0x0109);
                (
                    cf.constant_pool
                        .utf8_str(m.name_index)
                        .unwrap()
                        .into_owned(),
                    cf.constant_pool
                        .utf8_str(m.descriptor_index)
                        .unwrap()
                        .into_owned(),
                )
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
    }
}
