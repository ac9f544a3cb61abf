//! The classes a session touched and the restore check. A program may load many classes of
//! the same name, each from a loader of its own (a Groovy script compiles and loads its
//! classes anew on every run, and their bytes differ: they hold the time they were compiled
//! at), so each class is known by its name and its defining loader, and compared after
//! restoring with its own original.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use jtap_jvmti::{sys, EnvRef};

use super::super::ffi::{self, Jni, WeakLoader};
use super::super::select;
use super::{lock, Tracing};

/// What the session knows about one class it touched.
#[derive(Default)]
pub(super) struct Touched {
    /// Hash of the bytes the hook was handed when it instrumented the class.
    pub seen: u64,
    /// Hash of the bytes handed to the hook when restoring.
    pub restored: Option<u64>,
    /// Whether the restore has retransformed the class (or tried to).
    pub retransformed: bool,
    /// Hash of the methods' bytecode sizes before instrumentation (classes loaded and linked
    /// before the session only).
    pub bytecodes_before: Option<u64>,
}

/// How the session holds and compares class loaders: JNI weak references (see
/// [`Jni::weak_loader`]); plain numbers in the tests.
pub(super) trait Loaders {
    /// A loader as the session keeps it.
    type Held: Copy;
    /// A loader as the JVM hands it.
    type Loader: Copy;
    /// A number the same loader always gives (its identity hash), which few others give.
    fn key(&self, loader: Self::Loader) -> i32;
    /// Holds `loader`, without keeping it alive; None if it cannot.
    fn hold(&self, loader: Self::Loader) -> Option<Self::Held>;
    /// Whether `held` is `loader`.
    fn is(&self, held: Self::Held, loader: Self::Loader) -> bool;
    /// Whether the loader `held` holds was collected (its classes are gone).
    fn collected(&self, held: Self::Held) -> bool;
    /// Lets go of `held`.
    fn release(&self, held: Self::Held);
}

/// The JVM's loaders, through JNI and JVMTI (for identity hashes).
pub(super) struct JvmLoaders<'e> {
    pub jni: Jni,
    pub env: EnvRef<'e>,
}

impl Loaders for JvmLoaders<'_> {
    type Held = WeakLoader;
    type Loader = sys::jobject;

    fn key(&self, loader: sys::jobject) -> i32 {
        match loader.is_null() {
            true => 0,
            false => self.jni.identity_hash(&self.env, loader).unwrap_or(0),
        }
    }

    fn hold(&self, loader: sys::jobject) -> Option<WeakLoader> {
        self.jni.weak_loader(loader)
    }

    fn is(&self, held: WeakLoader, loader: sys::jobject) -> bool {
        self.jni.is_loader(held, loader)
    }

    fn collected(&self, held: WeakLoader) -> bool {
        self.jni.is_collected(held)
    }

    fn release(&self, held: WeakLoader) {
        self.jni.delete_weak(held)
    }
}

/// The touched classes, by name and defining loader: a program may hold thousands of classes
/// of one name (a script run again and again), so they are found by name and the loader's
/// identity hash, then the loader itself.
pub(super) struct Classes<H> {
    by_key: HashMap<(String, i32), Vec<(H, Touched)>>,
    /// Names of the classes touched (from any loader).
    names: HashSet<String>,
    /// Classes recorded; and how many there were at the last sweep of collected loaders.
    count: usize,
    swept_at: usize,
}

impl<H: Copy> Classes<H> {
    pub fn new() -> Classes<H> {
        Classes {
            by_key: HashMap::new(),
            names: HashSet::new(),
            count: 0,
            swept_at: 0,
        }
    }

