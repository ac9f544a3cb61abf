//! Stack traces of Java threads.

use crate::env::Env;
use crate::error::Result;
use crate::sys;

impl Env {
    /// Up to `max_frames` frames of `thread`'s stack, top first (null thread: the current one).
    ///
    /// # Safety
    /// `thread` is null or a valid reference to a `java.lang.Thread`.
    pub unsafe fn stack_trace(
        &self,
        thread: sys::jthread,
        max_frames: usize,
    ) -> Result<Vec<sys::jvmtiFrameInfo>> {
        let mut frames = vec![
            sys::jvmtiFrameInfo {
                method: std::ptr::null_mut(),
                location: 0
            };
            max_frames
        ];
        let mut count: sys::jint = 0;
        // SAFETY: caller's contract for `thread`; the buffer holds `max_frames` frames.
        unsafe {
            jvmti_call!(
                self.raw(),
                GetStackTrace(
                    thread,
                    0,
                    max_frames as sys::jint,
                    frames.as_mut_ptr(),
                    &mut count
                )
            )
        }?;
        frames.truncate(count.max(0) as usize);
        Ok(frames)
    }
}
