//! A report built away from the page, drawn by it: [`html`] is the markup of a report's
//! parts ([`report::Part`]: a heading and its tables, sentences, lists and charts), which
//! a worker writes (only the workers' builds have this module). The page only sets it
//! (`inner_html`), so a report's sections and charts cost the page's wasm nothing: the
//! capacity planner's report and sweep and the Observe panel's are such parts, and every
//! chart keeps its table. Every text and attribute is escaped here ([`escape`]); file
//! names and reasons in an observation come from the learner's files.

use report::{Block, Part, RowsChart, Table};
#[cfg(any(feature = "planner", feature = "observer"))]
use report::{Frame, IntervalChart, TimelineChart};

/// The markup of `parts`, in order: each a focusable section labelled by its heading.
pub fn html(parts: &[Part]) -> String {
    let mut out = String::new();
    for part in parts {
        let id = escape(&part.id);
        // A part scrolls sideways when its table is wide, so the keyboard must reach it: a
        // part with a chart is reached through the chart (its one tab stop); a part of tables
        // and text is a tab stop itself.
        let charted = part
            .blocks
            .iter()
            .any(|b| matches!(b, Block::Timeline(_) | Block::Intervals(_) | Block::Rows(_)));
        out += &format!(
            "<section class=\"cap-part\" aria-labelledby=\"{id}\"{}><h3 id=\"{id}\">{}</h3>",
            if charted { "" } else { " tabindex=\"0\"" },
            escape(&part.title)
        );
        for block in &part.blocks {
            match block {
                Block::Table(table) => out += &table_html(table),
                Block::Text(text) => out += &format!("<p>{}</p>", escape(text)),
                Block::List { class, items } => {
                    out += &format!("<ul class=\"{}\">", escape(class));
                    for item in items {
                        out += &format!("<li>{}</li>", escape(item));
                    }
                    out += "</ul>";
                }
                // The model worker draws no timeline or interval chart: its wasm carries
                // neither.
                #[cfg(any(feature = "planner", feature = "observer"))]
                Block::Timeline(chart) => out += &timeline_html(chart),
                #[cfg(any(feature = "planner", feature = "observer"))]
                Block::Intervals(chart) => out += &intervals_html(chart),
                #[cfg(not(any(feature = "planner", feature = "observer")))]
                Block::Timeline(_) | Block::Intervals(_) => {}
                Block::Rows(chart) => out += &rows_html(chart),
            }
        }
        out += "</section>";
    }
    out
}

/// `text` safe inside an element or a double-quoted attribute.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out += "&amp;",
            '<' => out += "&lt;",
            '>' => out += "&gt;",
            '"' => out += "&quot;",
            '\'' => out += "&#39;",
            c => out.push(c),
        }
    }
    out
}

/// A table: its caption, one row of column headers, then each row's header cell
/// (`scope="row"`) and cells, a number written in full in its cell's `data-value`.
pub fn table_html(table: &Table) -> String {
    let id = table
        .id
        .as_ref()
        .map_or(String::new(), |id| format!(" id=\"{}\"", escape(id)));
    let mut out = format!(
        "<table class=\"{}\"{id}><caption>{}</caption><thead><tr>",
        escape(&table.class),
        escape(&table.caption)
    );
    for h in &table.headers {
        out += &format!("<th scope=\"col\">{}</th>", escape(h));
    }
    out += "</tr></thead><tbody>";
    for row in &table.rows {
        match &row.class {
            Some(class) => out += &format!("<tr class=\"{}\">", escape(class)),
            None => out += "<tr>",
        }
        out += &format!("<th scope=\"row\">{}</th>", escape(&row.header));
        for cell in &row.cells {
            match &cell.value {
                Some(v) => out += &format!("<td data-value=\"{}\">", escape(v)),
                None => out += "<td>",
            }
            out += &escape(&cell.text);
            out += "</td>";
        }
        out += "</tr>";
    }
    out + "</tbody></table>"
}

