//! Registered regions: memory a node exposes to one-sided access by its peers.

use std::fmt;
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
/// Cloning a `Region` shares the memory.
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
    words: Arc<[AtomicU64]>,
}

impl fmt::Debug for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Region")
            .field("id", &self.id)
            .field("len", &self.len())
            .finish()
    }
}

impl Region {
    /// Allocates zeroed region memory for `spec`.
    pub fn new(spec: RegionSpec) -> Result<Region, RegionError> {
        spec.validate()?;
        let words: Arc<[AtomicU64]> = (0..spec.len / 8).map(|_| AtomicU64::new(0)).collect();
        Ok(Region { id: spec.id, words })
    }

    /// The region's id.
    pub fn id(&self) -> RegionId {
        self.id
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.words.len() * 8
    }

    /// Always false: regions have a positive length.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The raw word array, for fabrics that apply remote operations.
    pub fn words(&self) -> &[AtomicU64] {
        &self.words
    }

    /// Loads word `index` (acquire).
    ///
    /// # Panics
    /// If `index` is past the end of the region, like slice indexing.
    pub fn load(&self, index: usize) -> u64 {
        self.words[index].load(Ordering::Acquire)
    }

    /// Stores word `index` (release).
    ///
    /// # Panics
    /// If `index` is past the end of the region, like slice indexing.
    pub fn store(&self, index: usize, value: u64) {
        self.words[index].store(value, Ordering::Release)
    }

    /// Atomic compare-and-swap of word `index`: `Ok(old)` if it held `expected`, else `Err(actual)`.
    ///
    /// # Panics
    /// If `index` is past the end of the region.
    pub fn compare_and_swap(&self, index: usize, expected: u64, new: u64) -> Result<u64, u64> {
        self.words[index].compare_exchange(expected, new, Ordering::AcqRel, Ordering::Acquire)
    }

    /// Atomic wrapping add to word `index`; returns the old value.
    ///
    /// # Panics
    /// If `index` is past the end of the region.
    pub fn fetch_add(&self, index: usize, delta: u64) -> u64 {
        self.words[index].fetch_add(delta, Ordering::AcqRel)
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
        word::copy_out(&self.words, offset, dst);
        Ok(())
    }

    /// Copies bytes into the region (whole words stored with release, partial words merged).
    pub fn write_bytes(&self, offset: usize, src: &[u8]) -> Result<(), RegionError> {
        self.check_range(offset, src.len())?;
        word::copy_in(&self.words, offset, src);
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
        word::copy_between(&src.words, src_offset, &self.words, offset, len);
        Ok(())
    }

    /// A copy of the whole region's bytes (for tests, snapshots and debugging).
    pub fn snapshot(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len()];
        word::copy_out(&self.words, 0, &mut out);
        out
    }
}
