//! The local time zone's offset from UTC, from the C library's `localtime_r` (which reads
//! `TZ` and the zone database; the workspace has no crate that does). This is an FFI
//! module: its one `unsafe` block is that call.

/// Seconds east of UTC at `epoch_secs` (seconds since the Unix epoch) in the local zone; 0
/// when the C library cannot tell.
pub fn utc_offset_seconds(epoch_secs: i64) -> i64 {
    let time = epoch_secs as libc::time_t;
    // SAFETY: `localtime_r` fills the `tm` we own from the `time_t` we pass; both outlive
    // the call, and an all-zero `tm` is a valid value to start from.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&time, &mut tm).is_null() {
            return 0;
        }
        tm.tm_gmtoff
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn offsets_are_within_a_day() {
        let offset = super::utc_offset_seconds(1_700_000_000);
        assert!(offset.abs() <= 14 * 3600, "{offset}");
    }
}
