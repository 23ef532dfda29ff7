//! Result tables across the boundary, for both engines: each [`Table`] (its schema from
//! `pathtwin_core::results`) is written as `<name>.parquet` by the one Parquet writer, or
//! handed to Python as `{column: list}` without copying row by row.

use std::path::Path;

use pathtwin_core::table::{Column, Table};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use parquet::errors::ParquetError;

use pathtwin_core::table::Kind;
use pathtwin_emu::long_tables::LongTable;

use crate::parquet_out::{write_nullable_groups, write_passes, write_table as write_required, ColumnRef};

fn column_ref(c: &Column) -> ColumnRef<'_> {
    match c {
        Column::F64(v) => ColumnRef::F64(v),
        Column::I64(v) => ColumnRef::I64(v),
        Column::Str(v) => ColumnRef::Str(v),
        Column::Category(c) => ColumnRef::Category { values: c.values().collect(), keys: c.keys() },
        Column::OptF64(v) => ColumnRef::OptF64(v),
        Column::OptI64(v) => ColumnRef::OptI64(v),
        Column::OptStr(v) => ColumnRef::OptStr(v),
    }
}

/// Whether a table has columns that may lack values: its file then has every column
/// OPTIONAL, as pyarrow writes a pandas frame; otherwise every column is REQUIRED.
fn nullable(t: &Table) -> bool {
    t.columns.iter().any(|(_, c)| matches!(c, Column::OptF64(_) | Column::OptI64(_) | Column::OptStr(_)))
}

/// The one-line error of a table that could not be written.
fn cannot_write(path: &Path, e: impl std::fmt::Display) -> String {
    format!("{}: cannot write ({e})", path.display())
}

/// Runs `write` on `<path>.partial` and renames that to `path` once it is complete, so that
/// a table that could not be written whole (a full disk) leaves no truncated file that a
/// reader would take for the table: the partial file is removed and the error returned.
fn whole_or_nothing(path: &Path, write: impl FnOnce(&Path) -> Result<(), ParquetError>) -> Result<(), String> {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = std::path::PathBuf::from(partial);
    let done = write(&partial).map_err(|e| cannot_write(path, e)).and_then(|()| std::fs::rename(&partial, path).map_err(|e| cannot_write(path, e)));
    if done.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    done
}

/// Writes `table` as the Parquet file `path` (whole or not at all).
pub fn write(path: &Path, table: &Table) -> Result<(), String> {
    let columns: Vec<_> = table.columns.iter().map(|(n, c)| (n.as_str(), column_ref(c))).collect();
    whole_or_nothing(path, |to| if nullable(table) { write_nullable_groups(to, 1, &|_, emit| emit(&columns)) } else { write_required(to, &columns) })
}

/// Rows per row group of a long table's file ([`write_long`]): one group's columns are built
/// and encoded at a time (`flow_series`' 29 columns: about 6 MB), where the whole table's
/// were hundreds of MB after an hour. Readers take groups of this size in their stride
/// (DuckDB writes 122 880 rows a group); 36 of them for the hour-long soak's `flow_series`.
pub const LONG_TABLE_GROUP_ROWS: usize = 16_384;

/// Writes a table that grows with a run's length as the Parquet file `path` (whole or not at
/// all), read from where the run spilled it a row group of `group_rows` rows at a time: the
/// same columns and rows, in the same order, as [`write`] writes of the whole table, and the
/// same repetition (OPTIONAL if its schema has a column that may lack values). Returns the
/// row groups written.
pub fn write_long(path: &Path, table: &mut LongTable, group_rows: usize) -> Result<usize, String> {
    let nullable = table.schema.iter().any(|(_, k)| matches!(k, Kind::OptF64 | Kind::OptI64 | Kind::OptStr));
    let mut groups = 0;
    whole_or_nothing(path, |to| {
        write_passes(to, nullable, &mut |emit| {
            // Both passes count; the second's is the file's.
            groups = table
                .for_each_group(group_rows, &mut |t| {
                    let columns: Vec<_> = t.columns.iter().map(|(n, c)| (n.as_str(), column_ref(c))).collect();
                    emit(&columns).map_err(|e| e.to_string())
                })
                .map_err(ParquetError::General)?;
            Ok(())
        })
    })?;
    Ok(groups)
}

