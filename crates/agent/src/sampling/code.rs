//! The code map: where the template interpreter is, which compiled methods (nmethods) are
//! installed and what each of them inlined, from JVMTI events on the agent's environment
//! while a sampler runs (CompiledMethodLoad/Unload and DynamicCodeGenerated, replayed at start
//! with `GenerateEvents`). The processing thread asks it whether each sampled Java frame is
//! interpreted, compiled or inlined, which `AsyncGetCallTrace` does not say.
//!
//! [`CodeMap::classify`] takes a sample's interrupted pc and Java frames (top first):
//! - The top physical frame is exact. A pc in the interpreter makes the top frame
//!   interpreted. A pc in an nmethod is looked up in the nmethod's debug information the way
//!   `AsyncGetCallTrace` does (the first recorded pc above it: HotSpot records the end of the
//!   region each scope covers): the scope's methods, innermost first, are the top frames, all
//!   inlined but the outermost, which is compiled. When the frames do not match the scope
//!   (the walk used other information, or the load event has not arrived yet), the heuristic
//!   below decides.
//! - Every other frame (and the top one when the pc is in the VM, a stub or a library) is
//!   an approximation from what is installed, root first: inlined if its caller is compiled
//!   or inlined and an installed nmethod inlines this method at the caller's bytecode index;
//!   else compiled if the method has an installed nmethod (OSR ones count); else
//!   interpreted. It is wrong for an activation that began in the interpreter before its
//!   method was compiled and still runs there (shown compiled), for a call that one
//!   nmethod of the caller inlines and the running one does not (shown inlined), and for
//!   code whose load event has not arrived yet (JDK 15+ posts them from the service thread,
//!   shortly after installing the code; shown interpreted).
//! - Native methods are native.
//!
//! Memory: per nmethod its range and method, one 8-byte entry per run of consecutive debug
//! pcs with the same method chain, each distinct method chain once, and each distinct inlined
//! call site once (also counted in a shared table). Inline information stops being kept
//! beyond [`MAX_INLINE_BYTES`] in total (those nmethods' frames fall back to the heuristic);
//! ranges and methods of every nmethod are always kept (about 120 bytes each). Measured:
//! javac compiling in a loop, 4,900 nmethods compiled with `DebugNonSafepoints`, 2.7 MiB of
//! inline information.

use std::collections::{BTreeMap, HashSet};
use std::ffi::{c_char, c_void, CStr};
use std::ops::Range;
use std::sync::{Mutex, MutexGuard};

use jtap_jvmti::sys::{self, cmlr};
// Keys are pointers and small integers, looked up for every frame of every sample.
use jtap_profile::FrameKind;
use rustc_hash::FxHashMap as HashMap;

use super::asgct::{CallFrame, NATIVE_BCI};
use super::recover::StubKind;

/// Most bytes of inline information the map keeps (see the module documentation).
pub const MAX_INLINE_BYTES: usize = 32 << 20;
/// Most debug pcs read from one nmethod's inline record.
const MAX_PCS: usize = 1 << 20;
/// Deepest inlining chain read at one pc (HotSpot's `MaxInlineLevel` is 15 by default).
const MAX_SCOPE_DEPTH: usize = 256;
/// Longest record chain followed in one `compile_info`.
const MAX_RECORDS: usize = 64;

/// A jmethodID as a number (HotSpot never frees them, so they identify methods for good).
type MethodId = usize;

/// A call the JIT inlined: `callee` called from `caller` at bytecode index `bci`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct CallSite {
    caller: MethodId,
    bci: i32,
    callee: MethodId,
}

/// One installed nmethod.
#[derive(Debug)]
pub struct Nmethod {
    start: usize,
    end: usize,
    method: MethodId,
    /// `(offset of the last debug pc of a run, index into scopes)`, sorted by offset.
    pcs: Box<[(u32, u32)]>,
    /// Distinct method chains at debug pcs, innermost first (outermost is `method`).
    scopes: Box<[Box<[MethodId]>]>,
    /// Distinct inlined call sites.
    sites: Box<[CallSite]>,
}

