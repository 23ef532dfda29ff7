//! Writes result tables as Parquet files, straight from the engines' columns.
//!
//! A short `pathtwin sim` used to spend most of its time importing pandas and pyarrow to
//! write five small files; writing them here lets the command line skip both (and so does
//! `pathtwin trace analyze`). One row group per table (or, for a long table built a part at
//! a time, [`write_nullable_groups`] and [`write_passes`]), Snappy-compressed (pyarrow's
//! default), every column a flat primitive: `f64` as DOUBLE, `i64` as INT64, `bool` as
//! BOOLEAN, text as UTF-8 BYTE_ARRAY. Readers (pyarrow, pandas, DuckDB, Spark) read these as
//! they read what pyarrow writes.
//!
//! [`write_table`] writes REQUIRED columns (the simulator's tables have no missing values).
//! [`write_nullable_table`] writes every column OPTIONAL, as pyarrow writes a pandas frame,
//! so that a table once written through pandas reads back the same: a missing number (or a
//! NaN, which pandas counts as missing) is a null, and a text column with no value at all is
//! a column of Parquet's Null type (pyarrow makes one of a pandas column of only `None`s,
//! and reads it back as such), or DOUBLE if it has no rows (pandas makes a float column of
//! an empty list).

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use parquet::basic::{Compression, LogicalType, Repetition, Type as Physical};
use parquet::column::writer::ColumnWriter;
use parquet::data_type::ByteArray;
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;

