//! Registered regions: memory a node exposes to one-sided access by its peers.

use std::alloc::{Layout, alloc_zeroed, dealloc, handle_alloc_error};
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::RegionError;
use crate::ids::RegionId;
use crate::word;

/// What a node registers: an id its peers name the region by, and a length in bytes.
///
/// The length must be a positive multiple of 8 so that every word of the region is whole.
///
/// ```
/// use squall_transport::{RegionId, RegionSpec};
/// let spec = RegionSpec::new(RegionId(1), 4096);
/// assert!(spec.validate().is_ok());
/// assert!(RegionSpec::new(RegionId(1), 12).validate().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RegionSpec {
    /// The region's name, the same on every node that registers it.
    pub id: RegionId,
    /// Its length in bytes: a positive multiple of 8.
    pub len: usize,
}

impl RegionSpec {
    /// A region spec; see [`RegionSpec::validate`] for the rules.
    pub const fn new(id: RegionId, len: usize) -> RegionSpec {
        RegionSpec { id, len }
    }

    /// Checks the length rules, with an error that says what to change.
    pub fn validate(&self) -> Result<(), RegionError> {
        if self.len == 0 || self.len % 8 != 0 {
            return Err(RegionError::BadLength {
                region: self.id,
                len: self.len,
            });
        }
        Ok(())
    }

    /// Checks every spec and that no id appears twice.
    ///
    /// ```
    /// use squall_transport::{RegionId, RegionSpec};
    /// let twice = [RegionSpec::new(RegionId(1), 8), RegionSpec::new(RegionId(1), 16)];
    /// assert!(RegionSpec::validate_all(&twice).is_err());
    /// ```
    pub fn validate_all(specs: &[RegionSpec]) -> Result<(), RegionError> {
        for (i, spec) in specs.iter().enumerate() {
            spec.validate()?;
            if specs[..i].iter().any(|s| s.id == spec.id) {
                return Err(RegionError::Duplicate { region: spec.id });
            }
        }
        Ok(())
    }
}

/// Region memory as local code sees it: an array of atomic 8-byte words.
///
/// Remote writes land in this memory while local code reads it, so it is never exposed as a plain
/// byte slice. Word access is atomic (acquire loads, release stores); byte helpers copy whole
/// words atomically and merge partial words with a compare-and-swap. Nothing larger than a word
/// is atomic: a reader may see a multi-word value half-updated, which is why a guard counter must
/// travel in a write *after* the data it guards.
///
/// [`Region::new`] allocates zeroed, page-aligned memory (what a NIC registers). Fabrics that need
/// memory from elsewhere — a shared mapping between processes, a pinned buffer — wrap it with
/// [`Region::from_raw`]. Cloning a `Region` shares the memory.
///
/// ```
/// use squall_transport::{Region, RegionId, RegionSpec};
/// let r = Region::new(RegionSpec::new(RegionId(0), 64)).unwrap();
/// r.store(2, 42);
/// assert_eq!(r.load(2), 42);
/// r.write_bytes(3, b"abc").unwrap();
/// let mut out = [0u8; 3];
/// r.read_bytes(3, &mut out).unwrap();
/// assert_eq!(&out, b"abc");
/// assert!(r.write_bytes(62, b"abc").is_err());
/// ```
#[derive(Clone)]
pub struct Region {
    id: RegionId,
    ptr: NonNull<AtomicU64>,
    words: usize,
    /// Keeps the memory alive while any clone exists.
    _owner: Arc<dyn Send + Sync>,
}

// SAFETY: the memory behind `ptr` is only accessed through `AtomicU64`, which is Sync, and it
// lives as long as `_owner`, which every clone holds.
unsafe impl Send for Region {}
// SAFETY: as above; all access is atomic.
unsafe impl Sync for Region {}

impl fmt::Debug for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Region")
            .field("id", &self.id)
            .field("len", &self.len())
            .finish()
    }
}

/// The page size regions are aligned to.
pub const REGION_ALIGN: usize = 4096;