impl Nmethod {
    /// The method chain `AsyncGetCallTrace` uses at code offset `offset`: that of the first
    /// debug pc above it.
    fn scope_at(&self, offset: u32) -> Option<&[MethodId]> {
        let index = self.pcs.partition_point(|&(pc, _)| pc <= offset);
        let &(_, scope) = self.pcs.get(index)?;
        self.scopes.get(scope as usize).map(|s| &s[..])
    }

    /// Heap bytes of its inline information (approximate, including table overhead).
    fn inline_bytes(&self) -> usize {
        self.pcs.len() * std::mem::size_of::<(u32, u32)>()
            + self
                .scopes
                .iter()
                .map(|s| std::mem::size_of::<Box<[MethodId]>>() + s.len() * 8)
                .sum::<usize>()
            + self.sites.len() * 2 * (std::mem::size_of::<CallSite>() + 8)
    }

    /// Drops the inline information, keeping range and method.
    fn without_inline_info(self) -> Nmethod {
        Nmethod {
            pcs: Box::new([]),
            scopes: Box::new([]),
            sites: Box::new([]),
            ..self
        }
    }
}

/// Builds an [`Nmethod`] from the debug pcs of its CompiledMethodLoad.
pub struct NmethodBuilder {
    start: usize,
    end: usize,
    method: MethodId,
    pcs: Vec<(u32, u32)>,
    scopes: Vec<Box<[MethodId]>>,
    scope_index: HashMap<Box<[MethodId]>, u32>,
    sites: HashSet<CallSite>,
    /// The callers' bytecode indices at the last pc added.
    caller_bcis: Vec<i32>,
}

impl NmethodBuilder {
    /// An nmethod of `method` whose code is `[start, start + size)`.
    pub fn new(method: sys::jmethodID, start: usize, size: u32) -> NmethodBuilder {
        NmethodBuilder {
            start,
            end: start.saturating_add(size as usize),
            method: method as MethodId,
            pcs: Vec::new(),
            scopes: Vec::new(),
            scope_index: HashMap::default(),
            sites: HashSet::new(),
            caller_bcis: Vec::new(),
        }
    }

    /// Adds the scope of one debug pc: its methods and bytecode indices, innermost first.
    /// Pcs outside the code and empty or mismatched scopes are skipped.
    pub fn add_pc(&mut self, pc: usize, methods: &[MethodId], bcis: &[i32]) {
        if pc < self.start || pc > self.end || methods.is_empty() || methods.len() != bcis.len() {
            return;
        }
        let Ok(offset) = u32::try_from(pc - self.start) else {
            return;
        };
        // Neighbouring pcs mostly share their scope and call sites: skip the hashing then.
        let previous = self.pcs.last().map(|&(_, scope)| scope);
        let scope = match previous.filter(|&p| *self.scopes[p as usize] == *methods) {
            Some(scope) => scope,
            None => match self.scope_index.get(methods) {
                Some(&index) => index,
                None => {
                    let index = self.scopes.len() as u32;
                    self.scopes.push(methods.into());
                    self.scope_index.insert(methods.into(), index);
                    index
                }
            },
        };
        self.pcs.push((offset, scope));
        if previous == Some(scope) && self.caller_bcis == bcis[1..] {
            return;
        }
        self.caller_bcis.clear();
        self.caller_bcis.extend_from_slice(&bcis[1..]);
        for i in 1..methods.len() {
            self.sites.insert(CallSite {
                caller: methods[i],
                bci: bcis[i],
                callee: methods[i - 1],
            });
        }
    }

