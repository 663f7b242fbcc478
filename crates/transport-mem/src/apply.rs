//! Applying one op to the target node's memory: the part both fabrics share.

use squall_transport::{LocalSlice, Region, RemoteAddr};

/// Where the bytes of a write come from.
pub(crate) enum Source<'a> {
    /// Straight from the poster's region (the threaded fabric applies at post time).
    Region(&'a Region, usize),
    /// Bytes captured at post time (held or in-flight ops).
    Bytes(&'a [u8]),
}

/// Copies a write's bytes into `dst` at `offset`. Bounds were checked when the op was posted.
pub(crate) fn write(dst: &Region, offset: usize, src: Source<'_>, len: usize) {
    let r = match src {
        Source::Region(region, at) => dst.copy_from(offset, region, at, len),
        Source::Bytes(bytes) => dst.write_bytes(offset, bytes),
    };
    debug_assert!(r.is_ok(), "bounds are validated at post time");
}

/// Copies `local.len` bytes of `src` at `at.offset` into the poster's `local` range.
pub(crate) fn read(src: &Region, at: RemoteAddr, local_region: &Region, local: LocalSlice) {
    let r = local_region.copy_from(local.offset, src, at.offset, local.len);
    debug_assert!(r.is_ok(), "bounds are validated at post time");
}

/// Remote compare-and-swap; returns the old value.
pub(crate) fn compare_and_swap(dst: &Region, offset: usize, expected: u64, new: u64) -> u64 {
    match dst.compare_and_swap(offset / 8, expected, new) {
        Ok(old) | Err(old) => old,
    }
}

/// Remote fetch-and-add; returns the old value.
pub(crate) fn fetch_add(dst: &Region, offset: usize, delta: u64) -> u64 {
    dst.fetch_add(offset / 8, delta)
}
