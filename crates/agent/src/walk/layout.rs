//! What the walker reads, where: offsets of HotSpot's fields, resolved once from the VM's own
//! tables ([`VmStructs`]) for HotSpot 11–25 on x86-64, plus the few x86-64 frame slots the tables
//! do not carry. Each JDK family that moved a structure gets its own variant
//! ([`BlobKind`], [`CodeStart`], [`DebugInfo`]), chosen by which fields the tables describe.

use super::structs::VmStructs;

/// Newest HotSpot whose structures the walker knows (JDK 26 makes jmethodIDs opaque numbers).
pub const NEWEST_JDK: u32 = 25;
/// Oldest.
pub const OLDEST_JDK: u32 = 11;

/// x86-64 interpreter frame slots, in words from the frame pointer (HotSpot's `frame_x86.hpp`).
pub const INTERPRETER_METHOD_SLOT: isize = -3;
/// The bytecode pointer's slot.
pub const INTERPRETER_BCP_SLOT: isize = -8;
/// The caller's stack pointer before the interpreter extended it.
pub const INTERPRETER_SENDER_SP_SLOT: isize = -1;
/// The first local variable's (relative to the frame pointer, in words, since JDK 21).
pub const INTERPRETER_LOCALS_SLOT: isize = -7;

/// `JVM_ACC_NATIVE` in a method's access flags.
pub const ACC_NATIVE: u16 = 0x0100;

/// How to tell an nmethod from other code blobs.
#[derive(Debug, Clone, Copy)]
pub enum BlobKind {
    /// JDK 23+: a `CodeBlobKind` byte at this offset; nmethods have the given value.
    Field { offset: usize, nmethod: u8 },
    /// Earlier: the blob's name (a `const char*` at this offset) is `"nmethod"` (or
    /// `"native nmethod"` for a native method's wrapper).
    Name(usize),
}

/// Where a blob's instructions begin.
#[derive(Debug, Clone, Copy)]
pub enum CodeStart {
    /// An address field (JDK 11–21 `_code_begin`).
    Address(usize),
    /// An `int` offset from the blob (JDK 23+ `_code_offset`).
    Offset(usize),
}

/// Where an nmethod's debug information (pc descriptors, scopes, metadata) lives.
#[derive(Debug, Clone, Copy)]
pub enum DebugInfo {
    /// JDK 11–21: inside the nmethod's blob. `scopes_data` holds an address; the others hold
    /// `int` offsets from the nmethod: pc descriptors from `pcs` up to `pcs_end`, metadata
    /// from `metadata` up to the scopes.
    InBlob {
        scopes_data: usize,
        pcs: usize,
        pcs_end: usize,
        metadata: usize,
    },
    /// JDK 25: pc descriptors and scopes in the immutable data (an address field, then `int`
    /// offsets into it), metadata in the mutable data after the relocations.
    Apart {
        immutable_data: usize,
        pcs: usize,
        scopes: usize,
        mutable_data: usize,
        relocation_size: usize,
        mutable_data_size: usize,
    },
}