    /// Whether a class of this name was touched (from any loader).
    pub fn has_name(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    /// The class `name` of `loader`, if touched.
    pub fn get<L: Loaders<Held = H>>(
        &self,
        loaders: &L,
        name: &str,
        loader: L::Loader,
    ) -> Option<&Touched> {
        if !self.has_name(name) {
            return None;
        }
        let same = self.by_key.get(&(name.to_string(), loaders.key(loader)))?;
        same.iter()
            .find(|(held, _)| loaders.is(*held, loader))
            .map(|(_, t)| t)
    }

    /// The class `name` of `loader`, if touched, to change.
    pub fn get_mut<L: Loaders<Held = H>>(
        &mut self,
        loaders: &L,
        name: &str,
        loader: L::Loader,
    ) -> Option<&mut Touched> {
        if !self.has_name(name) {
            return None;
        }
        let same = self
            .by_key
            .get_mut(&(name.to_string(), loaders.key(loader)))?;
        same.iter_mut()
            .find(|(held, _)| loaders.is(*held, loader))
            .map(|(_, t)| t)
    }

    /// The class `name` of `loader`, recorded as touched if it was not (None if its loader
    /// cannot be held). When the classes recorded have doubled since the last time, those of
    /// loaders since collected are forgotten.
    pub fn entry<L: Loaders<Held = H>>(
        &mut self,
        loaders: &L,
        name: &str,
        loader: L::Loader,
    ) -> Option<&mut Touched> {
        if self.count >= 2 * self.swept_at.max(512) {
            self.sweep(loaders);
        }
        let same = self
            .by_key
            .entry((name.to_string(), loaders.key(loader)))
            .or_default();
        let index = match same.iter().position(|(held, _)| loaders.is(*held, loader)) {
            Some(index) => index,
            None => {
                same.push((loaders.hold(loader)?, Touched::default()));
                self.names.insert(name.to_string());
                self.count += 1;
                same.len() - 1
            }
        };
        Some(&mut same[index].1)
    }

    /// Forgets the classes of loaders since collected.
    fn sweep<L: Loaders<Held = H>>(&mut self, loaders: &L) {
        for same in self.by_key.values_mut() {
            same.retain(|(held, _)| {
                let gone = loaders.collected(*held);
                if gone {
                    loaders.release(*held);
                }
                !gone
            });
        }
        self.by_key.retain(|_, same| !same.is_empty());
        self.count = self.by_key.values().map(Vec::len).sum();
        self.swept_at = self.count;
    }

    /// Forgets the class `name` of `loader`.
    pub fn remove<L: Loaders<Held = H>>(&mut self, loaders: &L, name: &str, loader: L::Loader) {
        if let Some(same) = self
            .by_key
            .get_mut(&(name.to_string(), loaders.key(loader)))
        {
            let before = same.len();
            same.retain(|(held, _)| {
                let this = loaders.is(*held, loader);
                if this {
                    loaders.release(*held);
                }
                !this
            });
            self.count -= before - same.len();
        }
    }

    /// How many classes the session instrumented, of loaders not collected, that the restore
    /// has not retransformed yet.
    pub fn unrestored<L: Loaders<Held = H>>(&self, loaders: &L) -> usize {
        self.by_key
            .values()
            .flatten()
            .filter(|(held, t)| t.seen != 0 && !t.retransformed && !loaders.collected(*held))
            .count()
    }

    /// Lets go of every loader and forgets every class.
    pub fn release_all<L: Loaders<Held = H>>(&mut self, loaders: &L) {
        for (held, _) in self.by_key.drain().flat_map(|(_, same)| same) {
            loaders.release(held);
        }
        self.names.clear();
        self.count = 0;
        self.swept_at = 0;
    }
}

/// What restoring found.
pub struct Restored {
    /// Classes retransformed back.
    pub classes: usize,
    /// Of which the hook was handed exactly the bytes it saw before instrumenting.
    pub same_bytes: usize,
    /// Classes whose method bytecodes were compared (loaded before the session).
    pub bytecodes_checked: usize,
    /// Of which identical to before the session.
    pub same_bytecodes: usize,
    /// Classes that could not be restored or differ, with why.
    pub problems: Vec<String>,
    /// Time taken.
    pub took: Duration,
}

impl Restored {
    /// One line for the client.
    pub fn summary(&self) -> String {
        let mut text = format!(
            "restored {} classes in {} ms: class bytes identical to before for {}/{}, method bytecode sizes identical for {}/{}",
            self.classes,
            self.took.as_millis(),
            self.same_bytes,
            self.classes,
            self.same_bytecodes,
            self.bytecodes_checked
        );
        for p in self.problems.iter().take(10) {
            text.push_str("\n  ");
            text.push_str(p);
        }
        text
    }
}

/// How long the restore keeps looking for classes the hook instrumented as they loaded but
/// the JVM did not list as loaded yet (it lists a class once its loading ends, after the hook).
const LATE_CLASSES: Duration = Duration::from_millis(500);

impl Tracing {
    /// Retransforms every touched class back to its original bytes and checks the result:
    /// each class against its own bytes before instrumenting. No class is instrumented from
    /// its start on, and classes still loading when it starts are waited for.
    pub fn restore(&self) -> Restored {
        let started = Instant::now();
        let mut restored = Restored {
            classes: 0,
            same_bytes: 0,
            bytecodes_checked: 0,
            same_bytecodes: 0,
            problems: Vec::new(),
            took: Duration::ZERO,
        };
        // Once drained, every class the hook instrumented has its entry in `touched`.
        let stuck = self.instrumenting.close_and_drain(Duration::from_secs(2));
        if stuck != 0 {
            restored.problems.push(format!(
                "{stuck} class-file hook calls still instrumenting after 2 s"
            ));
        }
        let Some(jni) = Jni::current(self.vm) else {
            restored
                .problems
                .push("cannot restore: the stopping thread is not attached to the JVM".into());
            return restored;
        };
        if self.env.phase() != Ok(sys::JVMTI_PHASE_LIVE) {
            return restored;
        }
        let loaders = JvmLoaders { jni, env: self.env };
        loop {
            let _ = jni.with_local_frame(16, || self.restore_loaded(&loaders, &mut restored));
            let waiting = lock(&self.touched).unrestored(&loaders);
            if waiting == 0 {
                break;
            }
            if started.elapsed() >= LATE_CLASSES {
                restored.problems.push(format!(
                    "{} instrumented as they loaded not listed as loaded after {} ms (their loading failed?)",
                    super::counted(waiting, "class", "classes"),
                    LATE_CLASSES.as_millis()
                ));
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        restored.took = started.elapsed();
        restored
    }

    /// Retransforms the touched classes the JVM lists as loaded that the restore has not
    /// retransformed yet, and checks them.
    fn restore_loaded(&self, loaders: &JvmLoaders, restored: &mut Restored) {
        let Ok(classes) = self.env.loaded_classes() else {
            return;
        };
        // (class, internal name, defining loader)
        let mut chosen = Vec::new();
        {
            let mut touched = lock(&self.touched);
            for &class in classes.iter() {
                // SAFETY: live local references from GetLoadedClasses.
                let Ok(sig) = (unsafe { self.env.class_signature(class) }) else {
                    continue;
                };
                let Some(internal) = sig.strip_prefix('L').and_then(|s| s.strip_suffix(';')) else {
                    continue;
                };
                if !touched.has_name(internal) {
                    continue;
                }
                let Some(loader) = ffi::class_loader(&self.env, class) else {
                    continue;
                };
                match touched.get_mut(loaders, internal, loader) {
                    Some(t) if t.seen != 0 && !t.retransformed => {
                        t.retransformed = true;
                        chosen.push((class, internal.to_string(), loader));
                    }
                    _ => loaders.jni.delete_local(loader),
                }
            }
        }
        let retransformed: Vec<sys::jclass> = chosen.iter().map(|(class, _, _)| *class).collect();
        for (index, error) in self.retransform(&retransformed) {
            restored.problems.push(format!(
                "retransforming {} failed: {error}",
                select::dotted(&chosen[index].1)
            ));
        }
        let touched = lock(&self.touched);
        for (class, internal, loader) in &chosen {
            let Some(t) = touched.get(loaders, internal, *loader) else {
                continue;
            };
            restored.classes += 1;
            if t.restored == Some(t.seen) {
                restored.same_bytes += 1;
            } else {
                restored.problems.push(format!(
                    "{}: the bytes after restoring differ from before",
                    select::dotted(internal)
                ));
            }
            if let Some(before) = t.bytecodes_before {
                restored.bytecodes_checked += 1;
                if self.bytecode_hash(*class) == before {
                    restored.same_bytecodes += 1;
                } else {
                    restored.problems.push(format!(
                        "{}: method bytecode sizes differ from before the session",
                        select::dotted(internal)
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::HashSet;

    /// Loaders as numbers (0: the bootstrap loader); `collected` ones are gone.
    #[derive(Default)]
    struct Numbers {
        collected: HashSet<u32>,
        released: RefCell<Vec<u32>>,
    }

    impl Loaders for Numbers {
        type Held = u32;
        type Loader = u32;
        // Loaders 1 and 4 share a key.
        fn key(&self, loader: u32) -> i32 {
            (loader % 3) as i32
        }
        fn hold(&self, loader: u32) -> Option<u32> {
            Some(loader)
        }
        fn is(&self, held: u32, loader: u32) -> bool {
            held == loader && !self.collected.contains(&held)
        }
        fn collected(&self, held: u32) -> bool {
            self.collected.contains(&held)
        }
        fn release(&self, held: u32) {
            self.released.borrow_mut().push(held);
        }
    }

    #[test]
    fn classes_of_one_name_from_many_loaders_are_told_apart() {
        let mut loaders = Numbers::default();
        let mut classes = Classes::new();
        // A script's class, loaded anew by each run's loader with other bytes.
        for (loader, seen) in [(1, 11), (2, 22), (3, 33)] {
            classes.entry(&loaders, "Script1", loader).unwrap().seen = seen;
        }
        classes.entry(&loaders, "Other", 0).unwrap().seen = 7;
        for (loader, seen) in [(1, 11), (2, 22), (3, 33)] {
            assert_eq!(classes.get(&loaders, "Script1", loader).unwrap().seen, seen);
        }
        assert!(classes.get(&loaders, "Script1", 0).is_none());
        assert!(classes.get(&loaders, "Other", 1).is_none());
        assert_eq!(classes.get(&loaders, "Other", 0).unwrap().seen, 7);
        // Restoring hands each class its own bytes back.
        for (loader, seen) in [(3, 33), (1, 11), (2, 22)] {
            classes.entry(&loaders, "Script1", loader).unwrap().restored = Some(seen);
        }
        for loader in [1, 2, 3] {
            let t = classes.get(&loaders, "Script1", loader).unwrap();
            assert_eq!(t.restored, Some(t.seen));
        }
        // Loaders of one key are told apart.
        classes.entry(&loaders, "Script1", 4).unwrap().seen = 44;
        assert_eq!(classes.get(&loaders, "Script1", 4).unwrap().seen, 44);
        assert_eq!(classes.get(&loaders, "Script1", 1).unwrap().seen, 11);
        // The classes of collected loaders are forgotten at a sweep.
        loaders.collected.insert(1);
        classes.sweep(&loaders);
        assert_eq!(*loaders.released.borrow(), vec![1]);
        assert_eq!(classes.count, 4);
        assert!(classes.get(&loaders, "Script1", 1).is_none());
        assert_eq!(classes.get(&loaders, "Script1", 4).unwrap().seen, 44);
        classes.remove(&loaders, "Script1", 2);
        assert!(classes.get(&loaders, "Script1", 2).is_none());
        assert!(classes.has_name("Script1"));
        classes.release_all(&loaders);
        assert!(!classes.has_name("Other"));
        let mut released = loaders.released.borrow().clone();
        released.sort();
        assert_eq!(released, vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn unrestored_counts_instrumented_classes_of_live_loaders_not_retransformed() {
        let mut loaders = Numbers::default();
        let mut classes = Classes::new();
        for (loader, seen) in [(1, 11), (2, 22), (3, 33)] {
            classes.entry(&loaders, "Script1", loader).unwrap().seen = seen;
        }
        // Touched but not instrumented (the hook found nothing to probe).
        classes.entry(&loaders, "Plain", 1).unwrap();
        assert_eq!(classes.unrestored(&loaders), 3);
        classes.entry(&loaders, "Script1", 1).unwrap().retransformed = true;
        assert_eq!(classes.unrestored(&loaders), 2);
        // A collected loader's class is gone: nothing to restore.
        loaders.collected.insert(2);
        assert_eq!(classes.unrestored(&loaders), 1);
    }
}