/// The frame every chart of a report shares: the figure and its caption, the SVG with its
/// summary, both axes, their ticks and the y axis's label; `inside` is drawn over them, and
/// the legend and the table follow.
#[cfg(any(feature = "planner", feature = "observer"))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn figure_html(
    class: &str,
    frame: &Frame,
    caption: &str,
    summary: &str,
    x_ticks: &[(f64, String)],
    y_ticks: &[(f64, String)],
    y_label: &str,
    inside: &str,
    legend: &str,
    table: &Table,
) -> String {
    let ((x0, x1), (y0, y1)) = (frame.x_span(), frame.y_span());
    let mut ticks = String::new();
    for (x, label) in x_ticks {
        ticks += &format!(
            "<line x1=\"{x}\" y1=\"{y1}\" x2=\"{x}\" y2=\"{}\" class=\"axis\"></line><text x=\"{x}\" y=\"{}\" text-anchor=\"middle\" class=\"axis-label\">{}</text>",
            y1 + 4.0,
            y1 + 15.0,
            escape(label)
        );
    }
    for (y, label) in y_ticks {
        ticks += &format!(
            "<line x1=\"{}\" y1=\"{y}\" x2=\"{x0}\" y2=\"{y}\" class=\"axis\"></line><text x=\"{}\" y=\"{}\" text-anchor=\"end\" class=\"axis-label\">{}</text>",
            x0 - 4.0,
            x0 - 6.0,
            y + 3.0,
            escape(label)
        );
    }
    let middle = (y0 + y1) / 2.0;
    format!(
        "<figure class=\"stage {class}\" data-walk=\"\"><figcaption>{}</figcaption>{}\
         <line x1=\"{x0}\" y1=\"{y1}\" x2=\"{x1}\" y2=\"{y1}\" class=\"axis\"></line>\
         <line x1=\"{x0}\" y1=\"{y0}\" x2=\"{x0}\" y2=\"{y1}\" class=\"axis\"></line>{ticks}\
         <text x=\"10\" y=\"{middle}\" text-anchor=\"middle\" class=\"axis-label\" transform=\"rotate(-90 10 {middle})\">{}</text>\
         {inside}</svg>{}<p class=\"cap-legend chart-only\">{}</p>{}</figure>",
        escape(caption),
        walk_open(frame.width, frame.height, summary),
        escape(y_label),
        walk_notes(),
        escape(legend),
        table_html(table)
    )
}

/// A walkable chart's takeaway caption and its SVG's opening tag, as
/// [`BarChart`](crate::widgets::chart::BarChart) draws them ([`walk`](crate::widgets::walk)).
fn walk_open(width: f64, height: f64, summary: &str) -> String {
    let summary = escape(summary);
    format!(
        "<p class=\"takeaway\">{summary}</p><svg class=\"chart\" viewBox=\"0 0 {width} {height}\" \
         tabindex=\"0\" role=\"application\" aria-label=\"{summary}\" data-walk-chart=\"\">"
    )
}

/// The keys and the live region after a walkable chart, as
/// [`walk_notes`](crate::widgets::chart::walk_notes) draws them.
fn walk_notes() -> String {
    format!(
        "<div class=\"walk-notes\">{}</div>",
        crate::widgets::walk::NOTES
    )
}

/// A chart's point, drawing row `row` of its table, whose figure is `value`, with its
/// tooltip: a dot (`cap-pass`), or a cross (`cap-breach`) where it breached, so that a breach
/// differs in shape and not only in colour (the capacity sweep's failures are crosses too).
#[cfg(any(feature = "planner", feature = "observer"))]
pub(crate) fn point(
    row: usize,
    (x, y, value): (f64, f64, f64),
    r: f64,
    breached: bool,
    title: &str,
) -> String {
    let (shape, tag) = if breached {
        let (a, b) = (r * 1.2, r * 1.2);
        (
            format!(
                "<path d=\"M{} {}L{} {}M{} {}L{} {}\" class=\"cap-breach\"",
                x - a,
                y - b,
                x + a,
                y + b,
                x - a,
                y + b,
                x + a,
                y - b
            ),
            "path",
        )
    } else {
        (
            format!("<circle cx=\"{x}\" cy=\"{y}\" r=\"{r}\" class=\"cap-pass\""),
            "circle",
        )
    };
    format!(
        "{shape} data-point=\"{row}\" data-sound=\"{value}\"><title>{}</title></{tag}>",
        escape(title)
    )
}