    /// The nmethod, keeping of each run of debug pcs with one scope only the last pc (the
    /// lookup takes the first pc above an offset, so that finds the same scope).
    pub fn build(mut self) -> Nmethod {
        self.pcs.sort_by_key(|&(offset, _)| offset);
        let pcs: Vec<(u32, u32)> = self
            .pcs
            .iter()
            .enumerate()
            .filter(|&(i, &(_, scope))| self.pcs.get(i + 1).is_none_or(|next| next.1 != scope))
            .map(|(_, &pc)| pc)
            .collect();
        Nmethod {
            start: self.start,
            end: self.end,
            method: self.method,
            pcs: pcs.into_boxed_slice(),
            scopes: self.scopes.into_boxed_slice(),
            sites: self.sites.into_iter().collect(),
        }
    }
}

/// Reads a CompiledMethodLoad's `compile_info` records into `builder` (capped in records,
/// pcs and depth; null pointers and negative counts skipped).
///
/// # Safety
/// `compile_info` is null or the `compile_info` argument of a CompiledMethodLoad callback
/// that is still running.
pub unsafe fn read_compile_info(compile_info: *const c_void, builder: &mut NmethodBuilder) {
    let mut methods: Vec<MethodId> = Vec::new();
    let mut record = compile_info as *const cmlr::jvmtiCompiledMethodLoadRecordHeader;
    for _ in 0..MAX_RECORDS {
        if record.is_null() {
            return;
        }
        // SAFETY: a non-null record pointer of the chain HotSpot built for this callback.
        let header = unsafe { *record };
        if header.kind == cmlr::JVMTI_CMLR_INLINE_INFO {
            // SAFETY: an inline-info record starts with its header.
            let inline = unsafe { *(record as *const cmlr::jvmtiCompiledMethodLoadInlineRecord) };
            let count = usize::try_from(inline.numpcs).unwrap_or(0).min(MAX_PCS);
            if !inline.pcinfo.is_null() {
                // SAFETY: HotSpot allocated `numpcs` PCStackInfo entries at `pcinfo`.
                let infos = unsafe { std::slice::from_raw_parts(inline.pcinfo, count) };
                for info in infos {
                    let depth = usize::try_from(info.numstackframes).unwrap_or(0);
                    if depth == 0
                        || depth > MAX_SCOPE_DEPTH
                        || info.methods.is_null()
                        || info.bcis.is_null()
                    {
                        continue;
                    }
                    // SAFETY: HotSpot allocated `numstackframes` methods and bcis.
                    let (ids, bcis) = unsafe {
                        (
                            std::slice::from_raw_parts(info.methods, depth),
                            std::slice::from_raw_parts(info.bcis, depth),
                        )
                    };
                    methods.clear();
                    methods.extend(ids.iter().map(|&m| m as MethodId));
                    builder.add_pc(info.pc as usize, &methods, bcis);
                }
            }
        }
        record = header.next;
    }
}

/// The map.
#[derive(Debug, Default)]
pub struct CodeMap {
    /// Installed nmethods by start address.
    nmethods: BTreeMap<usize, Nmethod>,
    /// The template interpreter's code.
    interpreter: Option<Range<usize>>,
    /// Other code the VM generated (stubs, adapters, …) by start address: end and name.
    stubs: BTreeMap<usize, (usize, Box<str>)>,
    /// Installed nmethods per method.
    compiled: HashMap<MethodId, u32>,
    /// Installed nmethods per inlined call site.
    inlined: HashMap<CallSite, u32>,
    /// Inline information held, in bytes (see [`Nmethod::inline_bytes`]).
    inline_bytes: usize,
    /// Nmethods kept without inline information because of [`MAX_INLINE_BYTES`].
    over_budget: u64,
}

