//! `jni!`: a call through the JNI function table, for the modules that call JNI directly.

/// Calls JNI function `$f` through the table of `$env` (a `*mut sys::JNIEnv`); `None` when
/// the VM lacks it. Use inside `unsafe`.
macro_rules! jni {
    ($env:expr, $f:ident ( $($arg:expr),* $(,)? )) => {{
        let env: *mut jtap_jvmti::sys::JNIEnv = $env;
        (**env).$f.map(|function| function(env $(, $arg)*))
    }};
}
