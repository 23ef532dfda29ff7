//! The result tables that grow with a run's length — `flow_series`, `queue_series` and
//! `packet_flows` — handed out a row group at a time, read from the files they were spilled
//! to during the run ([`crate::spill`]), so that writing them never holds a whole table.
//! Owns [`LongTable`] (a table and where its rows come from) and [`Groups`] (rows cut into
//! [`Table`]s of at most so many rows); each table's rows are made where its records are
//! kept (`sampler.rs`, `flow_records.rs`, and the queue samples here), with the schemas of
//! `pathtwin_core::results`.
//!
//! # Why
//! The hour-long soak (`bench/emu/soak.py`) kept its memory flat during the run, its series
//! on disk, and then read them all back to build its results: 585 563 `flow_series` rows and
//! 276 586 `packet_flows` rows made a 629-MB peak after a run that had stayed at 32 MB. A
//! long table is now read from its spill file and handed on a group at a time (Parquet's
//! row groups, `pathtwin-py`'s `tables.rs`); only a run whose results stay in memory (no
//! result directory) gathers one whole ([`LongTable::to_table`]).

use pathtwin_core::driver::QueueSample;
use pathtwin_core::results;
use pathtwin_core::table::{Schema, Table};

use crate::spill::SpillThread;

/// Where a group goes: a Parquet writer's row group, or the whole table in memory.
pub type Sink<'s> = dyn FnMut(Table) -> Result<(), String> + 's;

/// Rows cut into tables of at most `size` rows, each handed to the sink as it fills.
pub struct Groups<'s> {
    schema: Schema,
    size: usize,
    table: Table,
    sink: &'s mut Sink<'s>,
    handed: usize,
    /// The sink's first error: the rows after it are dropped, and it is returned.
    failed: Option<String>,
}

impl<'s> Groups<'s> {
    fn new(schema: Schema, size: usize, sink: &'s mut Sink<'s>) -> Groups<'s> {
        Groups { schema, size: size.max(1), table: Table::new(schema), sink, handed: 0, failed: None }
    }

    /// Appends one row, written into the current group by `fill` (one of `results`' push
    /// functions, or a row of cells), and hands the group on when it is full.
    pub fn row(&mut self, fill: impl FnOnce(&mut Table)) {
        if self.failed.is_some() {
            return;
        }
        fill(&mut self.table);
        if self.table.rows() >= self.size {
            self.hand_on();
        }
    }

    fn hand_on(&mut self) {
        let full = std::mem::replace(&mut self.table, Table::new(self.schema));
        self.handed += 1;
        if let Err(e) = (self.sink)(full) {
            self.failed = Some(e);
        }
    }

    /// Hands on the last group (the only one, empty, of a table without rows); returns how
    /// many groups were handed on, or the sink's first error.
    fn finish(mut self) -> Result<usize, String> {
        if self.failed.is_none() && (self.table.rows() > 0 || self.handed == 0) {
            self.hand_on();
        }
        self.failed.map_or(Ok(self.handed), Err)
    }
}

/// Where a long table's rows come from; each call reads them from the start.
pub trait Rows: Send {
    /// Puts every row, in order, into `groups`; an error reading them back is one line.
    fn rows(&mut self, groups: &mut Groups<'_>) -> Result<(), String>;
}

/// A result table that grows with a run's length, not yet read (see the module doc).
pub struct LongTable {
    pub name: &'static str,
    pub schema: Schema,
    rows: Box<dyn Rows>,
}

impl LongTable {
    pub fn new(name: &'static str, schema: Schema, rows: Box<dyn Rows>) -> LongTable {
        LongTable { name, schema, rows }
    }

    /// Hands the table to `sink` in groups of `group_rows` rows (the last may be shorter; a
    /// table without rows is one empty group), in order; returns how many groups. Holds one
    /// group at a time; may be called again, and reads the rows again.
    pub fn for_each_group(&mut self, group_rows: usize, sink: &mut Sink<'_>) -> Result<usize, String> {
        // A reborrow with the lifetime `Groups` wants of its sink.
        let mut sink = |t: Table| sink(t);
        let mut groups = Groups::new(self.schema, group_rows, &mut sink);
        let read = self.rows.rows(&mut groups);
        let handed = groups.finish()?;
        read.map(|()| handed).map_err(|e| format!("{}: {e}", self.name))
    }

