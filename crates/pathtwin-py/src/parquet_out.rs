//! Writes result tables as Parquet files, straight from the engines' columns.
//!
//! A short `pathtwin sim` used to spend most of its time importing pandas and pyarrow to
//! write five small files; writing them here lets the command line skip both. One row group
//! per table, Snappy-compressed (pyarrow's default), every column a flat REQUIRED primitive:
//! `f64` as DOUBLE, `i64` as INT64, text as UTF-8 BYTE_ARRAY. Readers (pyarrow, pandas,
//! DuckDB, Spark) read these as they read what pyarrow writes.

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
}

impl ColumnRef<'_> {
    fn parquet_type(&self, name: &str) -> Result<Type, ParquetError> {
        let (physical, logical) = match self {
            ColumnRef::F64(_) => (Physical::DOUBLE, None),
            ColumnRef::I64(_) => (Physical::INT64, None),
            ColumnRef::Str(_) => (Physical::BYTE_ARRAY, Some(LogicalType::String)),
        };
        Type::primitive_type_builder(name, physical).with_repetition(Repetition::REQUIRED).with_logical_type(logical).build()
    }

    fn write(&self, column: &mut ColumnWriter<'_>) -> Result<(), ParquetError> {
        match (self, column) {
            (ColumnRef::F64(v), ColumnWriter::DoubleColumnWriter(w)) => w.write_batch(v, None, None),
            (ColumnRef::I64(v), ColumnWriter::Int64ColumnWriter(w)) => w.write_batch(v, None, None),
            (ColumnRef::Str(v), ColumnWriter::ByteArrayColumnWriter(w)) => {
                w.write_batch(&v.iter().map(|s| ByteArray::from(s.as_bytes().to_vec())).collect::<Vec<_>>(), None, None)
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