impl CodeMap {
    /// Records an installed nmethod, replacing any whose code it overlaps (freed code the
    /// unload event of which has not arrived yet).
    pub fn insert(&mut self, nmethod: Nmethod) {
        if nmethod.end <= nmethod.start {
            return;
        }
        let mut stale: Vec<usize> = self
            .nmethods
            .range(nmethod.start..nmethod.end)
            .map(|(&start, _)| start)
            .collect();
        if let Some((&start, before)) = self.nmethods.range(..nmethod.start).next_back() {
            if before.end > nmethod.start {
                stale.push(start);
            }
        }
        for start in stale {
            if let Some(old) = self.nmethods.remove(&start) {
                self.forget(&old);
            }
        }
        let mut nmethod = nmethod;
        if self.inline_bytes + nmethod.inline_bytes() > MAX_INLINE_BYTES {
            nmethod = nmethod.without_inline_info();
            self.over_budget += 1;
        }
        self.inline_bytes += nmethod.inline_bytes();
        super::recover::STUBS.note_code(nmethod.start, nmethod.end);
        *self.compiled.entry(nmethod.method).or_default() += 1;
        for site in nmethod.sites.iter() {
            *self.inlined.entry(*site).or_default() += 1;
        }
        self.nmethods.insert(nmethod.start, nmethod);
    }

    /// Forgets the nmethod of `method` at `start` (CompiledMethodUnload). An nmethod of another
    /// method there already replaced it.
    pub fn remove(&mut self, method: sys::jmethodID, start: usize) {
        if self
            .nmethods
            .get(&start)
            .is_some_and(|n| n.method == method as MethodId)
        {
            if let Some(old) = self.nmethods.remove(&start) {
                self.forget(&old);
            }
        }
    }

    fn forget(&mut self, old: &Nmethod) {
        self.inline_bytes -= old.inline_bytes();
        decrement(&mut self.compiled, &old.method);
        for site in old.sites.iter() {
            decrement(&mut self.inlined, site);
        }
    }

    /// Records code the VM generated (DynamicCodeGenerated): the interpreter, and every
    /// other stub by name, for telling where samples that could not be walked were, and by
    /// kind, for walking them.
    pub fn stub(&mut self, name: &[u8], start: usize, size: u32, kind: StubKind) {
        if size == 0 {
            return;
        }
        let end = start.saturating_add(size as usize);
        let table = &super::recover::STUBS;
        if name == b"Interpreter" {
            self.interpreter = Some(start..end);
            table.set_interpreter(start, end);
        }
        let name = String::from_utf8_lossy(name);
        table.add_stub(start, end, kind);
        self.stubs.insert(start, (end, name.into()));
    }

    /// What code `pc` is in: a stub the VM generated (by its name, e.g. `vtable stub`), an
    /// nmethod (its method and offset), or neither.
    pub fn locate(&self, pc: usize) -> Location<'_> {
        if let Some((&start, nmethod)) = self.nmethods.range(..=pc).next_back() {
            if pc < nmethod.end {
                return Location::Nmethod {
                    method: nmethod.method as sys::jmethodID,
                    offset: pc - start,
                };
            }
        }
        // Blobs nest (the interpreter holds codelets): the innermost, latest start wins.
        for (_, (end, name)) in self.stubs.range(..=pc).rev().take(64) {
            if pc < *end {
                return Location::Stub(name);
            }
        }
        Location::Unknown
    }

    /// Installed nmethods, bytes of inline information held, and nmethods kept without
    /// inline information.
    pub fn counts(&self) -> (usize, usize, u64) {
        (self.nmethods.len(), self.inline_bytes, self.over_budget)
    }

    /// Whether the interpreter's code is known.
    pub fn knows_interpreter(&self) -> bool {
        self.interpreter.is_some()
    }

    /// The kinds of a sample's Java frames (`frames` top first, as `AsyncGetCallTrace` wrote
    /// them; `pc` where the thread was interrupted), into `kinds` (see the module
    /// documentation).
    pub fn classify(&self, pc: usize, frames: &[CallFrame], kinds: &mut Vec<FrameKind>) {
        kinds.clear();
        kinds.resize(frames.len(), FrameKind::Compiled);
        let exact = self.classify_top(pc, frames, kinds);
        for i in (exact..frames.len()).rev() {
            let frame = &frames[i];
            kinds[i] = if frame.bci == NATIVE_BCI {
                FrameKind::Native
            } else if i + 1 < frames.len()
                && matches!(kinds[i + 1], FrameKind::Compiled | FrameKind::Inlined)
                && self.inlined.contains_key(&CallSite {
                    caller: frames[i + 1].method as MethodId,
                    bci: frames[i + 1].bci,
                    callee: frame.method as MethodId,
                })
            {
                FrameKind::Inlined
            } else if self.compiled.contains_key(&(frame.method as MethodId)) {
                FrameKind::Compiled
            } else {
                FrameKind::Interpreted
            };
        }
    }

    /// Classifies the top physical frame's Java frames from the pc; returns how many.
    fn classify_top(&self, pc: usize, frames: &[CallFrame], kinds: &mut [FrameKind]) -> usize {
        let Some(top) = frames.first() else {
            return 0;
        };
        if top.bci == NATIVE_BCI {
            return 0;
        }
        if self.interpreter.as_ref().is_some_and(|r| r.contains(&pc)) {
            kinds[0] = FrameKind::Interpreted;
            return 1;
        }
        let Some((_, nmethod)) = self.nmethods.range(..=pc).next_back() else {
            return 0;
        };
        if pc >= nmethod.end {
            return 0;
        }
        let Some(scope) = nmethod.scope_at((pc - nmethod.start) as u32) else {
            return 0;
        };
        let depth = scope.len();
        let matches = depth <= frames.len()
            && scope.last() == Some(&nmethod.method)
            && scope
                .iter()
                .zip(frames)
                .all(|(&method, frame)| method == frame.method as MethodId);
        if !matches {
            return 0;
        }
        kinds[..depth - 1].fill(FrameKind::Inlined);
        kinds[depth - 1] = FrameKind::Compiled;
        depth
    }
}

