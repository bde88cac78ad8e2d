//! The one chart: bars in SVG for the eye and the same rows as an HTML table, always in the
//! DOM, for screen readers, for `view=table` and for tests that read each cell's
//! `data-value`. A panel builds one [`Bar`] per row, holding both what the bar draws and
//! what its table row says, and [`BarChart`] renders the picture and the table from that one
//! list, so they cannot disagree.
//!
//! Accessibility, kept here once: the summary is a takeaway sentence, the chart's visible
//! caption and its accessible name; the SVG is a chart the keyboard walks
//! ([`walk`](crate::widgets::walk): bar i is `data-point="i"`, the table's row i); the table
//! has a caption, its column headers are `scope="col"` and each row's header is
//! `scope="row"`.

use leptos::prelude::*;
use report::{Cell, Row};

use crate::widgets::walk;

/// Room above the tallest column (more when columns carry end text), and under the baseline
/// for the ticks.
const TOP: f64 = 8.0;
const TOP_WITH_END_TEXT: f64 = 16.0;
const AXIS: f64 = 18.0;
/// Room on the left of a column chart for its marks' labels.
const MARK_LABELS: f64 = 72.0;
/// Room on the right of a row chart for the text after each bar.
const END_TEXT: f64 = 70.0;
/// A bar takes this share of its slot; the rest is the gap between bars.
const FILL: f64 = 0.7;
/// The most ticks a column chart labels; with more columns, every n-th is labelled.
const MOST_TICKS: usize = 16;

/// One row: a bar of the chart and the table row that states it.
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    label: String,
    tick: String,
    value: f64,
    class: &'static str,
    base: Option<(f64, &'static str)>,
    end_text: Option<String>,
    row_class: Option<&'static str>,
    group: Option<String>,
    sound: Option<f64>,
    cells: Vec<Cell>,
}

impl Bar {
    /// A bar as long as `value` (infinite: past the scale, drawn full length), of class
    /// `bar`, whose table row is headed `label`, also the bar's tick unless
    /// [`tick`](Bar::tick) says otherwise.
    pub fn new(label: impl Into<String>, value: f64) -> Bar {
        let label = label.into();
        Bar {
            tick: label.clone(),
            label,
            value,
            class: "bar",
            base: None,
            end_text: None,
            row_class: None,
            group: None,
            sound: None,
            cells: Vec::new(),
        }
    }

    /// The bar's label on the chart's axis, when it is shorter than the row's header.
    pub fn tick(mut self, tick: impl Into<String>) -> Bar {
        self.tick = tick.into();
        self
    }

    /// The bar's classes, in place of `bar`.
    pub fn class(mut self, class: &'static str) -> Bar {
        self.class = class;
        self
    }

    /// A part from the baseline up to `base`, drawn in its own class, with the bar stacked
    /// on it up to its value.
    pub fn on(mut self, base: f64, class: &'static str) -> Bar {
        self.base = Some((base, class));
        self
    }

    /// Text written just past the bar's end.
    pub fn end_text(mut self, text: impl Into<String>) -> Bar {
        self.end_text = Some(text.into());
        self
    }

    /// The class of the bar's table row.
    pub fn row_class(mut self, class: &'static str) -> Bar {
        self.row_class = Some(class);
        self
    }

    /// The group the row walks in, between the chart and its bars: a stage's kept and
    /// removed tokens.
    pub fn group(mut self, group: impl Into<String>) -> Bar {
        self.group = Some(group.into());
        self
    }

    /// What the bar sounds as, when not its length: a removed token's probability (0), not
    /// the hollow bar of what it would have had.
    pub fn sound(mut self, value: f64) -> Bar {
        self.sound = Some(value);
        self
    }

    /// The row's next cell, under the next column header.
    pub fn cell(mut self, cell: Cell) -> Bar {
        self.cells.push(cell);
        self
    }
}

