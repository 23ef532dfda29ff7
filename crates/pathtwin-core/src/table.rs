//! Columnar result tables: named, typed columns of equal length. Both engines fill them, with
//! the schemas of [`crate::results`]; `pathtwin-py` writes them to Parquet (one writer) or
//! hands them to Python without copying row by row.

use indexmap::IndexSet;

#[derive(Clone, Debug, PartialEq)]
pub enum Column {
    F64(Vec<f64>),
    I64(Vec<i64>),
    Str(Vec<String>),
    /// Text from a small set, repeated row after row: a time series' flow label or queue
    /// name. Each row is a 4-byte index into the set. As strings of their own those two
    /// columns were most of a long run's memory (a simulated hour of 100 flows sampled every
    /// second: 575 MB at the end, 16 MB without the series).
    Category(Category),
    /// Columns that may lack a value in some rows (what the kernel does not report).
    OptF64(Vec<Option<f64>>),
    OptI64(Vec<Option<i64>>),
    OptStr(Vec<Option<String>>),
}

/// The column type behind [`Column::Category`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Category {
    /// The distinct values, in order of first appearance; a value's index is its key.
    values: IndexSet<String>,
    /// Per row, its value's key.
    keys: Vec<u32>,
}

impl Category {
    fn push(&mut self, text: &str) {
        let key = match self.values.get_index_of(text) {
            Some(k) => k,
            None => self.values.insert_full(text.to_string()).0,
        };
        self.keys.push(u32::try_from(key).expect("fewer than 2^32 distinct values"));
    }

    /// The distinct values, in order of first appearance.
    pub fn values(&self) -> impl ExactSizeIterator<Item = &str> {
        self.values.iter().map(String::as_str)
    }

    /// Per row, its value's index in [`values`](Self::values).
    pub fn keys(&self) -> &[u32] {
        &self.keys
    }

    /// The rows' text, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> {
        self.keys.iter().map(|&k| self.values[k as usize].as_str())
    }
}

impl Column {
    pub fn len(&self) -> usize {
        match self {
            Column::F64(v) => v.len(),
            Column::I64(v) => v.len(),
            Column::Str(v) => v.len(),
            Column::Category(c) => c.keys.len(),
            Column::OptF64(v) => v.len(),
            Column::OptI64(v) => v.len(),
            Column::OptStr(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A table built row by row with a fixed schema.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    pub columns: Vec<(String, Column)>,
}

/// One cell of a row being appended.
pub enum Cell<'a> {
    F(f64),
    I(i64),
    S(String),
    /// Text borrowed from the caller: a category row costs no allocation.
    T(&'a str),
    /// No value, in a column that may lack one (`Kind::Opt…`).
    Null,
}

/// The type of a column in a [`Schema`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    F64,
    I64,
    Str,
    /// Text from a small set, stored as indices (see [`Column::Category`]); it reads as text.
    Category,
    /// Columns whose rows may lack a value ([`Cell::Null`]); written as nulls.
    OptF64,
    OptI64,
    OptStr,
}

/// A table's columns in order: (name, type).
pub type Schema = &'static [(&'static str, Kind)];

impl Table {
    /// An empty table with `schema`'s columns.
    pub fn new(schema: Schema) -> Self {
        let columns = schema
            .iter()
            .map(|&(name, kind)| {
                let col = match kind {
                    Kind::F64 => Column::F64(Vec::new()),
                    Kind::I64 => Column::I64(Vec::new()),
                    Kind::Str => Column::Str(Vec::new()),
                    Kind::Category => Column::Category(Category::default()),
                    Kind::OptF64 => Column::OptF64(Vec::new()),
                    Kind::OptI64 => Column::OptI64(Vec::new()),
                    Kind::OptStr => Column::OptStr(Vec::new()),
                };
                (name.to_string(), col)
            })
            .collect();
        Table { columns }
    }