fn decrement<K: std::hash::Hash + Eq>(counts: &mut HashMap<K, u32>, key: &K) {
    if let Some(count) = counts.get_mut(key) {
        *count -= 1;
        if *count == 0 {
            counts.remove(key);
        }
    }
}

/// Where a pc is (see [`CodeMap::locate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location<'a> {
    /// In code the VM generated, named as in DynamicCodeGenerated.
    Stub(&'a str),
    /// In the nmethod of `method`, `offset` bytes into its code.
    Nmethod {
        /// The compiled method.
        method: sys::jmethodID,
        /// Bytes from the start of its code.
        offset: usize,
    },
    /// Nowhere the map knows.
    Unknown,
}

/// The map of the running sampler (None while none runs).
static MAP: Mutex<Option<CodeMap>> = Mutex::new(None);

/// The map, locked. Callers keep it only for work of their own (never across JVM calls: a
/// VM thread may post code events while other threads wait for it).
pub fn map() -> MutexGuard<'static, Option<CodeMap>> {
    MAP.lock().unwrap_or_else(|e| e.into_inner())
}

/// CompiledMethodLoad: the new nmethod, read outside the lock.
///
/// # Safety
/// The arguments are those of a CompiledMethodLoad callback that is still running.
pub unsafe fn compiled_method_load(
    env: &jtap_jvmti::Env,
    method: sys::jmethodID,
    code_size: sys::jint,
    code_address: *const c_void,
    compile_info: *const c_void,
) {
    let Ok(size) = u32::try_from(code_size) else {
        return;
    };
    if code_address.is_null() || size == 0 || map().is_none() {
        return;
    }
    // SAFETY: the caller's contract: a method whose code was just installed.
    let trampoline = unsafe { is_method_handle_intrinsic(env, method) };
    let mut builder = NmethodBuilder::new(method, code_address as usize, size);
    // SAFETY: the caller's contract.
    unsafe { read_compile_info(compile_info, &mut builder) };
    let nmethod = builder.build();
    if let Some(map) = map().as_mut() {
        if trampoline {
            super::recover::STUBS.add_stub(nmethod.start, nmethod.end, StubKind::Frameless);
        }
        map.insert(nmethod);
    }
}