/// A figure over time against a level, one span marked, and the table from the same rows.
#[cfg(any(feature = "planner", feature = "observer"))]
fn timeline_html(c: &TimelineChart) -> String {
    let ((x0, x1), (y0, y1)) = (c.frame.x_span(), c.frame.y_span());
    let mut inside = String::new();
    if let Some((from, to, label)) = &c.marked {
        inside += &format!(
            "<rect x=\"{from}\" y=\"{y0}\" width=\"{}\" height=\"{}\" class=\"cap-detected\"></rect><text x=\"{}\" y=\"{}\" class=\"axis-label\">{}</text>",
            (to - from).max(1.0),
            y1 - y0,
            to + 3.0,
            y0 + 10.0,
            escape(label)
        );
    }
    inside += &format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"axis-label\">{}</text>",
        (x0 + x1) / 2.0,
        c.frame.height - 6.0,
        escape(&c.x_label)
    );
    inside += &format!(
        "<line x1=\"{x0}\" y1=\"{level}\" x2=\"{x1}\" y2=\"{level}\" class=\"cap-slo\"></line><text x=\"{}\" y=\"{}\" text-anchor=\"end\" class=\"axis-label\">{}</text>",
        x1 - 4.0,
        c.level_y - 4.0,
        escape(&c.level_label),
        level = c.level_y
    );
    for line in &c.lines {
        let points: Vec<String> = line.iter().map(|(x, y)| format!("{x:.2},{y:.2}")).collect();
        inside += &format!(
            "<polyline points=\"{}\" class=\"cap-curve\"></polyline>",
            points.join(" ")
        );
    }
    for p in &c.points {
        inside += &point(p.row, (p.x, p.y, p.value), 3.0, !p.passes, &p.title);
    }
    figure_html(
        "cap-timeline",
        &c.frame,
        &c.caption,
        &c.summary,
        &c.x_ticks,
        &c.y_ticks,
        &c.y_label,
        &inside,
        "● a window within every gate; × in red: a window that breached a gate; dashed box: the window whose breach stopped the canary; dashed line: the TTFT SLO.",
        &c.table,
    )
}

/// Groups side by side, each a point with its interval, and the table from the same groups.
#[cfg(any(feature = "planner", feature = "observer"))]
fn intervals_html(c: &IntervalChart) -> String {
    let x_ticks: Vec<(f64, String)> = c.points.iter().map(|p| (p.x, p.label.clone())).collect();
    let mut inside = String::new();
    for (row, p) in c.points.iter().enumerate() {
        if let Some((lo, hi)) = p.interval {
            inside += &format!(
                "<line x1=\"{x}\" y1=\"{lo}\" x2=\"{x}\" y2=\"{hi}\" class=\"obs-interval\" data-point=\"{row}\"></line>",
                x = p.x
            );
        }
        inside += &point(row, (p.x, p.y, p.value), 4.0, p.flagged, &p.title);
    }
    figure_html(
        "cap-timeline",
        &c.frame,
        &c.caption,
        &c.summary,
        &x_ticks,
        &c.y_ticks,
        &c.y_label,
        &inside,
        &c.legend,
        &c.table,
    )
}

/// A tick's number: three decimals at most, without trailing zeros.
fn tick(value: f64) -> String {
    let text = format!("{value:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text.is_empty() || text == "-" {
        "0".to_string()
    } else {
        text.to_string()
    }
}

/// A [`RowsChart`]: a bar per series in each row, labels indented by level on the left.
fn rows_html(c: &RowsChart) -> String {
    const WIDTH: f64 = 640.0;
    const NAMES: f64 = 190.0;
    const END: f64 = 96.0;
    const ROW: f64 = 20.0;
    const AXIS: f64 = 30.0;
    let full = WIDTH - NAMES - END;
    let series = c.series.len().max(1);
    let thickness = (ROW - 6.0) / series as f64;
    let height = ROW * c.rows.len() as f64 + AXIS;
    let length = |v: f64| {
        if v.is_infinite() && v > 0.0 {
            full
        } else if v.is_nan() || v <= 0.0 || c.scale <= 0.0 {
            0.0
        } else {
            (v / c.scale * full).clamp(1.0, full)
        }
    };
    let mut inside = String::new();
    for (i, row) in c.rows.iter().enumerate() {
        let y = i as f64 * ROW;
        inside += &format!(
            "<g data-point=\"{i}\" data-sound=\"{}\"><title>{}</title><text x=\"{}\" y=\"{}\" class=\"axis-label\">{}</text>",
            row.values.first().copied().unwrap_or(f64::NAN),
            escape(&row.title),
            6.0 + 12.0 * row.level as f64,
            y + ROW * 0.7,
            escape(&row.label)
        );
        let mut longest: f64 = 0.0;
        for (k, &v) in row.values.iter().enumerate() {
            let class = c.series.get(k).map_or("bar", String::as_str);
            let past = if v.is_infinite() { " past" } else { "" };
            let l = length(v);
            longest = longest.max(l);
            inside += &format!(
                "<rect x=\"{NAMES}\" y=\"{}\" width=\"{l:.2}\" height=\"{thickness:.2}\" class=\"bar {}{past}\"></rect>",
                y + 3.0 + k as f64 * thickness,
                escape(class)
            );
        }
        inside += &format!(
            "<text x=\"{}\" y=\"{}\" class=\"axis-label\">{}</text></g>",
            NAMES + longest + 4.0,
            y + ROW * 0.7,
            escape(&row.end_text)
        );
    }
    let base = height - AXIS;
    inside += &format!(
        "<line x1=\"{NAMES}\" y1=\"0\" x2=\"{NAMES}\" y2=\"{base}\" class=\"axis\"></line><line x1=\"{NAMES}\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\" class=\"axis\"></line>",
        NAMES + full
    );
    for q in 0..=4 {
        let x = NAMES + full * q as f64 / 4.0;
        let value = c.scale * q as f64 / 4.0;
        inside += &format!(
            "<line x1=\"{x}\" y1=\"{base}\" x2=\"{x}\" y2=\"{}\" class=\"axis\"></line><text x=\"{x}\" y=\"{}\" text-anchor=\"middle\" class=\"axis-label\">{}</text>",
            base + 4.0,
            base + 15.0,
            tick(value)
        );
    }
    inside += &format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"axis-label\">{}</text>",
        NAMES + full / 2.0,
        height - 3.0,
        escape(&c.axis_label)
    );
    format!(
        "<figure class=\"stage rows-chart\" data-walk=\"\"><figcaption>{}</figcaption>{}{inside}</svg>\
         {}<p class=\"cap-legend chart-only\">{}</p>{}</figure>",
        escape(&c.caption),
        walk_open(WIDTH, height, &c.summary),
        walk_notes(),
        escape(&c.legend),
        table_html(&c.table)
    )
}