/// Heap memory owned by a region created with [`Region::new`].
struct HeapBlock {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: the block is plain memory, accessed only atomically through `Region`.
unsafe impl Send for HeapBlock {}
// SAFETY: as above.
unsafe impl Sync for HeapBlock {}

impl Drop for HeapBlock {
    fn drop(&mut self) {
        // SAFETY: allocated in `Region::new` with exactly this layout.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

impl Region {
    /// Allocates zeroed, page-aligned region memory for `spec`.
    pub fn new(spec: RegionSpec) -> Result<Region, RegionError> {
        spec.validate()?;
        let layout = Layout::from_size_align(spec.len, REGION_ALIGN).map_err(|_| {
            RegionError::BadLength {
                region: spec.id,
                len: spec.len,
            }
        })?;
        // SAFETY: the layout has a non-zero size (validated above).
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        let owner = Arc::new(HeapBlock { ptr, layout });
        // SAFETY: the block is zeroed (a valid AtomicU64 bit pattern), aligned to a page, holds
        // `spec.len` bytes, and lives as long as `owner`.
        Ok(unsafe { Region::from_raw(spec.id, ptr.cast(), spec.len / 8, owner) })
    }

    /// Wraps memory that something else owns, such as a shared mapping.
    ///
    /// # Safety
    /// `ptr` must point to `words` initialised, 8-byte-aligned `u64` words that stay valid for as
    /// long as `owner` lives, and that nothing accesses except atomically (other processes
    /// included). `words` must be positive.
    pub unsafe fn from_raw(
        id: RegionId,
        ptr: NonNull<AtomicU64>,
        words: usize,
        owner: Arc<dyn Send + Sync>,
    ) -> Region {
        Region {
            id,
            ptr,
            words,
            _owner: owner,
        }
    }

    /// The region's id.
    pub fn id(&self) -> RegionId {
        self.id
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.words * 8
    }

    /// Always false: regions have a positive length.
    pub fn is_empty(&self) -> bool {
        self.words == 0
    }

    /// The raw word array, for fabrics that apply remote operations.
    pub fn words(&self) -> &[AtomicU64] {
        // SAFETY: `from_raw`'s contract: `words` valid, aligned, initialised atomics that live as
        // long as `_owner`, which `self` holds.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.words) }
    }

    /// The address of the first byte, for registering the region with a NIC.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr().cast()
    }

    /// Loads word `index` (acquire).
    ///
    /// # Panics
    /// If `index` is past the end of the region, like slice indexing.
    pub fn load(&self, index: usize) -> u64 {
        self.words()[index].load(Ordering::Acquire)
    }

    /// Stores word `index` (release).
    ///
    /// # Panics
    /// If `index` is past the end of the region, like slice indexing.
    pub fn store(&self, index: usize, value: u64) {
        self.words()[index].store(value, Ordering::Release)
    }

    /// Atomic compare-and-swap of word `index`: `Ok(old)` if it held `expected`, else `Err(actual)`.
    ///
    /// # Panics
    /// If `index` is past the end of the region.
    pub fn compare_and_swap(&self, index: usize, expected: u64, new: u64) -> Result<u64, u64> {
        self.words()[index].compare_exchange(expected, new, Ordering::AcqRel, Ordering::Acquire)
    }

    /// Atomic wrapping add to word `index`; returns the old value.
    ///
    /// # Panics
    /// If `index` is past the end of the region.
    pub fn fetch_add(&self, index: usize, delta: u64) -> u64 {
        self.words()[index].fetch_add(delta, Ordering::AcqRel)
    }

    /// Checks that `len` bytes at `offset` lie inside the region.
    pub fn check_range(&self, offset: usize, len: usize) -> Result<(), RegionError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len() => Ok(()),
            _ => Err(RegionError::OutOfBounds {
                region: self.id,
                offset,
                len,
                region_len: self.len(),
            }),
        }
    }

    /// Copies bytes out of the region (each word loaded whole, acquire).
    pub fn read_bytes(&self, offset: usize, dst: &mut [u8]) -> Result<(), RegionError> {
        self.check_range(offset, dst.len())?;
        word::copy_out(self.words(), offset, dst);
        Ok(())
    }

    /// Copies bytes into the region (whole words stored with release, partial words merged).
    pub fn write_bytes(&self, offset: usize, src: &[u8]) -> Result<(), RegionError> {
        self.check_range(offset, src.len())?;
        word::copy_in(self.words(), offset, src);
        Ok(())
    }

    /// Copies `len` bytes from `src` at `src_offset` into this region at `offset`.
    pub fn copy_from(
        &self,
        offset: usize,
        src: &Region,
        src_offset: usize,
        len: usize,
    ) -> Result<(), RegionError> {
        src.check_range(src_offset, len)?;
        self.check_range(offset, len)?;
        word::copy_between(src.words(), src_offset, self.words(), offset, len);
        Ok(())
    }

    /// A copy of the whole region's bytes (for tests, snapshots and debugging).
    pub fn snapshot(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len()];
        word::copy_out(self.words(), 0, &mut out);
        out
    }
}