/// A level drawn across a column chart and labelled in its left margin: a budget, a size.
#[derive(Clone, Debug, PartialEq)]
pub struct Mark {
    pub value: f64,
    pub class: &'static str,
    pub label: String,
}

/// How the bars stand.
#[derive(Clone, Debug, PartialEq)]
pub enum Layout {
    /// Columns on a baseline, ticks under it, in a `width` × `height` picture; the marks are
    /// levels across it.
    Columns {
        width: f64,
        height: f64,
        marks: Vec<Mark>,
    },
    /// One bar per row of height `row`, its tick in a left margin `names` wide, in a picture
    /// `width` wide.
    Rows { width: f64, row: f64, names: f64 },
}

/// How long a bar of `value` is drawn on a scale whose far end `top` is `full` long: in
/// proportion, at most `full` (an infinite value is past the scale), and at least one unit
/// when the value is positive, so that no bar that has something looks empty.
fn extent(value: f64, top: f64, full: f64) -> f64 {
    if value.is_nan() || value <= 0.0 {
        0.0
    } else if value.is_infinite() || top <= 0.0 {
        full
    } else {
        (value / top * full).clamp(1.0, full)
    }
}

/// The largest finite value among the bars (their bases too) and the marks; 0 for none.
fn largest(bars: &[Bar], marks: &[Mark]) -> f64 {
    bars.iter()
        .flat_map(|b| [Some(b.value), b.base.map(|(v, _)| v)])
        .flatten()
        .chain(marks.iter().map(|m| m.value))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
}

/// Every how many columns a tick is labelled, so that at most [`MOST_TICKS`] are.
fn tick_every(columns: usize) -> usize {
    columns.div_ceil(MOST_TICKS).max(1)
}

/// The bars drawn as columns: the picture's height and its elements.
fn columns(bars: &[Bar], width: f64, height: f64, marks: &[Mark], top: f64) -> (f64, AnyView) {
    let left = if marks.is_empty() { 0.0 } else { MARK_LABELS };
    let room = if bars.iter().any(|b| b.end_text.is_some()) {
        TOP_WITH_END_TEXT
    } else {
        TOP
    };
    let baseline = height - AXIS;
    let full = baseline - room;
    let y = move |v: f64| baseline - extent(v, top, full);
    let slot = (width - left) / bars.len().max(1) as f64;
    let thickness = (slot * FILL).max(1.0);
    let every = tick_every(bars.len());
    let drawn = bars
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let x = left + i as f64 * slot + (slot - thickness) / 2.0;
            let middle = x + thickness / 2.0;
            let base_top = b.base.map_or(baseline, |(v, _)| y(v));
            let base = b.base.map(|(_, class)| {
                view! { <rect x=x y=base_top width=thickness height=baseline - base_top class=class data-point=i></rect> }
            });
            let end = b.end_text.clone().map(|text| {
                view! { <text x=middle y=y(b.value) - 4.0 text-anchor="middle" class="axis-label">{text}</text> }
            });
            let tick = (i % every == 0).then(|| {
                view! { <text x=middle y=height - 5.0 text-anchor="middle" class="axis-label">{b.tick.clone()}</text> }
            });
            view! {
                {base}
                <rect x=x y=y(b.value) width=thickness height=(base_top - y(b.value)).max(0.0) class=b.class data-point=i data-sound=b.sound.unwrap_or(b.value)></rect>
                {end}
                {tick}
            }
        })
        .collect_view();
    let levels = marks
        .iter()
        .map(|m| {
            view! {
                <line x1=left y1=y(m.value) x2=width y2=y(m.value) class=m.class></line>
                <text x=left - 4.0 y=y(m.value) + 3.0 text-anchor="end" class="axis-label">{m.label.clone()}</text>
            }
        })
        .collect_view();
    let elements = view! {
        <line x1=left y1=baseline x2=width y2=baseline class="axis"></line>
        {drawn}
        {levels}
    };
    (height, elements.into_any())
}

