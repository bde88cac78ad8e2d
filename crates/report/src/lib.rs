//! A report as data. A domain crate (the capacity planner, the observer, a comparison)
//! builds its report as [`Part`]s: a heading and its blocks, each a [`Table`] of typed
//! cells, a sentence, a list, or a chart that keeps its table. Each reader renders the same
//! parts: [`markdown`] here, for the CLI and the lab's downloads; the lab's workers write
//! HTML (the walkable-chart markup convention lives there). A chart carries its layout in
//! its viewBox's units, and its table states every point it draws, so a reader without
//! pictures (Markdown, a screen reader) loses nothing.
//!
//! Plain data with serde, no I/O: it builds for wasm32 and costs a worker nothing but what
//! it renders.

use serde::{Deserialize, Serialize};

mod markdown;

pub use markdown::{markdown, table_markdown};

/// One table cell after the row's header.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    pub text: String,
    /// The number in full, for the cell's `data-value`.
    pub value: Option<String>,
}

impl Cell {
    /// Words, or a number with no exact value to give.
    pub fn text(text: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            value: None,
        }
    }

    /// A number shown as `text`, written in full in the cell's `data-value`.
    pub fn number(text: impl Into<String>, value: impl ToString) -> Cell {
        Cell {
            text: text.into(),
            value: Some(value.to_string()),
        }
    }
}

/// One body row of a table: its class, its header cell and its other cells.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub class: Option<String>,
    pub header: String,
    pub cells: Vec<Cell>,
}

impl Row {
    /// A row with no class.
    pub fn new(header: impl Into<String>, cells: Vec<Cell>) -> Row {
        Row {
            class: None,
            header: header.into(),
            cells,
        }
    }

    /// A row of words: the first is its header, the rest its cells (none for no words).
    pub fn texts(words: &[String]) -> Row {
        let (header, cells) = words
            .split_first()
            .map_or(("", &[][..]), |(h, c)| (h.as_str(), c));
        Row::new(header, cells.iter().map(Cell::text).collect())
    }
}

/// A whole table: its class and id (for the page's styles and tests), its caption, one row
/// of column headers, and the body rows.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Table {
    pub class: String,
    pub id: Option<String>,
    pub caption: String,
    pub headers: Vec<String>,
    pub rows: Vec<Row>,
}

impl Table {
    /// A table that mirrors a chart or stands alone as one (class `mirror`), with its id.
    pub fn mirror(id: &str, caption: impl Into<String>, headers: &[&str], rows: Vec<Row>) -> Table {
        Table {
            class: "mirror".into(),
            id: Some(id.into()),
            caption: caption.into(),
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows,
        }
    }
}

/// A chart's viewBox (`width` × `height`) and the margins round its plot, all in the
/// viewBox's units.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Frame {
    pub width: f64,
    pub height: f64,
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
}

impl Frame {
    /// The plot's left and right edges.
    pub fn x_span(&self) -> (f64, f64) {
        (self.left, self.width - self.right)
    }

    /// The plot's top and bottom edges (y grows downwards).
    pub fn y_span(&self) -> (f64, f64) {
        (self.top, self.height - self.bottom)
    }
}

/// One point of a chart: a configuration of the capacity sweep, or a window of the canary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChartPoint {
    /// The row of the chart's table that states it (`data-point`, for the keyboard walk).
    pub row: usize,
    pub x: f64,
    pub y: f64,
    /// The figure its height draws, in the y axis's units: what it sounds as.
    pub value: f64,
    pub passes: bool,
    pub chosen: bool,
    /// Its tooltip: the configuration and its figures.
    pub title: String,
}

/// One part of the report: a heading and what it holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// The heading's id, which the part's `aria-labelledby` names.
    pub id: String,
    pub title: String,
    pub blocks: Vec<Block>,
}

/// What a part holds, in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Block {
    Table(Table),
    Text(String),
    List { class: String, items: Vec<String> },
    Timeline(Box<TimelineChart>),
    Intervals(Box<IntervalChart>),
    Rows(Box<RowsChart>),
}

