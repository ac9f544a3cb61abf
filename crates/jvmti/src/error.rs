//! JVMTI error codes and their names, so that every failure names the error and the function.

use std::fmt;

use crate::sys;

/// A JVMTI function returned something other than `JVMTI_ERROR_NONE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Error {
    /// The raw `jvmtiError`.
    pub code: sys::jvmtiError,
    /// The JVMTI function that failed, e.g. `"AddCapabilities"`.
    pub function: &'static str,
}

impl Error {
    /// The error's name from `jvmti.h`, e.g. `JVMTI_ERROR_WRONG_PHASE`.
    pub fn name(&self) -> &'static str {
        error_name(self.code)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} failed: {} ({})",
            self.function,
            self.name(),
            self.code
        )
    }
}

impl std::error::Error for Error {}

/// Result of a JVMTI call.
pub type Result<T> = std::result::Result<T, Error>;

/// Turns a return code into a `Result`, naming the function.
pub(crate) fn check(code: sys::jvmtiError, function: &'static str) -> Result<()> {
    if code == sys::JVMTI_ERROR_NONE {
        Ok(())
    } else {
        Err(Error { code, function })
    }
}

/// The name of a `jvmtiError` value, or `JVMTI_ERROR_UNKNOWN`.
pub fn error_name(code: sys::jvmtiError) -> &'static str {
    match code {
        sys::JVMTI_ERROR_NONE => "JVMTI_ERROR_NONE",
        sys::JVMTI_ERROR_INVALID_THREAD => "JVMTI_ERROR_INVALID_THREAD",
        sys::JVMTI_ERROR_INVALID_THREAD_GROUP => "JVMTI_ERROR_INVALID_THREAD_GROUP",
        sys::JVMTI_ERROR_INVALID_PRIORITY => "JVMTI_ERROR_INVALID_PRIORITY",
        sys::JVMTI_ERROR_THREAD_NOT_SUSPENDED => "JVMTI_ERROR_THREAD_NOT_SUSPENDED",
        sys::JVMTI_ERROR_THREAD_SUSPENDED => "JVMTI_ERROR_THREAD_SUSPENDED",
        sys::JVMTI_ERROR_THREAD_NOT_ALIVE => "JVMTI_ERROR_THREAD_NOT_ALIVE",
        sys::JVMTI_ERROR_INVALID_OBJECT => "JVMTI_ERROR_INVALID_OBJECT",
        sys::JVMTI_ERROR_INVALID_CLASS => "JVMTI_ERROR_INVALID_CLASS",
        sys::JVMTI_ERROR_CLASS_NOT_PREPARED => "JVMTI_ERROR_CLASS_NOT_PREPARED",
        sys::JVMTI_ERROR_INVALID_METHODID => "JVMTI_ERROR_INVALID_METHODID",
        sys::JVMTI_ERROR_INVALID_LOCATION => "JVMTI_ERROR_INVALID_LOCATION",
        sys::JVMTI_ERROR_INVALID_FIELDID => "JVMTI_ERROR_INVALID_FIELDID",
        sys::JVMTI_ERROR_INVALID_MODULE => "JVMTI_ERROR_INVALID_MODULE",
        sys::JVMTI_ERROR_NO_MORE_FRAMES => "JVMTI_ERROR_NO_MORE_FRAMES",
        sys::JVMTI_ERROR_OPAQUE_FRAME => "JVMTI_ERROR_OPAQUE_FRAME",
        sys::JVMTI_ERROR_TYPE_MISMATCH => "JVMTI_ERROR_TYPE_MISMATCH",
        sys::JVMTI_ERROR_INVALID_SLOT => "JVMTI_ERROR_INVALID_SLOT",
        sys::JVMTI_ERROR_DUPLICATE => "JVMTI_ERROR_DUPLICATE",
        sys::JVMTI_ERROR_NOT_FOUND => "JVMTI_ERROR_NOT_FOUND",
        sys::JVMTI_ERROR_INVALID_MONITOR => "JVMTI_ERROR_INVALID_MONITOR",
        sys::JVMTI_ERROR_NOT_MONITOR_OWNER => "JVMTI_ERROR_NOT_MONITOR_OWNER",
        sys::JVMTI_ERROR_INTERRUPT => "JVMTI_ERROR_INTERRUPT",
        sys::JVMTI_ERROR_INVALID_CLASS_FORMAT => "JVMTI_ERROR_INVALID_CLASS_FORMAT",
        sys::JVMTI_ERROR_CIRCULAR_CLASS_DEFINITION => "JVMTI_ERROR_CIRCULAR_CLASS_DEFINITION",
        sys::JVMTI_ERROR_FAILS_VERIFICATION => "JVMTI_ERROR_FAILS_VERIFICATION",
        sys::JVMTI_ERROR_UNSUPPORTED_REDEFINITION_METHOD_ADDED => {
            "JVMTI_ERROR_UNSUPPORTED_REDEFINITION_METHOD_ADDED"
        }
        sys::JVMTI_ERROR_UNSUPPORTED_REDEFINITION_SCHEMA_CHANGED => {
            "JVMTI_ERROR_UNSUPPORTED_REDEFINITION_SCHEMA_CHANGED"
        }
        sys::JVMTI_ERROR_INVALID_TYPESTATE => "JVMTI_ERROR_INVALID_TYPESTATE",
        sys::JVMTI_ERROR_UNSUPPORTED_REDEFINITION_HIERARCHY_CHANGED => {
            "JVMTI_ERROR_UNSUPPORTED_REDEFINITION_HIERARCHY_CHANGED"
        }
        sys::JVMTI_ERROR_UNSUPPORTED_REDEFINITION_METHOD_DELETED => {
            "JVMTI_ERROR_UNSUPPORTED_REDEFINITION_METHOD_DELETED"
        }
        sys::JVMTI_ERROR_UNSUPPORTED_VERSION => "JVMTI_ERROR_UNSUPPORTED_VERSION",
        sys::JVMTI_ERROR_NAMES_DONT_MATCH => "JVMTI_ERROR_NAMES_DONT_MATCH",
        sys::JVMTI_ERROR_UNSUPPORTED_REDEFINITION_CLASS_MODIFIERS_CHANGED => {
            "JVMTI_ERROR_UNSUPPORTED_REDEFINITION_CLASS_MODIFIERS_CHANGED"
        }
        sys::JVMTI_ERROR_UNSUPPORTED_REDEFINITION_METHOD_MODIFIERS_CHANGED => {
            "JVMTI_ERROR_UNSUPPORTED_REDEFINITION_METHOD_MODIFIERS_CHANGED"
        }
        sys::JVMTI_ERROR_UNSUPPORTED_REDEFINITION_CLASS_ATTRIBUTE_CHANGED => {
            "JVMTI_ERROR_UNSUPPORTED_REDEFINITION_CLASS_ATTRIBUTE_CHANGED"
        }
        sys::JVMTI_ERROR_UNSUPPORTED_OPERATION => "JVMTI_ERROR_UNSUPPORTED_OPERATION",
        sys::JVMTI_ERROR_UNMODIFIABLE_CLASS => "JVMTI_ERROR_UNMODIFIABLE_CLASS",
        sys::JVMTI_ERROR_UNMODIFIABLE_MODULE => "JVMTI_ERROR_UNMODIFIABLE_MODULE",
        sys::JVMTI_ERROR_NOT_AVAILABLE => "JVMTI_ERROR_NOT_AVAILABLE",
        sys::JVMTI_ERROR_MUST_POSSESS_CAPABILITY => "JVMTI_ERROR_MUST_POSSESS_CAPABILITY",
        sys::JVMTI_ERROR_NULL_POINTER => "JVMTI_ERROR_NULL_POINTER",
        sys::JVMTI_ERROR_ABSENT_INFORMATION => "JVMTI_ERROR_ABSENT_INFORMATION",
        sys::JVMTI_ERROR_INVALID_EVENT_TYPE => "JVMTI_ERROR_INVALID_EVENT_TYPE",
        sys::JVMTI_ERROR_ILLEGAL_ARGUMENT => "JVMTI_ERROR_ILLEGAL_ARGUMENT",
        sys::JVMTI_ERROR_NATIVE_METHOD => "JVMTI_ERROR_NATIVE_METHOD",
        sys::JVMTI_ERROR_CLASS_LOADER_UNSUPPORTED => "JVMTI_ERROR_CLASS_LOADER_UNSUPPORTED",
        sys::JVMTI_ERROR_OUT_OF_MEMORY => "JVMTI_ERROR_OUT_OF_MEMORY",
        sys::JVMTI_ERROR_ACCESS_DENIED => "JVMTI_ERROR_ACCESS_DENIED",
        sys::JVMTI_ERROR_WRONG_PHASE => "JVMTI_ERROR_WRONG_PHASE",
        sys::JVMTI_ERROR_INTERNAL => "JVMTI_ERROR_INTERNAL",
        sys::JVMTI_ERROR_UNATTACHED_THREAD => "JVMTI_ERROR_UNATTACHED_THREAD",
        sys::JVMTI_ERROR_INVALID_ENVIRONMENT => "JVMTI_ERROR_INVALID_ENVIRONMENT",
        _ => "JVMTI_ERROR_UNKNOWN",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_themselves_and_their_function() {
        let e = Error {
            code: sys::JVMTI_ERROR_WRONG_PHASE,
            function: "GetLoadedClasses",
        };
        assert_eq!(
            e.to_string(),
            "GetLoadedClasses failed: JVMTI_ERROR_WRONG_PHASE (112)"
        );
        assert_eq!(
            error_name(sys::JVMTI_ERROR_MUST_POSSESS_CAPABILITY),
            "JVMTI_ERROR_MUST_POSSESS_CAPABILITY"
        );
        assert_eq!(error_name(9999), "JVMTI_ERROR_UNKNOWN");
        assert!(check(sys::JVMTI_ERROR_NONE, "X").is_ok());
    }
}
