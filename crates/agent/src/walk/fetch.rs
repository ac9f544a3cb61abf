//! Reads of the VM's memory that cannot crash it: HotSpot's own `SafeFetchN`, a one-load
//! function whose fault the VM's SIGSEGV handler turns into a return of the caller's default
//! value. The walker reads every VM structure through it, so a pointer that turns out stale
//! or made up (a frame half-built when a signal came) ends the walk instead of the process.
//!
//! HotSpot 17+ (and 11's later updates) build it statically into `libjvm.so`
//! (`SafeFetchN_impl`); JDK 11 generates it at start-up and keeps its entry in
//! `StubRoutines::_safefetchN_entry`. Both need the symbol table; the VM's handler recovers
//! the fault on any Java thread, which is where the walker runs. Reads are of aligned words:
//! a value is cut out of the word (or two) that holds it, so no read crosses into a page the
//! value does not touch.

use crate::thread::Vm;

/// Lowest address taken for a pointer (the zero page and the first 64 KiB are never mapped).
pub(super) const LOWEST: usize = 1 << 16;

/// `intptr_t SafeFetchN(intptr_t* address, intptr_t default)`.
type SafeFetchN = unsafe extern "C" fn(address: *const isize, default: isize) -> isize;

/// Two defaults, to tell a word that equals the first from a fault.
const FIRST_DEFAULT: isize = 0x5afe_f00d_dead_beefu64 as isize;
const SECOND_DEFAULT: isize = !FIRST_DEFAULT;

/// Values the walker reads: plain integers, valid for any bit pattern.
pub trait Plain: Copy {}
impl Plain for u8 {}
impl Plain for u16 {}
impl Plain for i32 {}
impl Plain for u32 {}
impl Plain for usize {}

/// The VM's faultless read.
#[derive(Clone, Copy)]
pub struct Fetch {
    safe_fetch: SafeFetchN,
}

impl std::fmt::Debug for Fetch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Fetch({:#x})", self.safe_fetch as usize)
    }
}

impl Fetch {
    /// Finds `SafeFetchN` in the `libjvm.so` that runs `vm` (after the VM started: JDK 11's is
    /// generated then), and checks that it reads.
    pub fn resolve(vm: Vm) -> Result<Fetch, String> {
        let address = match crate::libjvm::local_function(vm, "SafeFetchN_impl") {
            Ok(address) => address,
            Err(static_missing) => {
                let entry =
                    crate::libjvm::local_variable(vm, "_ZN12StubRoutines17_safefetchN_entryE")
                        .map_err(|_| format!("no SafeFetchN: {static_missing}"))?;
                // SAFETY: a static variable of the loaded libjvm.so.
                let stub = unsafe { std::ptr::read_volatile(entry as *const usize) };
                if stub == 0 {
                    return Err("SafeFetchN is not generated yet".into());
                }
                stub
            }
        };
        let fetch = Fetch {
            // SAFETY: the address is HotSpot's SafeFetchN, whose C signature is the type's.
            safe_fetch: unsafe { std::mem::transmute::<usize, SafeFetchN>(address) },
        };
        let probe = 0x1234_5678usize;
        if fetch.word(&probe as *const usize as usize) != Some(probe) {
            return Err("SafeFetchN does not read what is there".into());
        }
        Ok(fetch)
    }

    /// The aligned word at `address`, or None if it cannot be read.
    pub fn word(&self, address: usize) -> Option<usize> {
        if !address.is_multiple_of(WORD) {
            return None;
        }
        let fetch = |default| {
            // SAFETY: SafeFetchN loads one word; a fault there is recovered by the VM's
            // signal handler, which returns `default` instead.
            unsafe { (self.safe_fetch)(address as *const isize, default) }
        };
        let first = fetch(FIRST_DEFAULT);
        if first != FIRST_DEFAULT {
            return Some(first as usize);
        }
        let second = fetch(SECOND_DEFAULT);
        (second != SECOND_DEFAULT).then_some(second as usize)
    }

    /// The `T` at `address`, cut out of the aligned word (or two) that hold it, or None if
    /// they cannot be read.
    pub fn value<T: Plain>(&self, address: usize) -> Option<T> {
        let size = std::mem::size_of::<T>();
        let start = address & !(WORD - 1);
        let offset = address - start;
        let mut bytes = [0u8; 2 * WORD];
        bytes[..WORD].copy_from_slice(&self.word(start)?.to_ne_bytes());
        if offset + size > WORD {
            bytes[WORD..].copy_from_slice(&self.word(start.checked_add(WORD)?)?.to_ne_bytes());
        }
        // SAFETY: `offset + size` ≤ 2 words, inside `bytes`; `T` is plain data, valid for
        // any bytes.
        Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().add(offset).cast::<T>()) })
    }
}

/// The `T` at byte `offset` of `word` (`offset + size_of::<T>()` ≤ a word).
pub fn cut<T: Plain>(word: usize, offset: usize) -> T {
    let bytes = word.to_ne_bytes();
    let offset = offset.min(WORD - std::mem::size_of::<T>());
    // SAFETY: `offset + size_of::<T>()` ≤ 8, inside `bytes`; `T` is plain data, valid for any
    // bytes.
    unsafe { std::ptr::read_unaligned(bytes.as_ptr().add(offset).cast::<T>()) }
}

const WORD: usize = std::mem::size_of::<usize>();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_cut_out_of_their_word() {
        let word = usize::from_ne_bytes([1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(cut::<u8>(word, 3), 4);
        assert_eq!(cut::<u16>(word, 6), u16::from_ne_bytes([7, 8]));
        assert_eq!(cut::<i32>(word, 4), i32::from_ne_bytes([5, 6, 7, 8]));
        assert_eq!(cut::<usize>(word, 0), word);
    }
}