/// The bars drawn as rows, each labelled on its left: the picture's height and its elements.
fn rows(bars: &[Bar], width: f64, row: f64, names: f64, top: f64) -> (f64, AnyView) {
    let right = if bars.iter().any(|b| b.end_text.is_some()) {
        END_TEXT
    } else {
        0.0
    };
    let full = width - names - right;
    let height = row * bars.len() as f64 + 4.0;
    let drawn = bars
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let y = i as f64 * row + 2.0;
            let text_y = y + row * 0.65;
            let length = extent(b.value, top, full);
            let base_length = b.base.map_or(0.0, |(v, _)| extent(v, top, full));
            let base = b.base.map(|(_, class)| {
                view! { <rect x=names y=y + 3.0 width=base_length height=row - 8.0 class=class data-point=i></rect> }
            });
            let end = b.end_text.clone().map(|text| {
                view! { <text x=names + length + 4.0 y=text_y class="axis-label">{text}</text> }
            });
            view! {
                <text x=names - 6.0 y=text_y text-anchor="end" class="axis-label">{b.tick.clone()}</text>
                {base}
                <rect x=names + base_length y=y + 3.0 width=(length - base_length).max(0.0) height=row - 8.0 class=b.class data-point=i data-sound=b.sound.unwrap_or(b.value)></rect>
                {end}
            }
        })
        .collect_view();
    let elements = view! {
        <line x1=names y1="0" x2=names y2=height class="axis"></line>
        {drawn}
    };
    (height, elements.into_any())
}

/// The bars and their table, from the same rows.
#[component]
pub fn BarChart(
    bars: Vec<Bar>,
    layout: Layout,
    /// What the chart shows, in a sentence: the picture's `aria-label`.
    summary: String,
    /// The table's caption.
    caption: String,
    /// The table's column headers: the rows' header, then one per cell.
    headers: &'static [&'static str],
    /// The value at the far end of the scale; by default the largest bar or mark.
    #[prop(optional)]
    top: Option<f64>,
    /// The table's id, for a link to it.
    #[prop(optional)]
    table_id: Option<&'static str>,
    /// What goes between the picture and the table: a legend.
    #[prop(optional)]
    children: Option<Children>,
) -> impl IntoView {
    let (width, (height, elements)) = match &layout {
        Layout::Columns {
            width,
            height,
            marks,
        } => (
            width,
            columns(
                &bars,
                *width,
                *height,
                marks,
                top.unwrap_or_else(|| largest(&bars, marks)),
            ),
        ),
        Layout::Rows { width, row, names } => (
            width,
            rows(
                &bars,
                *width,
                *row,
                *names,
                top.unwrap_or_else(|| largest(&bars, &[])),
            ),
        ),
    };
    let body = bars
        .into_iter()
        .map(|b| {
            let row = Row {
                class: b.row_class.map(str::to_string),
                header: b.label,
                cells: b.cells,
            };
            body_row(row, b.group)
        })
        .collect_view();
    view! {
        <div class="walk" data-walk="">
            <p class="takeaway">{summary.clone()}</p>
            <svg class="chart" viewBox=format!("0 0 {width} {height}") tabindex="0" role="application" aria-label=summary data-walk-chart="">
                {elements}
            </svg>
            {walk_notes()}
            {children.map(|c| c())}
            {mirror_table("mirror", table_id, None, caption, headers, body)}
        </div>
    }
}

/// What follows every walkable chart the page draws: the keys, and the live region that
/// says each move ([`walk::NOTES`]: one static string, which costs the page's wasm less than
/// a view of two elements at every chart).
pub fn walk_notes() -> impl IntoView {
    view! { <div class="walk-notes" inner_html=walk::NOTES></div> }
}