/// Whether `method` is one of `MethodHandle`'s signature-polymorphic natives
/// (`invokeBasic`, `linkToStatic`, …), whose nmethods the VM generates as frameless
/// trampolines: a sample anywhere in them has its return address at `[sp]`.
///
/// # Safety
/// `method` is a valid jmethodID.
unsafe fn is_method_handle_intrinsic(env: &jtap_jvmti::Env, method: sys::jmethodID) -> bool {
    const ACC_NATIVE: i32 = 0x0100;
    // They are native methods: every other compiled method is told apart without a name.
    // SAFETY: the caller's contract.
    if unsafe { env.method_modifiers(method) }.map_or(true, |m| m & ACC_NATIVE == 0) {
        return false;
    }
    // SAFETY: the caller's contract.
    let Ok((name, _)) = (unsafe { env.method_name(method) }) else {
        return false;
    };
    if name != "invokeBasic" && !name.starts_with("linkTo") {
        return false;
    }
    // SAFETY: the caller's contract; the class is a local reference of this callback.
    unsafe { env.method_declaring_class(method) }
        .and_then(|class| unsafe { env.class_signature(class) })
        .is_ok_and(|signature| signature == "Ljava/lang/invoke/MethodHandle;")
}

/// Whether DynamicCodeGenerated can be enabled in the HotSpot of `java.vm.version` `version`
/// ("11.0.13+8", "25+36-LTS") without risking its life. Before the fix of JDK-8212155 (JDK 17,
/// and 11.0.29), a thread making a vtable or itable stub just as the event is enabled finds no
/// collector for it, which it set up only if the event was enabled already, and a `guarantee`
/// ends the JVM. A version that does not parse counts as one of those.
pub fn stub_events_are_safe(version: &str) -> bool {
    let numbers: Vec<u32> = version
        .split(|c: char| !c.is_ascii_digit() && c != '.')
        .next()
        .unwrap_or("")
        .split('.')
        .map_while(|n| n.parse().ok())
        .collect();
    match numbers.as_slice() {
        [feature, ..] if *feature >= 17 => true,
        [11, _, update, ..] => *update >= 29,
        _ => false,
    }
}

/// DynamicCodeGenerated.
///
/// # Safety
/// `name`, `address` and `length` are those of a DynamicCodeGenerated callback that is still
/// running (`name` NUL-terminated or null).
pub unsafe fn dynamic_code_generated(name: *const c_char, address: *const c_void, length: i32) {
    let Ok(size) = u32::try_from(length) else {
        return;
    };
    if name.is_null() || address.is_null() {
        return;
    }
    // SAFETY: the caller's contract.
    let name = unsafe { CStr::from_ptr(name) };
    if size == 0 {
        return;
    }
    // SAFETY: the caller's contract: `size` > 0 bytes of the VM's code at `address`.
    let code = unsafe { std::slice::from_raw_parts(address as *const u8, size.min(8) as usize) };
    record_stub(name.to_bytes(), address as usize, size, code);
}