/// Every offset the walker uses.
#[derive(Debug, Clone)]
pub struct Layout {
    /// `JavaThread::_anchor`, `_stack_base`, `_stack_size`, `_thread_state`.
    pub thread_anchor: usize,
    pub thread_state: usize,
    pub thread_stack_base: usize,
    pub thread_stack_size: usize,
    /// `JavaFrameAnchor::_last_Java_sp`, `_last_Java_pc`, `_last_Java_fp`.
    pub anchor_sp: usize,
    pub anchor_pc: usize,
    pub anchor_fp: usize,
    /// `JavaCallWrapper::_anchor`: the caller's anchor, kept by a Java call from the VM.
    pub call_wrapper_anchor: usize,
    /// Slot of the `JavaCallWrapper*` in the call stub's frame, in words from its fp.
    pub entry_wrapper_slot: isize,
    /// Address of the static `CodeCache::_heaps` (a `GrowableArray<CodeHeap*>*`), and the
    /// array's `_len` and `_data`.
    pub code_heaps: usize,
    /// Addresses of the statics `CodeCache::_low_bound` and `_high_bound`.
    pub code_low: usize,
    pub code_high: usize,
    pub array_len: usize,
    pub array_data: usize,
    /// `CodeHeap::_memory` and `_segmap` (VirtualSpaces), `_log2_segment_size`.
    pub heap_memory: usize,
    pub heap_segmap: usize,
    pub heap_log2_segment_size: usize,
    /// `VirtualSpace::_low_boundary` and `_high`.
    pub space_low: usize,
    pub space_high: usize,
    /// `sizeof(HeapBlock)`, `HeapBlock::Header::_used` and `_length` (in segments).
    pub block_size: usize,
    pub block_used: usize,
    pub block_length: Option<usize>,
    /// Code blobs.
    pub blob_kind: BlobKind,
    pub blob_frame_size: usize,
    pub blob_code: CodeStart,
    /// `CodeBlob::_code_end`, an address (JDK 11–21).
    pub blob_code_end: Option<usize>,
    /// `nmethod::_method` (or `CompiledMethod::_method`), and its debug information.
    pub nmethod_method: usize,
    /// `nmethod::_compile_id`, which tells an nmethod from a later one at the same address.
    pub nmethod_compile_id: Option<usize>,
    pub debug: DebugInfo,
    /// Thread states in which a thread's last Java frame is recorded and its frames whole
    /// (in native code, in the VM, blocked); in Java code or in transition the walk refuses.
    pub walkable_states: [i32; 3],
    /// `_thread_in_Java`: the thread runs Java code; a signal's registers start its walk.
    pub in_java: i32,
    /// Compressed debug streams exclude the zero byte (UNSIGNED5, JDK 20+).
    pub unsigned5: bool,
    /// Address of the static `AbstractInterpreter::_code` (a `StubQueue*`), and the queue's
    /// `_stub_buffer` and `_buffer_limit`.
    pub interpreter: usize,
    pub queue_buffer: usize,
    pub queue_limit: usize,
    /// Address of the static `StubRoutines::_call_stub_return_address`.
    pub call_stub_return: usize,
    /// `Method::_constMethod`, `_access_flags`.
    pub method_const: usize,
    pub method_flags: usize,
    /// `ConstMethod::_constants`, `_method_idnum`, `_code_size`, `sizeof(ConstMethod)`
    /// (bytecodes follow).
    pub const_method_pool: usize,
    pub const_method_idnum: usize,
    pub const_method_code_size: usize,
    pub const_method_size: usize,
    /// `ConstantPool::_pool_holder`, `InstanceKlass::_methods_jmethod_ids`.
    pub pool_holder: usize,
    pub jmethod_ids: usize,
    /// Address of the static `ContinuationEntry::_return_pc` (JDK 21+): a virtual thread's
    /// frames end where a frame returns there (set by [`super::Walker::resolve`] from the
    /// symbol table where the VM's tables lack it).
    pub continuation_return: Option<usize>,
    /// `JavaThread::_cont_entry`: the innermost continuation's entry (JDK 25 describes it).
    pub thread_continuation_entry: Option<usize>,
    /// Address of the static `StubCodeDesc::_list`, the VM's list of named stubs (set by
    /// [`super::Walker::resolve`] from the symbol table).
    pub stub_descriptors: Option<usize>,
    /// `JavaThread::_saved_exception_pc`: where the VM's signal handler found the thread when
    /// it sent it on to a handler stub (a safepoint poll that trapped, an implicit exception).
    pub thread_saved_exception_pc: Option<usize>,
}