    /// The whole table in memory, for a run whose results stay in memory.
    pub fn to_table(&mut self) -> Result<Table, String> {
        let mut whole = None;
        self.for_each_group(usize::MAX, &mut |t| {
            whole = Some(t);
            Ok(())
        })?;
        Ok(whole.unwrap_or_else(|| Table::new(self.schema)))
    }
}

/// A result table: built whole (a table whose size the run's length does not set), or long.
pub enum ResultTable {
    Whole(Table),
    Long(LongTable),
}

impl ResultTable {
    /// The whole table in memory (see [`LongTable::to_table`]).
    pub fn into_table(self) -> Result<Table, String> {
        match self {
            ResultTable::Whole(t) => Ok(t),
            ResultTable::Long(mut l) => l.to_table(),
        }
    }
}

/// `queue_series`' rows: the engine's queue samples, in the order they were taken, each
/// named by its element.
pub struct QueueSeriesRows {
    pub samples: SpillThread<QueueSample>,
    /// Element names, by element index.
    pub names: Vec<String>,
}

impl Rows for QueueSeriesRows {
    fn rows(&mut self, groups: &mut Groups<'_>) -> Result<(), String> {
        let names = &self.names;
        self.samples.for_each(|s| groups.row(|t| results::push_queue_sample(t, &s, &names[s.element])))
    }
}

/// The rows of `parts`, one after the other, column by column as text (`None` for a missing
/// value, NaN as "NaN"): what a reader of a file of these row groups sees, to compare tables
/// built in groups with a table built whole.
#[cfg(test)]
pub(crate) fn columns_as_text(parts: &[Table]) -> Vec<(String, Vec<Option<String>>)> {
    use pathtwin_core::table::Column;
    let text = |c: &Column| -> Vec<Option<String>> {
        match c {
            Column::F64(v) => v.iter().map(|x| Some(format!("{x:?}"))).collect(),
            Column::I64(v) => v.iter().map(|x| Some(x.to_string())).collect(),
            Column::Str(v) => v.iter().cloned().map(Some).collect(),
            Column::Category(c) => c.iter().map(|s| Some(s.to_string())).collect(),
            Column::OptF64(v) => v.iter().map(|x| x.map(|x| format!("{x:?}"))).collect(),
            Column::OptI64(v) => v.iter().map(|x| x.map(|x| x.to_string())).collect(),
            Column::OptStr(v) => v.clone(),
        }
    };
    let mut out: Vec<(String, Vec<Option<String>>)> = parts[0].columns.iter().map(|(n, _)| (n.clone(), Vec::new())).collect();
    for p in parts {
        assert_eq!(p.columns.len(), out.len(), "groups with different columns");
        for ((name, all), (n, c)) in out.iter_mut().zip(&p.columns) {
            assert_eq!(name, n);
            all.extend(text(c));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pathtwin_core::results::QUEUE_SERIES;

    fn sample(i: u64) -> QueueSample {
        QueueSample {
            t_ns: i * 100_000_000,
            element: (i % 2) as usize,
            packets: i % 7,
            bytes: (i % 7) * 1500,
            drops: i / 10,
            placeholder_packets: 3,
            placeholder_bytes: 4500,
            departed_bytes: i * 12_500,
            abw_bps: 1e7,
            active_flows: i % 3,
            avg_queue: f64::NAN,
        }
    }

    /// `n` rows through a spill thread, as a run records them.
    fn queue_series(n: u64) -> LongTable {
        let mut samples = SpillThread::new("long-tables-test");
        (0..n).for_each(|i| samples.push(sample(i)));
        LongTable::new("queue_series", QUEUE_SERIES, Box::new(QueueSeriesRows { samples, names: vec!["a->b".into(), "b->a".into()] }))
    }

    /// The table built at once, as the results were built before: the expectation.
    fn in_memory(n: u64) -> Table {
        let mut t = Table::new(QUEUE_SERIES);
        let names = ["a->b", "b->a"];
        (0..n).map(sample).for_each(|s| results::push_queue_sample(&mut t, &s, names[s.element]));
        t
    }

    /// Groups of a size smaller than the table hold its rows in order, every group full but
    /// the last, and a second reading gives the same.
    #[test]
    fn groups_hold_the_rows_of_the_table_built_at_once() {
        let n = 5 * 256 + 17;
        let mut long = queue_series(n);
        for _ in 0..2 {
            let mut parts = Vec::new();
            let handed = long.for_each_group(300, &mut |t| {
                parts.push(t);
                Ok(())
            });
            assert_eq!(handed, Ok(parts.len()));
            let sizes: Vec<usize> = parts.iter().map(Table::rows).collect();
            let full_then_rest: Vec<usize> = (0..n as usize).step_by(300).map(|start| (n as usize - start).min(300)).collect();
            assert_eq!((sizes.len(), &sizes), (5, &full_then_rest));
            assert_eq!(columns_as_text(&parts), columns_as_text(&[in_memory(n)]));
        }
        assert_eq!(columns_as_text(&[long.to_table().unwrap()]), columns_as_text(&[in_memory(n)]));
    }

    /// A table without rows is one empty group (a file with its columns and no row).
    #[test]
    fn a_table_without_rows_is_one_empty_group() {
        let mut sizes = Vec::new();
        let handed = queue_series(0).for_each_group(100, &mut |t| {
            sizes.push(t.rows());
            Ok(())
        });
        assert_eq!((handed, sizes), (Ok(1), vec![0]));
    }

    /// The sink's error stops the table and is returned; no later group is handed on.
    #[test]
    fn the_sinks_error_ends_the_table() {
        let mut calls = 0;
        let handed = queue_series(1000).for_each_group(100, &mut |_| {
            calls += 1;
            if calls == 2 {
                Err("disk full".into())
            } else {
                Ok(())
            }
        });
        assert_eq!((handed, calls), (Err("disk full".to_string()), 2));
    }
}