#[cfg(all(test, any(feature = "planner", feature = "observer")))]
mod tests {
    use super::*;
    use report::{Cell, Row};

    #[test]
    fn text_from_a_file_cannot_become_markup() {
        assert_eq!(
            escape(r#"<img src=x onerror="alert('1')"> & more"#),
            "&lt;img src=x onerror=&quot;alert(&#39;1&#39;)&quot;&gt; &amp; more"
        );
    }

    /// Written out by hand: the markup the page's own tables have.
    #[test]
    fn a_table_has_its_caption_headers_and_row_headers() {
        let table = Table {
            class: "mirror".into(),
            id: Some("t".into()),
            caption: "Runs <all>".into(),
            headers: vec!["version".into(), "runs".into()],
            rows: vec![Row {
                class: Some("breach".into()),
                header: "a".into(),
                cells: vec![Cell::number("1.5 ms", 1.5)],
            }],
        };
        assert_eq!(
            table_html(&table),
            "<table class=\"mirror\" id=\"t\"><caption>Runs &lt;all&gt;</caption><thead><tr>\
             <th scope=\"col\">version</th><th scope=\"col\">runs</th></tr></thead><tbody>\
             <tr class=\"breach\"><th scope=\"row\">a</th><td data-value=\"1.5\">1.5 ms</td></tr>\
             </tbody></table>"
        );
    }

    /// A breach is a cross and a point within its gates a dot: they differ in shape, not only
    /// in colour.
    #[test]
    fn a_breach_is_drawn_as_a_cross() {
        assert_eq!(
            point(3, (10.0, 20.0, 0.5), 5.0, true, "w <3>"),
            "<path d=\"M4 14L16 26M4 26L16 14\" class=\"cap-breach\" data-point=\"3\" \
             data-sound=\"0.5\"><title>w &lt;3&gt;</title></path>"
        );
        assert_eq!(
            point(0, (10.0, 20.0, 0.5), 5.0, false, "w"),
            "<circle cx=\"10\" cy=\"20\" r=\"5\" class=\"cap-pass\" data-point=\"0\" \
             data-sound=\"0.5\"><title>w</title></circle>"
        );
    }

    #[test]
    fn every_part_is_a_section_labelled_by_its_heading() {
        let parts = [Part {
            id: "p".into(),
            title: "Drift".into(),
            blocks: vec![
                Block::Text("stop".into()),
                Block::List {
                    class: "c".into(),
                    items: vec!["one".into()],
                },
            ],
        }];
        assert_eq!(
            html(&parts),
            "<section class=\"cap-part\" aria-labelledby=\"p\" tabindex=\"0\"><h3 id=\"p\">Drift</h3>\
             <p>stop</p><ul class=\"c\"><li>one</li></ul></section>"
        );
    }
}