impl Layout {
    /// Resolves the layout of a HotSpot of major version `jdk`, or says what it lacks.
    pub fn resolve(structs: &VmStructs, jdk: u32) -> Result<Layout, String> {
        if !(OLDEST_JDK..=NEWEST_JDK).contains(&jdk) {
            return Err(format!(
                "JDK {jdk} is outside the JDKs whose structures the walker knows ({OLDEST_JDK}–{NEWEST_JDK})"
            ));
        }
        let s = structs;
        let blob_kind = if s.has("CodeBlob", "_kind") {
            BlobKind::Field {
                offset: s.offset(&["CodeBlob"], "_kind")?,
                nmethod: s
                    .constant("CodeBlobKind::Nmethod")
                    .and_then(|k| u8::try_from(k).ok())
                    .ok_or("the JVM does not describe CodeBlobKind::Nmethod")?,
            }
        } else {
            BlobKind::Name(s.offset(&["CodeBlob"], "_name")?)
        };
        let blob_code = if s.has("CodeBlob", "_code_offset") {
            CodeStart::Offset(s.offset(&["CodeBlob"], "_code_offset")?)
        } else {
            CodeStart::Address(s.offset(&["CodeBlob"], "_code_begin")?)
        };
        let debug = if s.has("nmethod", "_immutable_data") {
            DebugInfo::Apart {
                immutable_data: s.offset(&["nmethod"], "_immutable_data")?,
                pcs: s.offset(&["nmethod"], "_scopes_pcs_offset")?,
                scopes: s.offset(&["nmethod"], "_scopes_data_offset")?,
                mutable_data: s.offset(&["CodeBlob"], "_mutable_data")?,
                relocation_size: s.offset(&["CodeBlob"], "_relocation_size")?,
                mutable_data_size: s.offset(&["CodeBlob"], "_mutable_data_size")?,
            }
        } else {
            DebugInfo::InBlob {
                scopes_data: s.offset(&["CompiledMethod", "nmethod"], "_scopes_data_begin")?,
                pcs: s.offset(&["nmethod"], "_scopes_pcs_offset")?,
                pcs_end: s.offset(&["nmethod"], "_dependencies_offset")?,
                metadata: s.offset(&["nmethod"], "_metadata_offset")?,
            }
        };
        let array = ["GrowableArrayBase", "GenericGrowableArray"];
        Ok(Layout {
            thread_anchor: s.offset(&["JavaThread"], "_anchor")?,
            thread_state: s.offset(&["JavaThread"], "_thread_state")?,
            walkable_states: ["_thread_in_native", "_thread_in_vm", "_thread_blocked"]
                .map(|state| s.constant(state).unwrap_or(-1) as i32),
            in_java: s
                .constant("_thread_in_Java")
                .ok_or("the JVM does not describe _thread_in_Java")? as i32,
            thread_stack_base: s.offset(&["JavaThread", "Thread"], "_stack_base")?,
            thread_stack_size: s.offset(&["JavaThread", "Thread"], "_stack_size")?,
            anchor_sp: s.offset(&["JavaFrameAnchor"], "_last_Java_sp")?,
            anchor_pc: s.offset(&["JavaFrameAnchor"], "_last_Java_pc")?,
            anchor_fp: s.offset(&["JavaFrameAnchor"], "_last_Java_fp")?,
            call_wrapper_anchor: s.offset(&["JavaCallWrapper"], "_anchor")?,
            entry_wrapper_slot: s
                .constant("frame::entry_frame_call_wrapper_offset")
                .unwrap_or(-6) as isize,
            code_heaps: s.address("CodeCache", "_heaps")?,
            code_low: s.address("CodeCache", "_low_bound")?,
            code_high: s.address("CodeCache", "_high_bound")?,
            array_len: s.offset(&array, "_len")?,
            array_data: s.offset(&["GrowableArray<int>"], "_data")?,
            heap_memory: s.offset(&["CodeHeap"], "_memory")?,
            heap_segmap: s.offset(&["CodeHeap"], "_segmap")?,
            heap_log2_segment_size: s.offset(&["CodeHeap"], "_log2_segment_size")?,
            space_low: s.offset(&["VirtualSpace"], "_low_boundary")?,
            space_high: s.offset(&["VirtualSpace"], "_high")?,
            block_size: s.size("HeapBlock")?,
            block_used: s.offset(&["HeapBlock::Header"], "_used")?,
            block_length: s.offset(&["HeapBlock::Header"], "_length").ok(),
            blob_kind,
            blob_frame_size: s.offset(&["CodeBlob"], "_frame_size")?,
            blob_code,
            blob_code_end: s.offset(&["CodeBlob"], "_code_end").ok(),
            nmethod_method: s.offset(&["nmethod", "CompiledMethod"], "_method")?,
            nmethod_compile_id: s.offset(&["nmethod", "CompiledMethod"], "_compile_id").ok(),
            debug,
            unsigned5: jdk >= 20,
            interpreter: s.address("AbstractInterpreter", "_code")?,
            queue_buffer: s.offset(&["StubQueue"], "_stub_buffer")?,
            queue_limit: s.offset(&["StubQueue"], "_buffer_limit")?,
            call_stub_return: s.address("StubRoutines", "_call_stub_return_address")?,
            method_const: s.offset(&["Method"], "_constMethod")?,
            method_flags: s.offset(&["Method"], "_access_flags")?,
            const_method_pool: s.offset(&["ConstMethod"], "_constants")?,
            const_method_idnum: s.offset(&["ConstMethod"], "_method_idnum")?,
            const_method_code_size: s.offset(&["ConstMethod"], "_code_size")?,
            const_method_size: s.size("ConstMethod")?,
            pool_holder: s.offset(&["ConstantPool"], "_pool_holder")?,
            jmethod_ids: s.offset(&["InstanceKlass"], "_methods_jmethod_ids")?,
            continuation_return: s.address("ContinuationEntry", "_return_pc").ok(),
            thread_continuation_entry: s.offset(&["JavaThread"], "_cont_entry").ok(),
            thread_saved_exception_pc: s.offset(&["JavaThread"], "_saved_exception_pc").ok(),
            stub_descriptors: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    /// The HotSpots this machine has (the JDKs the test scripts install, and the system's).
    fn libjvms() -> Vec<(u32, std::path::PathBuf)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        [
            (11, root.join(".cache/jdks/jdk11")),
            (17, "/usr/lib/jvm/java-17-openjdk-amd64".into()),
            (21, root.join(".cache/jdks/jdk21")),
            (25, "/usr/lib/jvm/temurin-25-jdk-amd64".into()),
        ]
        .into_iter()
        .map(|(jdk, home)| (jdk, home.join("lib/server/libjvm.so")))
        .filter(|(_, path)| path.exists())
        .collect()
    }

    #[test]
    fn resolves_every_jdk_on_this_machine() {
        let found = libjvms();
        assert!(!found.is_empty(), "no libjvm.so found on this machine");
        for (jdk, path) in found {
            let path_c = CString::new(path.to_str().unwrap()).unwrap();
            // SAFETY: loads the library (its static tables are complete without a VM); the
            // handle is kept open for the rest of the test process.
            let handle = unsafe { libc::dlopen(path_c.as_ptr(), libc::RTLD_LAZY) };
            assert!(!handle.is_null(), "dlopen {}", path.display());
            // SAFETY: the symbols are looked up in that libjvm.so.
            let structs = unsafe {
                VmStructs::read(|name| {
                    let address = libc::dlsym(handle, name.as_ptr()) as usize;
                    (address != 0)
                        .then_some(address)
                        .ok_or("missing".to_string())
                })
            }
            .unwrap();
            let layout =
                Layout::resolve(&structs, jdk).unwrap_or_else(|e| panic!("JDK {jdk}: {e}"));
            assert_eq!(layout.entry_wrapper_slot, -6, "JDK {jdk}");
            assert!(layout.thread_saved_exception_pc.is_some(), "JDK {jdk}");
            assert!(layout.block_length.is_some(), "JDK {jdk}");
            assert_eq!(layout.blob_code_end.is_some(), jdk <= 21, "JDK {jdk}");
            match (jdk, layout.debug, layout.blob_kind) {
                (25, DebugInfo::Apart { .. }, BlobKind::Field { nmethod: 1, .. }) => {}
                (11..=21, DebugInfo::InBlob { .. }, BlobKind::Name(_)) => {}
                other => panic!("JDK {jdk}: unexpected layout {other:?}"),
            }
            assert!(Layout::resolve(&structs, 26).is_err());
        }
    }
}