/// Writes each `(name, table)` as `<dir>/<name>.parquet`, every one that can be: a table
/// that cannot be written (a full disk) does not stop the smaller ones after it. Returns the
/// names written and the one-line errors of the others.
pub fn write_all<'n>(dir: &Path, tables: &[(&'n str, &Table)]) -> (Vec<&'n str>, Vec<String>) {
    let (mut written, mut failed) = (Vec::new(), Vec::new());
    for (name, t) in tables {
        match write(&dir.join(format!("{name}.parquet")), t) {
            Ok(()) => written.push(*name),
            Err(why) => failed.push(why),
        }
    }
    (written, failed)
}

/// Column names of table `name` as `engine` ("sim" or "emu") writes it
/// (`pathtwin_core::results`), for Python code that checks or reads a table by its columns.
#[pyfunction]
pub fn table_columns(engine: &str, name: &str) -> PyResult<Vec<&'static str>> {
    let schema = pathtwin_core::results::schema(engine, name)
        .ok_or_else(|| pyo3::exceptions::PyValueError::new_err(format!("the {engine} engine writes no table {name:?}")))?;
    Ok(schema.iter().map(|(n, _)| *n).collect())
}

/// `{column: list}` of `t`; a missing value is `None`.
pub fn to_dict<'py>(py: Python<'py>, t: &Table) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, col) in &t.columns {
        match col {
            Column::F64(v) => d.set_item(name, v)?,
            Column::I64(v) => d.set_item(name, v)?,
            Column::Str(v) => d.set_item(name, v)?,
            Column::Category(c) => {
                // One Python string per value, shared by its rows.
                let values: Vec<Bound<'py, PyString>> = c.values().map(|s| PyString::new(py, s)).collect();
                d.set_item(name, PyList::new(py, c.keys().iter().map(|&k| &values[k as usize]))?)?
            }
            Column::OptF64(v) => d.set_item(name, v)?,
            Column::OptI64(v) => d.set_item(name, v)?,
            Column::OptStr(v) => d.set_item(name, v)?,
        }
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use pathtwin_core::driver::QueueSample;
    use pathtwin_core::results::{self, KERNEL_FLOW_SERIES, QUEUE_SERIES};
    use pathtwin_emu::emulator::kernel_flow_series;
    use pathtwin_emu::long_tables::{Groups, LongTable, QueueSeriesRows, Rows};
    use pathtwin_emu::sampler::{push_flow_series_row, FlowSeriesRow};
    use pathtwin_emu::spill::SpillThread;

    /// What a reader sees of a Parquet file: its schema as text, its row groups' sizes, its
    /// rows as text.
    fn read(path: &Path) -> (String, Vec<i64>, Vec<String>) {
        let reader = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
        let mut schema = Vec::new();
        parquet::schema::printer::print_schema(&mut schema, reader.metadata().file_metadata().schema());
        let groups = reader.metadata().row_groups().iter().map(|g| g.num_rows()).collect();
        let rows = reader.get_row_iter(None).unwrap().map(|r| r.unwrap().to_string()).collect();
        (String::from_utf8(schema).unwrap(), groups, rows)
    }

    /// Writes `whole` with the in-memory writer and `long` a row group of `group_rows` at a
    /// time; returns what a reader sees of each, and the groups `write_long` reported.
    fn both(whole: &Table, long: &mut LongTable, group_rows: usize) -> ((String, Vec<i64>, Vec<String>), (String, Vec<i64>, Vec<String>), usize) {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("whole.parquet"), dir.path().join("long.parquet"));
        write(&a, whole).unwrap();
        let groups = write_long(&b, long, group_rows).unwrap();
        (read(&a), read(&b), groups)
    }

    fn queue_sample(i: u64) -> QueueSample {
        QueueSample {
            t_ns: i * 100_000_000,
            element: (i % 3) as usize,
            packets: i % 11,
            bytes: (i % 11) * 1500,
            placeholder_packets: i % 5,
            placeholder_bytes: (i % 5) * 1500,
            drops: i / 17,
            departed_bytes: i * 12_500,
            abw_bps: 1e7 + i as f64,
            active_flows: i % 4,
            avg_queue: if i % 2 == 0 { f64::NAN } else { i as f64 / 3.0 },
        }
    }

    /// `queue_series` (REQUIRED columns, a category column) from a spill thread, in groups of
    /// 128 rows, is the file the in-memory writer makes of the table built whole: the same
    /// schema and rows, in row groups of 128 but the last.
    #[test]
    fn a_spilled_queue_series_written_in_groups_is_the_whole_tables_file() {
        let names = ["a->r", "r->b", "b->a"];
        let n = 1000;
        let mut samples = SpillThread::new("tables-test");
        let mut whole = Table::new(QUEUE_SERIES);
        for s in (0..n).map(queue_sample) {
            results::push_queue_sample(&mut whole, &s, names[s.element]);
            samples.push(s);
        }
        let rows = QueueSeriesRows { samples, names: names.iter().map(|s| s.to_string()).collect() };
        let mut long = LongTable::new("queue_series", QUEUE_SERIES, Box::new(rows));
        let ((schema_w, groups_w, rows_w), (schema_l, groups_l, rows_l), reported) = both(&whole, &mut long, 128);
        assert_eq!(schema_l, schema_w);
        assert_eq!(rows_l.len(), n as usize);
        assert_eq!(rows_l, rows_w);
        assert_eq!(groups_w, [n as i64]);
        let mut want = vec![128; 7];
        want.push(n as i64 - 7 * 128);
        assert_eq!((groups_l, reported), (want, 8));
    }

    /// Rows of a `flow_series` in memory, as a long table's source.
    struct InMemory(Vec<FlowSeriesRow>);

    impl Rows for InMemory {
        fn rows(&mut self, groups: &mut Groups<'_>) -> Result<(), String> {
            self.0.iter().for_each(|r| groups.row(|t| push_flow_series_row(t, r)));
            Ok(())
        }
    }

    fn flow_series_row(i: u32, n: u32) -> FlowSeriesRow {
        FlowSeriesRow {
            time_s: i as f64 * 0.1,
            flow: i % 3,
            label: format!("a->b#{}", i % 3),
            src: "a".into(),
            dst: "b".into(),
            src_port: 40_000 + (i % 3) as u16,
            dst_port: 5201,
            cwnd_bytes: 14_480 * i as i64,
            ssthresh_bytes: i64::MAX,
            srtt_ms: if i % 7 == 0 { f64::NAN } else { 20.5 },
            goodput_bps: 1e6 * i as f64,
            delivered_bytes: 1000 * i as i64,
            retransmits: (i / 50) as i64,
            // Values only in a middle group: the column is text, not the Null type.
            cc: (n / 2..n / 2 + 10).contains(&i).then(|| "cubic".to_string()),
            state: 1,
            ca_state: Some((i % 5) as u8),
            rto_retransmits: None,
            rttvar_ms: Some(3.25),
            min_rtt_ms: (i % 2 == 0).then_some(20.0),
            rto_ms: Some(204.0),
            mss: Some(1448),
            cwnd_segments: Some(10 * i),
            unacked_segments: Some(i % 9),
            // Never a value: the Null type, as pyarrow writes a column of Nones.
            lost_segments: None,
            delivery_rate_bps: Some(8e6),
            pacing_rate_bps: None,
            bytes_sent: Some(1448 * i as u64),
            bytes_retrans: Some(0),
            bytes_received: None,
        }
    }

    /// A nullable table (`flow_series`' OPTIONAL columns) in groups smaller than it: a column
    /// with values only in a middle group keeps its type, a column never valued is the Null
    /// type, as in the file the whole table makes; rows and NaNs (nulls) alike.
    #[test]
    fn a_nullable_table_written_in_groups_is_the_whole_tables_file() {
        let n = 500;
        let rows: Vec<FlowSeriesRow> = (0..n).map(|i| flow_series_row(i, n)).collect();
        let whole = kernel_flow_series(&rows);
        let mut long = LongTable::new("flow_series", KERNEL_FLOW_SERIES, Box::new(InMemory(rows)));
        let ((schema_w, _, rows_w), (schema_l, groups_l, rows_l), reported) = both(&whole, &mut long, 64);
        assert!(schema_w.contains("OPTIONAL BYTE_ARRAY cc (STRING)"), "{schema_w}");
        assert!(schema_w.contains("OPTIONAL INT32 lost_segments (UNKNOWN)"), "{schema_w}");
        assert_eq!(schema_l, schema_w);
        assert_eq!(rows_l, rows_w);
        assert_eq!((groups_l.len(), reported, groups_l.iter().sum::<i64>()), (8, 8, n as i64));
    }

    /// A long table without rows is a file of its columns and no row, as the whole empty
    /// table's.
    #[test]
    fn an_empty_long_table_is_the_empty_tables_file() {
        let whole = Table::new(QUEUE_SERIES);
        let rows = QueueSeriesRows { samples: SpillThread::new("tables-test"), names: Vec::new() };
        let mut long = LongTable::new("queue_series", QUEUE_SERIES, Box::new(rows));
        let ((schema_w, _, rows_w), (schema_l, _, rows_l), _) = both(&whole, &mut long, 64);
        assert_eq!((schema_l, rows_l.len()), (schema_w, rows_w.len()));
    }
}
