//! Columnar result tables: named, typed columns of equal length. The simulator fills them;
//! the Python side turns them into Arrow/Parquet without copying row by row.

use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Column {
    F64(Vec<f64>),
    I64(Vec<i64>),
    Str(Vec<String>),
}

impl Column {
    pub fn len(&self) -> usize {
        match self {
            Column::F64(v) => v.len(),
            Column::I64(v) => v.len(),
            Column::Str(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A table built row by row with a fixed schema.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Table {
    pub columns: Vec<(String, Column)>,
}

/// One cell of a row being appended.
pub enum Cell {
    F(f64),
    I(i64),
    S(String),
}

impl Table {
    /// A table with these (name, type) columns; types are "f64", "i64" or "str".
    pub fn with_schema(schema: &[(&str, &str)]) -> Self {
        let columns = schema
            .iter()
            .map(|&(name, ty)| {
                let col = match ty {
                    "f64" => Column::F64(Vec::new()),
                    "i64" => Column::I64(Vec::new()),
                    "str" => Column::Str(Vec::new()),
                    other => panic!("unknown column type {other}"),
                };
                (name.to_string(), col)
            })
            .collect();
        Table { columns }
    }

    /// Appends one row; cells follow the schema's order and types.
    pub fn push(&mut self, row: Vec<Cell>) {
        assert_eq!(row.len(), self.columns.len(), "row width differs from the schema");
        for ((name, col), cell) in self.columns.iter_mut().zip(row) {
            match (col, cell) {
                (Column::F64(v), Cell::F(x)) => v.push(x),
                (Column::I64(v), Cell::I(x)) => v.push(x),
                (Column::Str(v), Cell::S(x)) => v.push(x),
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
