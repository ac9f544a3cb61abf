//! Java methods: making sure every loaded method has a jmethodID before it is sampled
//! (`AsyncGetCallTrace` reports only methods that have one), and turning sampled jmethodIDs
//! and bytecode indices into Java frames (`pkg.Class.method`, descriptor, line).

use std::collections::HashMap;

use jtap_jvmti::{sys, Env};
use jtap_profile::{Frame, FrameKind};

use super::asgct::{CallFrame, NATIVE_BCI};
use crate::thread::Vm;

/// Creates the jmethodIDs of every loaded class (`GetLoadedClasses` + `GetClassMethods`),
/// freeing the class references as it goes. Returns how many classes it went through.
pub fn prepare_loaded_classes(env: &Env, vm: Vm) -> Result<usize, String> {
    let frame = vm
        .local_frame(16)
        .ok_or("the calling thread is not attached to the VM")?;
    let classes = env.loaded_classes().map_err(|e| e.to_string())?;
    for &class in classes.iter() {
        prepare_class(env, class);
        // SAFETY: a local reference GetLoadedClasses made in this frame, deleted once.
        unsafe { frame.jni().delete_local_ref(class) };
    }
    Ok(classes.len())
}

/// Creates the jmethodIDs of one class (ClassPrepare, or at start). Classes that are not
/// prepared yet report an error, which is fine: their ClassPrepare comes later.
pub fn prepare_class(env: &Env, class: sys::jclass) {
    // SAFETY: class is a live reference held by the caller; the returned array is freed on drop.
    let _ = unsafe { env.class_methods(class) };
}

struct Method {
    /// `pkg.Class.method`.
    name: String,
    /// The method's descriptor, `(I)V`.
    signature: String,
    /// `(start bci, line)`, sorted by bci.
    lines: Vec<(i64, i32)>,
}

/// Resolves sampled frames, caching each method's name and line table for the session.
pub struct Resolver<'e> {
    env: &'e Env,
    vm: Vm,
    methods: HashMap<usize, Option<Method>>,
}

impl<'e> Resolver<'e> {
    /// A resolver; use it on one attached thread.
    pub fn new(env: &'e Env, vm: Vm) -> Resolver<'e> {
        Resolver {
            env,
            vm,
            methods: HashMap::new(),
        }
    }

    /// The profile frame of a frame whose kind is unknown (`GetStackTrace` does not say
    /// either): Java frames count as compiled, as in async-profiler without VM structures.
    pub fn frame(&mut self, frame: &CallFrame) -> Frame {
        self.frame_of_kind(frame, FrameKind::Compiled)
    }

    /// The profile frame of a Java frame of the given kind (see [`super::code`]); frames of
    /// native methods are native whatever `kind` says.
    pub fn frame_of_kind(&mut self, frame: &CallFrame, kind: FrameKind) -> Frame {
        if frame.method.is_null() {
            return Frame::new("[unknown_method]", FrameKind::Error);
        }
        let (env, vm) = (self.env, self.vm);
        let method = self
            .methods
            .entry(frame.method as usize)
            .or_insert_with(|| describe(env, vm, frame.method));
        let Some(method) = method else {
            return Frame::new("[unloaded_method]", FrameKind::Error);
        };
        let signature = Some(method.signature.clone());
        if frame.bci == NATIVE_BCI {
            return Frame::java(method.name.clone(), FrameKind::Native, signature, None);
        }
        // The last entry starting at or before the bci (the table is sorted by bci).
        let entries_before = method
            .lines
            .partition_point(|(start, _)| *start <= i64::from(frame.bci));
        let line = entries_before
            .checked_sub(1)
            .filter(|_| frame.bci >= 0)
            .and_then(|i| u32::try_from(method.lines[i].1).ok());
        Frame::java(method.name.clone(), kind, signature, line)
    }
}

fn describe(env: &Env, vm: Vm, method: sys::jmethodID) -> Option<Method> {
    // The walker's jmethodIDs come from the VM's memory as a walk found it, which an nmethod
    // freed under the walk can make garbage: JVMTI would dereference it.
    if crate::walk::resolved().is_some_and(|walker| !walker.is_method_id(method as usize)) {
        return None;
    }
    let frame = vm.local_frame(4)?;
    // SAFETY: jmethodIDs stay valid memory for the life of the VM (HotSpot never frees them;
    // a method of an unloaded class makes these calls fail); the class reference is freed
    // with the local frame.
    let (class_signature, (name, signature)) = unsafe {
        let class = env.method_declaring_class(method).ok()?;
        let signature = env.class_signature(class).ok()?;
        frame.jni().delete_local_ref(class);
        (signature, env.method_name(method).ok()?)
    };
    // SAFETY: as above.
    let mut lines: Vec<(i64, i32)> = unsafe { env.line_number_table(method) }
        .map(|table| {
            table
                .iter()
                .map(|e| (e.start_location, e.line_number))
                .collect()
        })
        .unwrap_or_default();
    lines.sort_unstable();
    Some(Method {
        name: format!("{}.{name}", java_class_name(&class_signature)),
        signature,
        lines,
    })
}

/// `Lcom/example/Foo;` → `com.example.Foo`; array and primitive signatures stay as they are.
pub fn java_class_name(signature: &str) -> String {
    match signature
        .strip_prefix('L')
        .and_then(|s| s.strip_suffix(';'))
    {
        Some(name) => name.replace('/', "."),
        None => signature.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_signatures_become_java_names() {
        assert_eq!(java_class_name("Ljava/lang/String;"), "java.lang.String");
        assert_eq!(
            java_class_name("Lworkloads/Burn$Worker;"),
            "workloads.Burn$Worker"
        );
        assert_eq!(java_class_name("[I"), "[I");
    }
}
