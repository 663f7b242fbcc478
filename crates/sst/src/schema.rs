//! The typed row schema: counters, flags, fixed vectors and byte slots, every field 8-byte
//! aligned, validated once when the schema is built.
//!
//! Every schema starts with two fields the table itself uses: the failure detector's
//! `heartbeat` counter and the `suspected` flag vector (one flag per member).

use crate::error::SchemaError;

/// The default upper bound on a row's length (1 MiB).
pub const DEFAULT_MAX_ROW_LEN: usize = 1 << 20;

/// A byte range of a row: what [`push`](crate::Sst::push) sends.
///
/// ```
/// use squall_sst::{FieldRange, SchemaBuilder};
/// let mut b = SchemaBuilder::new(3);
/// let a = b.counter("a");
/// let c = b.counter("c");
/// let r = FieldRange::span(a.range(), c.range());
/// assert_eq!(r.len, 16);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FieldRange {
    /// Byte offset in the row (a multiple of 8).
    pub offset: usize,
    /// Length in bytes (a multiple of 8).
    pub len: usize,
}

impl FieldRange {
    /// The smallest range covering both `a` and `b`.
    pub fn span(a: FieldRange, b: FieldRange) -> FieldRange {
        let start = a.offset.min(b.offset);
        let end = (a.offset + a.len).max(b.offset + b.len);
        FieldRange {
            offset: start,
            len: end - start,
        }
    }
}

/// A monotonic (by convention) 64-bit counter field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Counter {
    pub(crate) word: usize,
    pub(crate) name: &'static str,
}

/// A boolean field, stored as a whole word (0 or 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Flag {
    pub(crate) word: usize,
    pub(crate) name: &'static str,
}

/// A fixed-length vector of 64-bit words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Vector {
    pub(crate) word: usize,
    pub(crate) len: usize,
    pub(crate) name: &'static str,
}

/// A byte slot of fixed capacity, padded to whole words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Bytes {
    pub(crate) word: usize,
    pub(crate) cap: usize,
    pub(crate) name: &'static str,
}

impl Counter {
    /// The field's byte range in a row.
    pub fn range(&self) -> FieldRange {
        FieldRange {
            offset: self.word * 8,
            len: 8,
        }
    }
    /// The field's name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

impl Flag {
    /// The field's byte range in a row.
    pub fn range(&self) -> FieldRange {
        FieldRange {
            offset: self.word * 8,
            len: 8,
        }
    }
    /// The field's name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

impl Vector {
    /// The whole vector's byte range in a row.
    pub fn range(&self) -> FieldRange {
        FieldRange {
            offset: self.word * 8,
            len: self.len * 8,
        }
    }
    /// The byte range of element `i`, or `None` past the end.
    ///
    /// ```
    /// let mut b = squall_sst::SchemaBuilder::new(2);
    /// let v = b.vector("v", 2);
    /// assert_eq!(v.element(1).map(|r| r.offset), Some(v.range().offset + 8));
    /// assert!(v.element(2).is_none());
    /// ```
    pub fn element(&self, i: usize) -> Option<FieldRange> {
        (i < self.len).then(|| FieldRange {
            offset: (self.word + i) * 8,
            len: 8,
        })
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Always false: vectors have at least one element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The field's name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

impl Bytes {
    /// The slot's byte range in a row (padded to whole words).
    pub fn range(&self) -> FieldRange {
        FieldRange {
            offset: self.word * 8,
            len: self.cap.div_ceil(8) * 8,
        }
    }
    /// Capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.cap
    }
    /// The field's name.
    pub fn name(&self) -> &'static str {
        self.name
    }
    /// Word offset of the slot in a row.
    pub(crate) fn word(&self) -> usize {
        self.word
    }
}

/// Declares the fields of a row. Field handles are returned as they are declared; [`build`]
/// validates the whole.
///
/// [`build`]: SchemaBuilder::build
///
/// ```
/// use squall_sst::SchemaBuilder;
/// let mut b = SchemaBuilder::new(3);
/// let delivered = b.counter("delivered");
/// let wedged = b.flag("wedged");
/// let votes = b.vector("votes", 3);
/// let note = b.bytes("note", 20);
/// let schema = b.build().unwrap();
/// assert_eq!(schema.row_len() % 8, 0);
/// assert_eq!(note.range().len, 24);
/// # let _ = (delivered, wedged, votes);
/// ```
#[derive(Debug)]
pub struct SchemaBuilder {
    members: usize,
    words: usize,
    names: Vec<&'static str>,
    error: Option<SchemaError>,
    max_row_len: usize,
    heartbeat: Counter,
    suspected: Vector,
}

impl SchemaBuilder {
    /// A schema for a table of `members` rows, with the built-in `heartbeat` and `suspected`
    /// fields already declared.
    pub fn new(members: usize) -> SchemaBuilder {
        let heartbeat = Counter {
            word: 0,
            name: "heartbeat",
        };
        let suspected = Vector {
            word: 1,
            len: members.max(1),
            name: "suspected",
        };
        SchemaBuilder {
            members,
            words: 1 + members.max(1),
            names: vec!["heartbeat", "suspected"],
            error: if members == 0 {
                Some(SchemaError::NoMembers)
            } else {
                None
            },
            max_row_len: DEFAULT_MAX_ROW_LEN,
            heartbeat,
            suspected,
        }
    }