    /// Makes room for `rows` more rows, if the memory can be had (it is only a hint). A
    /// time series knows its length from the start, and growing it by doubling left as much
    /// freed and spare memory resident as the rows themselves; the room reserved counts in
    /// the process's memory only as rows fill it.
    pub fn reserve(&mut self, rows: usize) {
        for (_, col) in &mut self.columns {
            let _ = match col {
                Column::F64(v) => v.try_reserve_exact(rows),
                Column::I64(v) => v.try_reserve_exact(rows),
                Column::Str(v) => v.try_reserve_exact(rows),
                Column::Category(c) => c.keys.try_reserve_exact(rows),
                Column::OptF64(v) => v.try_reserve_exact(rows),
                Column::OptI64(v) => v.try_reserve_exact(rows),
                Column::OptStr(v) => v.try_reserve_exact(rows),
            };
        }
    }

    /// Appends one row; cells follow the schema's order and types.
    pub fn push(&mut self, row: Vec<Cell<'_>>) {
        assert_eq!(row.len(), self.columns.len(), "row width differs from the schema");
        for ((name, col), cell) in self.columns.iter_mut().zip(row) {
            match (col, cell) {
                (Column::F64(v), Cell::F(x)) => v.push(x),
                (Column::I64(v), Cell::I(x)) => v.push(x),
                (Column::Str(v), Cell::S(x)) => v.push(x),
                (Column::Str(v), Cell::T(x)) => v.push(x.to_string()),
                (Column::Category(c), Cell::S(x)) => c.push(&x),
                (Column::Category(c), Cell::T(x)) => c.push(x),
                (Column::OptF64(v), Cell::F(x)) => v.push(Some(x)),
                (Column::OptI64(v), Cell::I(x)) => v.push(Some(x)),
                (Column::OptStr(v), Cell::S(x)) => v.push(Some(x)),
                (Column::OptStr(v), Cell::T(x)) => v.push(Some(x.to_string())),
                (Column::OptF64(v), Cell::Null) => v.push(None),
                (Column::OptI64(v), Cell::Null) => v.push(None),
                (Column::OptStr(v), Cell::Null) => v.push(None),
                _ => panic!("cell type does not match column {name}"),
            }
        }
    }

    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, |(_, c)| c.len())
    }

    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|(n, _)| n == name).map(|(_, c)| c)
    }

    pub fn f64s(&self, name: &str) -> &[f64] {
        match self.column(name) {
            Some(Column::F64(v)) => v,
            _ => panic!("no f64 column {name}"),
        }
    }

    pub fn i64s(&self, name: &str) -> &[i64] {
        match self.column(name) {
            Some(Column::I64(v)) => v,
            _ => panic!("no i64 column {name}"),
        }
    }

    pub fn strs(&self, name: &str) -> &[String] {
        match self.column(name) {
            Some(Column::Str(v)) => v,
            _ => panic!("no str column {name}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_category_column_reads_back_row_for_row_and_stores_each_value_once() {
        let mut t = Table::new(&[("queue", Kind::Category), ("packets", Kind::I64)]);
        let names = ["r1->r2", "r2->r1", "r1->r2", "r1->r2", "r2->r1"];
        for (i, name) in names.iter().enumerate() {
            t.push(vec![Cell::T(name), Cell::I(i as i64)]);
        }
        t.push(vec![Cell::S("r1->r2".to_string()), Cell::I(5)]);
        let Some(Column::Category(c)) = t.column("queue") else { panic!("not a category column") };
        let expected: Vec<&str> = names.iter().copied().chain(["r1->r2"]).collect();
        assert_eq!(c.iter().collect::<Vec<_>>(), expected);
        assert_eq!(c.values().collect::<Vec<_>>(), ["r1->r2", "r2->r1"]);
        assert_eq!(t.rows(), 6);
    }

    #[test]
    fn reserving_room_changes_no_row() {
        let mut t = Table::new(&[("t", Kind::F64), ("label", Kind::Category), ("name", Kind::Str)]);
        t.reserve(1000);
        t.push(vec![Cell::F(0.5), Cell::T("a"), Cell::T("b")]);
        assert_eq!(t.rows(), 1);
        assert_eq!(t.f64s("t"), [0.5]);
        assert_eq!(t.strs("name"), ["b"]);
    }
}