/// Records a stub the VM generated, named `name`, whose `size` bytes of code at `start` begin
/// with `first`, unless the map knows it already; whether it was new.
pub fn record_stub(name: &[u8], start: usize, size: u32, first: &[u8]) -> bool {
    let kind = StubKind::of(&String::from_utf8_lossy(name), first);
    let mut guard = map();
    let Some(map) = guard.as_mut() else {
        return false;
    };
    let end = start.saturating_add(size as usize);
    if map
        .stubs
        .get(&start)
        .is_some_and(|(known, _)| *known == end)
    {
        return false;
    }
    map.stub(name, start, size, kind);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stub_events_wait_for_the_fix_of_jdk_8212155() {
        for safe in [
            "17.0.13+11",
            "21.0.5+11-LTS",
            "25+36-LTS",
            "26-ea",
            "11.0.29+7",
        ] {
            assert!(stub_events_are_safe(safe), "{safe}");
        }
        for unsafe_ in [
            "11.0.13+8",
            "11.0.28",
            "11",
            "16.0.2+7",
            "12-ea",
            "",
            "garbage",
        ] {
            assert!(!stub_events_are_safe(unsafe_), "{unsafe_}");
        }
    }

    fn id(n: usize) -> sys::jmethodID {
        n as sys::jmethodID
    }

    fn frame(method: usize, bci: i32) -> CallFrame {
        CallFrame::new(id(method), bci)
    }

    fn kinds(map: &CodeMap, pc: usize, frames: &[CallFrame]) -> Vec<FrameKind> {
        let mut kinds = Vec::new();
        map.classify(pc, frames, &mut kinds);
        kinds
    }

    use FrameKind::{Compiled, Inlined, Interpreted, Native};

    /// Method 10 compiled at 0x1000..0x1100, inlining 11 (called at bci 5) up to pc
    /// 0x1040 and nothing after it up to 0x1080.
    fn map_with_one_nmethod() -> CodeMap {
        let mut builder = NmethodBuilder::new(id(10), 0x1000, 0x100);
        builder.add_pc(0x1010, &[11, 10], &[2, 5]);
        builder.add_pc(0x1040, &[11, 10], &[3, 5]);
        builder.add_pc(0x1080, &[10], &[7]);
        builder.add_pc(0x2000, &[12], &[0]); // outside the code: skipped
        let mut map = CodeMap::default();
        map.insert(builder.build());
        map.stub(b"Interpreter", 0x8000, 0x1000, StubKind::Other);
        map
    }

    #[test]
    fn runs_of_one_scope_keep_their_last_pc_and_lookup_takes_the_first_pc_above() {
        let map = map_with_one_nmethod();
        let nmethod = &map.nmethods[&0x1000];
        assert_eq!(&nmethod.pcs[..], &[(0x40, 0), (0x80, 1)]);
        assert_eq!(nmethod.scope_at(0x00), Some(&[11, 10][..]));
        assert_eq!(nmethod.scope_at(0x3f), Some(&[11, 10][..]));
        // A recorded pc ends its region: the pc itself belongs to the next one.
        assert_eq!(nmethod.scope_at(0x40), Some(&[10][..]));
        assert_eq!(nmethod.scope_at(0x7f), Some(&[10][..]));
        assert_eq!(nmethod.scope_at(0x80), None);
    }

    #[test]
    fn the_top_physical_frame_comes_from_the_pc() {
        let map = map_with_one_nmethod();
        // Interpreted caller 20 calls 10, which inlined 11.
        let stack = [frame(11, 2), frame(10, 5), frame(20, 9)];
        assert_eq!(
            kinds(&map, 0x1020, &stack),
            [Inlined, Compiled, Interpreted]
        );
        // In the interpreter: the top frame is interpreted whatever is installed.
        let stack = [frame(10, 7), frame(20, 9)];
        assert_eq!(kinds(&map, 0x8010, &stack), [Interpreted, Interpreted]);
        // Past the inlined region, 10 is the top frame.
        assert_eq!(kinds(&map, 0x1050, &stack), [Compiled, Interpreted]);
    }

    #[test]
    fn frames_that_disagree_with_the_pc_fall_back_to_what_is_installed() {
        let map = map_with_one_nmethod();
        // The scope at 0x1020 is [11, 10] but the walk says 10 is on top: heuristic.
        let stack = [frame(10, 5), frame(20, 9)];
        assert_eq!(kinds(&map, 0x1020, &stack), [Compiled, Interpreted]);
        // A pc in the VM: 11 is inlined into compiled 10 at bci 5, not at bci 6.
        let stack = [frame(11, 2), frame(10, 5), frame(20, 9)];
        assert_eq!(
            kinds(&map, 0x9_0000, &stack),
            [Inlined, Compiled, Interpreted]
        );
        let stack = [frame(11, 2), frame(10, 6), frame(20, 9)];
        assert_eq!(
            kinds(&map, 0x9_0000, &stack),
            [Interpreted, Compiled, Interpreted]
        );
        // A callee of an interpreted frame is never inlined; native methods stay native.
        let stack = [frame(30, NATIVE_BCI), frame(11, 2), frame(20, 5)];
        assert_eq!(
            kinds(&map, 0x9_0000, &stack),
            [Native, Interpreted, Interpreted]
        );
    }

    #[test]
    fn unloading_and_overlapping_loads_keep_the_tables_consistent() {
        let mut map = map_with_one_nmethod();
        // Method 10 recompiled at an address inside the old code, before its unload arrives.
        let mut builder = NmethodBuilder::new(id(10), 0x1080, 0x100);
        builder.add_pc(0x1090, &[10], &[1]);
        map.insert(builder.build());
        assert_eq!(map.counts().0, 1);
        assert!(map.inlined.is_empty());
        assert_eq!(map.compiled.get(&10), Some(&1));
        // The late unload of the old code does not remove the new one.
        map.remove(id(10), 0x1000);
        assert_eq!(map.counts().0, 1);
        // Its own unload does.
        map.remove(id(10), 0x1080);
        assert_eq!(map.counts(), (0, 0, 0));
        assert!(map.compiled.is_empty());
        assert_eq!(map.inline_bytes, 0);
    }

    #[test]
    fn the_inline_budget_caps_memory_but_keeps_ranges() {
        let mut map = CodeMap::default();
        let mut start = 0x10_0000;
        while map.over_budget == 0 {
            let mut builder = NmethodBuilder::new(id(start), start, 0x10000);
            for pc in 0..0x1000 {
                builder.add_pc(start + pc * 16, &[pc, start], &[1, pc as i32]);
            }
            map.insert(builder.build());
            start += 0x10000;
        }
        assert!(map.inline_bytes <= MAX_INLINE_BYTES);
        let last = &map.nmethods[&(start - 0x10000)];
        assert!(last.pcs.is_empty() && last.sites.is_empty());
        let stack = [frame(start - 0x10000, 3)];
        assert_eq!(kinds(&map, start - 0x10000 + 8, &stack), [Compiled]);
    }

    #[test]
    fn compile_info_records_are_read_through_their_chain() {
        assert_eq!(
            std::mem::size_of::<cmlr::jvmtiCompiledMethodLoadRecordHeader>(),
            24
        );
        assert_eq!(std::mem::size_of::<cmlr::PCStackInfo>(), 32);
        assert_eq!(
            std::mem::size_of::<cmlr::jvmtiCompiledMethodLoadInlineRecord>(),
            40
        );
        let mut methods = [id(11), id(10)];
        let mut bcis = [4, 8];
        let mut infos = [
            cmlr::PCStackInfo {
                pc: 0x1010 as *mut c_void,
                numstackframes: 2,
                methods: methods.as_mut_ptr(),
                bcis: bcis.as_mut_ptr(),
            },
            cmlr::PCStackInfo {
                pc: 0x1020 as *mut c_void,
                numstackframes: 2,
                methods: std::ptr::null_mut(),
                bcis: bcis.as_mut_ptr(),
            },
        ];
        let mut inline = cmlr::jvmtiCompiledMethodLoadInlineRecord {
            header: cmlr::jvmtiCompiledMethodLoadRecordHeader {
                kind: cmlr::JVMTI_CMLR_INLINE_INFO,
                majorinfoversion: 1,
                minorinfoversion: 0,
                next: std::ptr::null_mut(),
            },
            numpcs: 2,
            pcinfo: infos.as_mut_ptr(),
        };
        let dummy = cmlr::jvmtiCompiledMethodLoadRecordHeader {
            kind: 1,
            majorinfoversion: 1,
            minorinfoversion: 0,
            next: &mut inline.header,
        };
        let mut builder = NmethodBuilder::new(id(10), 0x1000, 0x100);
        // SAFETY: a well-formed chain of records that outlives the call.
        unsafe { read_compile_info(&dummy as *const _ as *const c_void, &mut builder) };
        let nmethod = builder.build();
        assert_eq!(&nmethod.pcs[..], &[(0x10, 0)]);
        assert_eq!(
            &nmethod.sites[..],
            &[CallSite {
                caller: 10,
                bci: 8,
                callee: 11
            }]
        );
    }
}
