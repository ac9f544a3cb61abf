//! Which class a `jclass` names, read from the VM's memory: the local handle's object (the
//! class's `java.lang.Class` mirror) and the `Klass*` the mirror holds. JVMTI's `GetTag` or
//! `GetClassSignature` answer the same but change the thread's state and take a lock each
//! time; an allocation sample needs the class every time.
//!
//! Mirrors move with the collector, and a `Klass*` is freed when its class is unloaded, so
//! neither alone names a class for long. The pair does: a caller that remembers what it
//! learned about a (mirror, `Klass*`) pair sees a different pair as soon as either changes.
//! Every read goes through [`Fetch`]; one that faults (a collector whose handles hold
//! coloured pointers, ZGC) gives None, and the caller asks JVMTI instead.

use jtap_jvmti::sys;

use super::fetch::{Fetch, LOWEST};
use super::structs::VmStructs;
use crate::thread::Vm;

/// Reads the class out of a class mirror.
#[derive(Debug, Clone, Copy)]
pub struct Mirrors {
    fetch: Fetch,
    /// Bytes from a mirror to its `Klass*` (`java_lang_Class::_klass_offset`).
    klass_offset: usize,
}

impl Mirrors {
    /// Reads where a mirror keeps its `Klass*` in the VM `vm` (after the VM started).
    pub fn resolve(vm: Vm) -> Result<Mirrors, String> {
        // SAFETY: the symbols are looked up in the JVM's own loaded libjvm.so.
        let structs = unsafe { VmStructs::read(|name| crate::libjvm::exported(vm, name))? };
        let address = structs.address("java_lang_Class", "_klass_offset")?;
        let fetch = Fetch::resolve(vm)?;
        let offset = fetch
            .value::<i32>(address)
            .ok_or("java_lang_Class::_klass_offset cannot be read")?;
        match usize::try_from(offset) {
            Ok(offset) if offset > 0 && offset.is_multiple_of(8) => Ok(Mirrors {
                fetch,
                klass_offset: offset,
            }),
            _ => Err(format!("a mirror's Klass* at offset {offset}")),
        }
    }

    /// The (mirror, `Klass*`) pair of `class`, a local reference the VM gave the calling
    /// thread; None for a null or non-local (tagged) reference or a read that faults.
    pub fn pair(&self, class: sys::jclass) -> Option<(usize, usize)> {
        let handle = class as usize;
        // Global and weak references carry a tag in their low bits; local ones do not.
        if handle < LOWEST || !handle.is_multiple_of(8) {
            return None;
        }
        let mirror = self.fetch.word(handle)?;
        if mirror < LOWEST || !mirror.is_multiple_of(8) {
            return None;
        }
        let klass = self.fetch.word(mirror.checked_add(self.klass_offset)?)?;
        (klass >= LOWEST).then_some((mirror, klass))
    }
}