    /// The number of members (rows) the schema is for.
    pub fn members(&self) -> usize {
        self.members
    }

    /// Raises or lowers the row length limit (default [`DEFAULT_MAX_ROW_LEN`]).
    pub fn max_row_len(&mut self, max: usize) -> &mut SchemaBuilder {
        self.max_row_len = max;
        self
    }

    fn claim(&mut self, name: &'static str, words: usize) -> usize {
        if self.names.contains(&name) && self.error.is_none() {
            self.error = Some(SchemaError::DuplicateName(name.to_string()));
        }
        if words == 0 && self.error.is_none() {
            self.error = Some(SchemaError::EmptyField(name.to_string()));
        }
        self.names.push(name);
        let at = self.words;
        self.words += words.max(1);
        at
    }

    /// Declares a counter.
    pub fn counter(&mut self, name: &'static str) -> Counter {
        Counter {
            word: self.claim(name, 1),
            name,
        }
    }

    /// Declares a flag.
    pub fn flag(&mut self, name: &'static str) -> Flag {
        Flag {
            word: self.claim(name, 1),
            name,
        }
    }

    /// Declares a vector of `len` words.
    pub fn vector(&mut self, name: &'static str, len: usize) -> Vector {
        Vector {
            word: self.claim(name, len),
            len: len.max(1),
            name,
        }
    }

    /// Declares a byte slot of `cap` bytes (padded to whole words).
    pub fn bytes(&mut self, name: &'static str, cap: usize) -> Bytes {
        Bytes {
            word: self.claim(name, cap.div_ceil(8)),
            cap: cap.max(1),
            name,
        }
    }

    /// Validates and freezes the schema.
    pub fn build(&self) -> Result<Schema, SchemaError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let len = self.words * 8;
        if len > self.max_row_len {
            return Err(SchemaError::RowTooLong {
                len,
                max: self.max_row_len,
            });
        }
        Ok(Schema {
            members: self.members,
            row_len: len,
            heartbeat: self.heartbeat,
            suspected: self.suspected,
        })
    }
}

/// A validated row layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schema {
    members: usize,
    row_len: usize,
    heartbeat: Counter,
    suspected: Vector,
}

impl Schema {
    /// Bytes per row (a multiple of 8).
    pub fn row_len(&self) -> usize {
        self.row_len
    }

    /// Number of rows (members).
    pub fn members(&self) -> usize {
        self.members
    }

    /// Bytes the table region must hold: one row per member.
    ///
    /// ```
    /// let s = squall_sst::SchemaBuilder::new(2).build().unwrap();
    /// assert_eq!(s.table_len(), 2 * s.row_len());
    /// ```
    pub fn table_len(&self) -> usize {
        self.row_len * self.members
    }

    /// The whole row as a range.
    pub fn row_range(&self) -> FieldRange {
        FieldRange {
            offset: 0,
            len: self.row_len,
        }
    }

    /// The failure detector's heartbeat counter.
    pub fn heartbeat(&self) -> Counter {
        self.heartbeat
    }

    /// The suspected flags, one per member (by row index).
    pub fn suspected(&self) -> Vector {
        self.suspected
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_and_empty_fields_are_refused() {
        let mut b = SchemaBuilder::new(2);
        b.counter("x");
        b.flag("x");
        assert_eq!(b.build(), Err(SchemaError::DuplicateName("x".into())));
        let mut b = SchemaBuilder::new(2);
        b.vector("v", 0);
        assert_eq!(b.build(), Err(SchemaError::EmptyField("v".into())));
        assert_eq!(SchemaBuilder::new(0).build(), Err(SchemaError::NoMembers));
    }

    #[test]
    fn rows_are_word_aligned_and_bounded() {
        let mut b = SchemaBuilder::new(4);
        let s = b.bytes("s", 13);
        let c = b.counter("c");
        assert_eq!(s.range().offset % 8, 0);
        assert_eq!(c.range().offset, s.range().offset + 16);
        let schema = b.build().expect("valid");
        assert_eq!(schema.row_len(), (1 + 4 + 2 + 1) * 8);
        b.max_row_len(16);
        assert!(matches!(b.build(), Err(SchemaError::RowTooLong { .. })));
    }
}