/// The latency terms that the capacity plan's and Observe's charts share, as `<dt>`/`<dd>`
/// pairs for a panel's list of terms (a literal, so that a panel can `concat!` its own).
#[macro_export]
macro_rules! latency_terms {
    () => {
        "<dt>TTFT</dt><dd>Time to first token: from a request's arrival to its first output token.</dd>\
         <dt>p99</dt><dd>The value that 99 % of requests come within.</dd>"
    };
}

/// The body rows of a table, every table's: the header cell is `scope="row"`, and a number
/// is written in full in its cell's `data-value`.
pub fn body_rows(rows: impl IntoIterator<Item = Row>) -> impl IntoView {
    rows.into_iter().map(|r| body_row(r, None)).collect_view()
}

/// One body row, in the walk's `group` when it has one.
fn body_row(r: Row, group: Option<String>) -> impl IntoView {
    let cells = r
        .cells
        .into_iter()
        .map(|c| view! { <td data-value=c.value>{c.text}</td> })
        .collect_view();
    view! {
        <tr class=r.class data-group=group>
            <th scope="row">{r.header}</th>
            {cells}
        </tr>
    }
}

/// A table that mirrors a chart or lists a result: `class`, an `id` and a `data-testid`
/// when given, its caption, one row of column headers, and the body rows the caller built.
pub fn mirror_table(
    class: &'static str,
    id: Option<&'static str>,
    testid: Option<&'static str>,
    caption: impl IntoView,
    headers: &'static [&'static str],
    rows: impl IntoView,
) -> impl IntoView {
    let head = headers
        .iter()
        .map(|c| view! { <th scope="col">{*c}</th> })
        .collect_view();
    view! {
        <table class=class id=id data-testid=testid>
            <caption>{caption}</caption>
            <thead>
                <tr>{head}</tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bar_is_drawn_in_proportion_within_the_scale() {
        assert_eq!(extent(5.0, 10.0, 200.0), 100.0);
        assert_eq!(
            extent(20.0, 10.0, 200.0),
            200.0,
            "past the scale stops at its end"
        );
        assert_eq!(extent(f64::INFINITY, 10.0, 200.0), 200.0);
        assert_eq!(
            extent(1e-9, 10.0, 200.0),
            1.0,
            "something is at least one unit"
        );
        assert_eq!(extent(0.0, 10.0, 200.0), 0.0, "nothing is not drawn");
        assert_eq!(extent(-1.0, 10.0, 200.0), 0.0);
        assert_eq!(extent(f64::NAN, 10.0, 200.0), 0.0);
        assert_eq!(
            extent(3.0, 0.0, 200.0),
            200.0,
            "a zero scale has nothing shorter"
        );
    }

    #[test]
    fn the_scale_reaches_the_largest_finite_bar_base_or_mark() {
        let bars = [
            Bar::new("a", 3.0).on(1.0, "bar base"),
            Bar::new("b", f64::INFINITY),
        ];
        assert_eq!(largest(&bars, &[]), 3.0);
        let marks = [Mark {
            value: 4.5,
            class: "axis",
            label: "4.5".into(),
        }];
        assert_eq!(largest(&bars, &marks), 4.5);
        assert_eq!(largest(&[], &[]), 0.0);
    }

    #[test]
    fn at_most_sixteen_ticks_are_labelled() {
        assert_eq!(tick_every(0), 1);
        assert_eq!(tick_every(4), 1);
        assert_eq!(tick_every(16), 1);
        assert_eq!(tick_every(17), 2);
        assert_eq!(tick_every(256), 16);
    }

    #[test]
    fn a_bar_keeps_its_row_in_order() {
        let bar = Bar::new("block 1", 2.0)
            .tick("1")
            .cell(Cell::number("2 GB", 2.0))
            .cell(Cell::text("resident"));
        assert_eq!(bar.label, "block 1");
        assert_eq!(bar.tick, "1");
        assert_eq!(
            bar.cells,
            [
                Cell {
                    text: "2 GB".into(),
                    value: Some("2".into())
                },
                Cell::text("resident")
            ]
        );
    }
}