/// One or two figures per row, drawn as bars across a shared scale, each row labelled on
/// the left and indented by its level: a comparison's measures step by step, a tree of
/// paths node by node. A value past the scale (an infinite KL) is drawn full length in the
/// class `past`. The table holds the same rows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RowsChart {
    pub caption: String,
    /// The picture in a sentence: its `aria-label`.
    pub summary: String,
    /// The value at the scale's far end, and the axis's label.
    pub scale: f64,
    pub axis_label: String,
    /// Each series' class (`cmp-a`, `cmp-b`); a row has one value per series.
    pub series: Vec<String>,
    pub rows: Vec<ChartRow>,
    pub legend: String,
    pub table: Table,
}

/// One row of a [`RowsChart`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChartRow {
    pub label: String,
    /// Its level, from 0: how far its label is indented.
    pub level: usize,
    pub values: Vec<f64>,
    /// Written past the longest bar.
    pub end_text: String,
    /// Its tooltip.
    pub title: String,
}

/// A figure over time, window by window, against a level, with one span marked: the
/// canary's p99 TTFT per detector window against the SLO, the detection window marked.
/// The table holds the same windows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimelineChart {
    pub frame: Frame,
    pub caption: String,
    /// The picture in a sentence: its `aria-label`.
    pub summary: String,
    pub x_label: String,
    pub y_label: String,
    pub x_ticks: Vec<(f64, String)>,
    pub y_ticks: Vec<(f64, String)>,
    /// The line through the windows, broken where a window had nothing to measure.
    pub lines: Vec<Vec<(f64, f64)>>,
    /// Every measured window; `passes` is false where it breached a gate.
    pub points: Vec<ChartPoint>,
    /// y of the level (the SLO), and its label.
    pub level_y: f64,
    pub level_label: String,
    /// The marked span's x from and to, and its label.
    pub marked: Option<(f64, f64, String)>,
    pub table: Table,
}

/// A figure for each of a few named groups, side by side, each with its 95 % interval when
/// it has one: the Observe panel's p99 TTFT and outcome rate per version and slice. Groups
/// that breached a detector are marked. The table holds the same groups.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IntervalChart {
    pub frame: Frame,
    pub caption: String,
    /// The picture in a sentence: its `aria-label`.
    pub summary: String,
    pub y_label: String,
    pub y_ticks: Vec<(f64, String)>,
    pub points: Vec<IntervalPoint>,
    pub legend: String,
    pub table: Table,
}

/// One group of an [`IntervalChart`], in the chart's viewBox units; the table's row of the
/// same index states it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IntervalPoint {
    pub x: f64,
    pub y: f64,
    /// The figure y draws, in the axis's units: what it sounds as.
    pub value: f64,
    /// y of the interval's two ends.
    pub interval: Option<(f64, f64)>,
    /// Under the axis.
    pub label: String,
    /// Its tooltip: the group and its figure in words.
    pub title: String,
    /// Whether a detector fired on this group.
    pub flagged: bool,
}

/// `text` as a sentence: its first letter a capital, ending in one full stop (a message
/// from an error, which ends in none, becomes one the page or a report can print).
pub fn sentence(text: impl Into<String>) -> String {
    let text = text.into();
    let trimmed = text.trim_end().trim_end_matches('.');
    let mut chars = trimmed.chars();
    match chars.next() {
        Some(first) => format!("{}{}.", first.to_uppercase(), chars.as_str()),
        None => text,
    }
}

impl Block {
    /// The table every block but a sentence or a list holds: a chart's is the one that
    /// states its points.
    pub fn table(&self) -> Option<&Table> {
        match self {
            Block::Table(table) => Some(table),
            Block::Timeline(c) => Some(&c.table),
            Block::Intervals(c) => Some(&c.table),
            Block::Rows(c) => Some(&c.table),
            Block::Text(_) | Block::List { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentence_has_one_capital_and_one_full_stop() {
        assert_eq!(sentence("top-p 2 is invalid."), "Top-p 2 is invalid.");
        assert_eq!(sentence("min-p 3 is invalid"), "Min-p 3 is invalid.");
        assert_eq!(sentence(""), "");
    }
}
