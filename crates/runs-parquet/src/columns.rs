//! A row group being buffered, column by column, in Parquet's own terms: a leaf column's
//! values with their definition levels (is an optional value there?) and repetition levels
//! (does a map entry start a new row?), written out through the column writer of the leaf's
//! physical type.

use parquet::column::writer::ColumnWriter;
use parquet::data_type::ByteArray;
use parquet::errors::ParquetError;

/// A physical type a leaf holds, and how its values reach the column writer of that type.
pub(crate) trait Physical: Sized {
    /// The physical type's name, for the error when the schema gives the leaf another.
    const NAME: &'static str;

    /// Writes the leaf to `writer`; `Ok(false)` when the writer is of another type.
    fn write(leaf: &Leaf<Self>, writer: &mut ColumnWriter) -> Result<bool, ParquetError>;
}

macro_rules! physical {
    ($ty:ty, $name:literal, $variant:ident) => {
        impl Physical for $ty {
            const NAME: &'static str = $name;

            fn write(leaf: &Leaf<Self>, writer: &mut ColumnWriter) -> Result<bool, ParquetError> {
                let ColumnWriter::$variant(typed) = writer else {
                    return Ok(false);
                };
                typed.write_batch(&leaf.values, leaf.defs(), leaf.reps())?;
                Ok(true)
            }
        }
    };
}

physical!(ByteArray, "BYTE_ARRAY", ByteArrayColumnWriter);
physical!(i64, "INT64", Int64ColumnWriter);
physical!(f64, "DOUBLE", DoubleColumnWriter);

/// How a leaf sits in its row: once and always there, once or null, or as the key or value
/// column of a map (a required group `MAP` of a repeated `key_value` group), any number of
/// times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Required,
    Optional,
    MapEntries,
}

/// One leaf column of a row group being buffered.
pub(crate) struct Leaf<T> {
    /// The leaf's path in the schema (`tags.key_value.key`).
    pub(crate) path: &'static str,
    shape: Shape,
    values: Vec<T>,
    defs: Vec<i16>,
    reps: Vec<i16>,
}

impl<T> Leaf<T> {
    pub(crate) fn required(path: &'static str) -> Leaf<T> {
        Leaf::new(path, Shape::Required)
    }

    pub(crate) fn optional(path: &'static str) -> Leaf<T> {
        Leaf::new(path, Shape::Optional)
    }

    pub(crate) fn map_entries(path: &'static str) -> Leaf<T> {
        Leaf::new(path, Shape::MapEntries)
    }

    fn new(path: &'static str, shape: Shape) -> Leaf<T> {
        Leaf {
            path,
            shape,
            values: Vec::new(),
            defs: Vec::new(),
            reps: Vec::new(),
        }
    }

    /// The value of a required leaf in the next row.
    pub(crate) fn push(&mut self, value: T) {
        debug_assert_eq!(self.shape, Shape::Required, "{}", self.path);
        self.values.push(value);
    }

    /// The value, or the null, of an optional leaf in the next row.
    pub(crate) fn push_optional(&mut self, value: Option<T>) {
        debug_assert_eq!(self.shape, Shape::Optional, "{}", self.path);
        // Definition level 1: the value is there; 0: null, and no value is stored.
        self.defs.push(i16::from(value.is_some()));
        self.values.extend(value);
    }

    /// The keys (or the values) of the next row's map, in order; none is an empty map.
    pub(crate) fn push_entries(&mut self, entries: impl IntoIterator<Item = T>) {
        debug_assert_eq!(self.shape, Shape::MapEntries, "{}", self.path);
        let before = self.values.len();
        self.values.extend(entries);
        let added = self.values.len() - before;
        if added == 0 {
            // The map is there but holds no `key_value` entry: level 0 of both.
            self.defs.push(0);
            self.reps.push(0);
        } else {
            // Every entry is defined (level 1); the first starts the row (repetition 0),
            // the others repeat within it (1).
            self.defs.extend(std::iter::repeat_n(1, added));
            self.reps.push(0);
            self.reps.extend(std::iter::repeat_n(1, added - 1));
        }
    }

    fn defs(&self) -> Option<&[i16]> {
        (self.shape != Shape::Required).then_some(self.defs.as_slice())
    }

    fn reps(&self) -> Option<&[i16]> {
        (self.shape == Shape::MapEntries).then_some(self.reps.as_slice())
    }
}

/// A leaf of any physical type, as a row group's writer sees it.
pub(crate) trait Column {
    fn path(&self) -> &'static str;

    fn physical(&self) -> &'static str;

    /// Writes the buffered values; `Ok(false)` when the writer is of another type.
    fn write(&self, writer: &mut ColumnWriter) -> Result<bool, ParquetError>;

    fn clear(&mut self);
}

impl<T: Physical> Column for Leaf<T> {
    fn path(&self) -> &'static str {
        self.path
    }

    fn physical(&self) -> &'static str {
        T::NAME
    }

    fn write(&self, writer: &mut ColumnWriter) -> Result<bool, ParquetError> {
        T::write(self, writer)
    }

    fn clear(&mut self) {
        self.values.clear();
        self.defs.clear();
        self.reps.clear();
    }
}

/// Text as Parquet's byte array (a `UTF8` column's physical type).
pub(crate) fn text(s: &str) -> ByteArray {
    ByteArray::from(s.as_bytes().to_vec())
}

/// A length (of a prompt, an output, a list) as INT64: a length in memory is at most
/// `isize::MAX`, so it always fits.
pub(crate) fn length(n: usize) -> i64 {
    n as i64
}

/// An unsigned setting (a seed, `top_k`, `max_tokens`) as the INT64 bits of a column
/// annotated `INTEGER(64, false)`, which readers show as the unsigned number it was.
pub(crate) fn unsigned(n: u64) -> i64 {
    n as i64
}