/// One column, borrowed from whichever table type holds it.
pub enum ColumnRef<'a> {
    F64(&'a [f64]),
    I64(&'a [i64]),
    Str(&'a [String]),
    /// Text as indices into a set of values, written as the text itself.
    Category { values: Vec<&'a str>, keys: &'a [u32] },
    Bool(&'a [bool]),
    /// Missing values (and NaNs) are written as nulls: only in [`write_nullable_table`].
    OptF64(&'a [Option<f64>]),
    /// Missing values are written as nulls: only in [`write_nullable_table`].
    OptStr(&'a [Option<String>]),
    /// Missing values are written as nulls: only in [`write_nullable_table`]. Without a
    /// single value it is a column of the Null type, as pyarrow infers from Python's `None`s.
    OptI64(&'a [Option<i64>]),
}

/// Rows converted and handed to the column writer at a time, for columns whose rows must be
/// converted first: a long series is never held twice.
const BATCH: usize = 1 << 16;

fn byte_array(s: &str) -> ByteArray {
    ByteArray::from(s.as_bytes().to_vec())
}

/// Writes a text column's rows, none missing, [`BATCH`] at a time; `optional` gives each a
/// definition level.
fn write_text(
    w: &mut parquet::column::writer::ColumnWriterImpl<'_, parquet::data_type::ByteArrayType>,
    mut rows: impl ExactSizeIterator<Item = ByteArray>,
    optional: bool,
) -> Result<usize, ParquetError> {
    let total = rows.len();
    let levels = optional.then(|| vec![1i16; BATCH.min(total)]);
    let mut batch = Vec::with_capacity(BATCH.min(total));
    loop {
        batch.clear();
        batch.extend(rows.by_ref().take(BATCH));
        if batch.is_empty() {
            return Ok(total);
        }
        w.write_batch(&batch, levels.as_ref().map(|l| &l[..batch.len()]), None)?;
    }
}

impl ColumnRef<'_> {
    /// A text column without a single value: pyarrow's Null type (see the module doc).
    fn all_null(&self) -> bool {
        match self {
            ColumnRef::OptStr(v) => v.iter().all(Option::is_none),
            ColumnRef::OptI64(v) => !v.is_empty() && v.iter().all(Option::is_none),
            _ => false,
        }
    }

    /// The column's Parquet type; `all_null` says whether the whole table (every row group)
    /// has no value in it.
    fn parquet_type(&self, name: &str, repetition: Repetition, all_null: bool) -> Result<Type, ParquetError> {
        let (physical, logical) = match self {
            ColumnRef::F64(_) | ColumnRef::OptF64(_) => (Physical::DOUBLE, None),
            ColumnRef::I64(_) => (Physical::INT64, None),
            ColumnRef::Bool(_) => (Physical::BOOLEAN, None),
            ColumnRef::OptStr(v) if v.is_empty() => (Physical::DOUBLE, None),
            // pyarrow stores its Null type as INT32 with the UNKNOWN (null) logical type.
            _ if all_null => (Physical::INT32, Some(LogicalType::Unknown)),
            ColumnRef::OptI64(_) => (Physical::INT64, None),
            ColumnRef::Str(_) | ColumnRef::Category { .. } | ColumnRef::OptStr(_) => (Physical::BYTE_ARRAY, Some(LogicalType::String)),
        };
        Type::primitive_type_builder(name, physical).with_repetition(repetition).with_logical_type(logical).build()
    }

    /// Writes the values; `optional` gives every row a definition level (1: a value, 0: null).
    fn write(&self, column: &mut ColumnWriter<'_>, optional: bool) -> Result<(), ParquetError> {
        // Definition levels of a column with no missing value.
        let present = |n: usize| optional.then(|| vec![1i16; n]);
        match (self, column) {
            (ColumnRef::F64(v), ColumnWriter::DoubleColumnWriter(w)) => w.write_batch(v, present(v.len()).as_deref(), None),
            (ColumnRef::I64(v), ColumnWriter::Int64ColumnWriter(w)) => w.write_batch(v, present(v.len()).as_deref(), None),
            (ColumnRef::Bool(v), ColumnWriter::BoolColumnWriter(w)) => w.write_batch(v, present(v.len()).as_deref(), None),
            (ColumnRef::Str(v), ColumnWriter::ByteArrayColumnWriter(w)) => write_text(w, v.iter().map(|s| byte_array(s)), optional),
            (ColumnRef::Category { values, keys }, ColumnWriter::ByteArrayColumnWriter(w)) => {
                // One buffer per value, shared by its rows.
                let values: Vec<ByteArray> = values.iter().map(|s| byte_array(s)).collect();
                write_text(w, keys.iter().map(|&k| values[k as usize].clone()), optional)
            }
            (ColumnRef::OptF64(v), ColumnWriter::DoubleColumnWriter(w)) if optional => {
                let value = |x: &Option<f64>| x.filter(|x| !x.is_nan());
                let levels: Vec<i16> = v.iter().map(|x| value(x).is_some() as i16).collect();
                w.write_batch(&v.iter().filter_map(value).collect::<Vec<_>>(), Some(&levels), None)
            }
            (ColumnRef::OptStr(v), ColumnWriter::Int32ColumnWriter(w)) if optional => w.write_batch(&[], Some(&vec![0; v.len()]), None),
            (ColumnRef::OptI64(v), ColumnWriter::Int32ColumnWriter(w)) if optional => w.write_batch(&[], Some(&vec![0; v.len()]), None),
            (ColumnRef::OptI64(v), ColumnWriter::Int64ColumnWriter(w)) if optional => {
                let levels: Vec<i16> = v.iter().map(|x| x.is_some() as i16).collect();
                w.write_batch(&v.iter().flatten().copied().collect::<Vec<_>>(), Some(&levels), None)
            }
            (ColumnRef::OptStr(v), ColumnWriter::DoubleColumnWriter(w)) if optional && v.is_empty() => w.write_batch(&[], Some(&[]), None),
            (ColumnRef::OptStr(v), ColumnWriter::ByteArrayColumnWriter(w)) if optional => {
                let levels: Vec<i16> = v.iter().map(|x| x.is_some() as i16).collect();
                w.write_batch(&v.iter().flatten().map(|s| byte_array(s)).collect::<Vec<_>>(), Some(&levels), None)
            }
            _ => return Err(ParquetError::General("column writer does not match the column's type".into())),
        }
        .map(|_| ())
    }
}

/// Writes `columns` (equal lengths, none with missing values) as the Parquet file `path`,
/// every column REQUIRED.
pub fn write_table(path: &Path, columns: &[(&str, ColumnRef<'_>)]) -> Result<(), ParquetError> {
    write(path, Repetition::REQUIRED, &mut |emit| emit(columns))
}

/// Writes `columns` (equal lengths) as the Parquet file `path`, every column OPTIONAL, as
/// pyarrow writes a pandas frame (see the module doc).
pub fn write_nullable_table(path: &Path, columns: &[(&str, ColumnRef<'_>)]) -> Result<(), ParquetError> {
    write(path, Repetition::OPTIONAL, &mut |emit| emit(columns))
}

/// Hands the columns of one row group to the writer.
pub type Emit<'e> = &'e mut dyn FnMut(&[(&str, ColumnRef<'_>)]) -> Result<(), ParquetError>;

/// Writes a table of `groups` row groups as [`write_nullable_table`] writes one: `group(g,
/// emit)` builds the columns of row group `g` (the same names and kinds in every group) and
/// passes them to `emit`. It is called twice per group, once to find the columns without a
/// single value in the whole table, once to write; so only one group's columns are ever
/// built at a time, however long the table.
pub fn write_nullable_groups(path: &Path, groups: usize, group: &dyn Fn(usize, Emit<'_>) -> Result<(), ParquetError>) -> Result<(), ParquetError> {
    write(path, Repetition::OPTIONAL, &mut |emit| (0..groups.max(1)).try_for_each(|g| group(g, &mut *emit)))
}

/// Hands every row group of a table to `emit`, in order, at least one (an empty one for a
/// table without rows); called twice, and must hand the same groups both times.
pub type Pass<'p> = dyn FnMut(Emit<'_>) -> Result<(), ParquetError> + 'p;

/// Writes the table that `pass` hands over a row group at a time (see [`Pass`]) as the
/// Parquet file `path`, every column OPTIONAL if `nullable` (as [`write_nullable_table`])
/// else REQUIRED (as [`write_table`]): a table read from a file as it is written, never
/// held whole. The first pass finds the columns without a single value in the whole table,
/// the second writes; only the group being handed over is in memory.
pub fn write_passes(path: &Path, nullable: bool, pass: &mut Pass<'_>) -> Result<(), ParquetError> {
    write(path, if nullable { Repetition::OPTIONAL } else { Repetition::REQUIRED }, pass)
}

fn write(path: &Path, repetition: Repetition, pass: &mut Pass<'_>) -> Result<(), ParquetError> {
    // The schema: each column's kind from the first group, the Null type only where no group
    // has a value.
    let mut fields: Vec<(Type, Type)> = Vec::new();
    let mut all_null: Vec<bool> = Vec::new();
    {
        pass(&mut |columns| {
            if fields.is_empty() {
                for (name, c) in columns {
                    fields.push((c.parquet_type(name, repetition, false)?, c.parquet_type(name, repetition, true)?));
                }
                all_null = vec![true; columns.len()];
            }
            if columns.len() != fields.len() {
                return Err(ParquetError::General("row groups with different columns".into()));
            }
            for (null, (_, c)) in all_null.iter_mut().zip(columns) {
                *null &= c.all_null();
            }
            Ok(())
        })?;
    }
    let fields = fields.into_iter().zip(&all_null).map(|((valued, null), &n)| Arc::new(if n { null } else { valued })).collect();
    let schema = Arc::new(Type::group_type_builder("schema").with_fields(fields).build()?);
    let props = Arc::new(WriterProperties::builder().set_compression(Compression::SNAPPY).build());
    let file = File::create(path)?;
    let mut writer = SerializedFileWriter::new(file, schema, props)?;
    {
        pass(&mut |columns| {
            let mut row_group = writer.next_row_group()?;
            for (_, column) in columns {
                let mut out = row_group.next_column()?.ok_or_else(|| ParquetError::General("schema has fewer columns than the table".into()))?;
                column.write(out.untyped(), repetition == Repetition::OPTIONAL)?;
                out.close()?;
            }
            row_group.close()?;
            Ok(())
        })?;
    }
    writer.close()?;
    Ok(())
}
