//! Writes result tables as Parquet files, straight from the engines' columns.
//!
//! A short `pathtwin sim` used to spend most of its time importing pandas and pyarrow to
//! write five small files; writing them here lets the command line skip both. One row group
//! per table, Snappy-compressed (pyarrow's default), every column a flat primitive: `f64` as
//! DOUBLE, `i64` as INT64, `u64` as INT64 annotated UINT_64, text as UTF-8 BYTE_ARRAY,
//! booleans as BOOLEAN; `Option` columns are OPTIONAL (nulls), the others REQUIRED. Readers
//! (pyarrow, pandas, DuckDB, Spark) read these as they read what pyarrow writes.

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
    U64(&'a [u64]),
    Str(&'a [String]),
    Bool(&'a [bool]),
    OptF64(&'a [Option<f64>]),
    OptStr(&'a [Option<String>]),
}

impl ColumnRef<'_> {
    fn parquet_type(&self, name: &str) -> Result<Type, ParquetError> {
        let (physical, logical, repetition) = match self {
            ColumnRef::F64(_) => (Physical::DOUBLE, None, Repetition::REQUIRED),
            ColumnRef::I64(_) => (Physical::INT64, None, Repetition::REQUIRED),
            ColumnRef::U64(_) => (Physical::INT64, Some(LogicalType::integer(64, false)), Repetition::REQUIRED),
            ColumnRef::Str(_) => (Physical::BYTE_ARRAY, Some(LogicalType::String), Repetition::REQUIRED),
            ColumnRef::Bool(_) => (Physical::BOOLEAN, None, Repetition::REQUIRED),
            ColumnRef::OptF64(_) => (Physical::DOUBLE, None, Repetition::OPTIONAL),
            ColumnRef::OptStr(_) => (Physical::BYTE_ARRAY, Some(LogicalType::String), Repetition::OPTIONAL),
        };
        Type::primitive_type_builder(name, physical).with_repetition(repetition).with_logical_type(logical).build()
    }

    /// Writes the values, with definition levels (1 = present) for nullable columns.
    fn write(&self, column: &mut ColumnWriter<'_>) -> Result<(), ParquetError> {
        fn levels<T>(v: &[Option<T>]) -> Vec<i16> {
            v.iter().map(|x| i16::from(x.is_some())).collect()
        }
        fn text<'s>(v: impl Iterator<Item = &'s String>) -> Vec<ByteArray> {
            v.map(|s| ByteArray::from(s.as_bytes().to_vec())).collect()
        }
        match (self, column) {
            (ColumnRef::F64(v), ColumnWriter::DoubleColumnWriter(w)) => w.write_batch(v, None, None),
            (ColumnRef::I64(v), ColumnWriter::Int64ColumnWriter(w)) => w.write_batch(v, None, None),
            // UINT_64 is stored in INT64's bits; readers reinterpret them.
            (ColumnRef::U64(v), ColumnWriter::Int64ColumnWriter(w)) => {
                w.write_batch(&v.iter().map(|&x| x as i64).collect::<Vec<_>>(), None, None)
            }
            (ColumnRef::Str(v), ColumnWriter::ByteArrayColumnWriter(w)) => w.write_batch(&text(v.iter()), None, None),
            (ColumnRef::Bool(v), ColumnWriter::BoolColumnWriter(w)) => w.write_batch(v, None, None),
            (ColumnRef::OptF64(v), ColumnWriter::DoubleColumnWriter(w)) => {
                w.write_batch(&v.iter().flatten().copied().collect::<Vec<_>>(), Some(&levels(v)), None)
            }
            (ColumnRef::OptStr(v), ColumnWriter::ByteArrayColumnWriter(w)) => {
                w.write_batch(&text(v.iter().flatten()), Some(&levels(v)), None)
            }
            _ => return Err(ParquetError::General("column writer does not match the column's type".into())),
        }
        .map(|_| ())
    }
}

/// Writes `columns` (equal lengths) as the Parquet file `path`.
pub fn write_table(path: &Path, columns: &[(&str, ColumnRef<'_>)]) -> Result<(), ParquetError> {
    let fields = columns.iter().map(|(name, c)| c.parquet_type(name).map(Arc::new)).collect::<Result<Vec<_>, _>>()?;
    let schema = Arc::new(Type::group_type_builder("schema").with_fields(fields).build()?);
    let props = Arc::new(WriterProperties::builder().set_compression(Compression::SNAPPY).build());
    let file = File::create(path)?;
    let mut writer = SerializedFileWriter::new(file, schema, props)?;
    let mut group = writer.next_row_group()?;
    for (_, column) in columns {
        let mut out = group.next_column()?.ok_or_else(|| ParquetError::General("schema has fewer columns than the table".into()))?;
        column.write(out.untyped())?;
        out.close()?;
    }
    group.close()?;
    writer.close()?;
    Ok(())
}
