//! [`markdown`]: a report's parts as GitHub-flavoured Markdown. Each part is a `##`
//! heading; a sentence is a paragraph, a list a bulleted list; a table is its caption in
//! italics, then the table, its numeric columns (every cell a number) aligned right. A
//! chart is its caption, its takeaway and its table: the table states every point the
//! picture draws, so nothing is lost without it.

use crate::{Block, Part, Table};

/// `parts` as Markdown, each ending in a blank line.
pub fn markdown(parts: &[Part]) -> String {
    let mut out = String::new();
    for part in parts {
        out += &format!("## {}\n\n", inline(&part.title));
        for block in &part.blocks {
            match block {
                Block::Text(text) => out += &format!("{}\n\n", inline(text)),
                Block::List { items, .. } => {
                    for item in items {
                        out += &format!("- {}\n", inline(item));
                    }
                    out += "\n";
                }
                Block::Table(table) => out += &table_markdown(table),
                Block::Timeline(c) => out += &chart(&c.caption, &c.summary, &c.table),
                Block::Intervals(c) => out += &chart(&c.caption, &c.summary, &c.table),
                Block::Rows(c) => out += &chart(&c.caption, &c.summary, &c.table),
            }
        }
    }
    out
}

/// A chart without its picture: the caption, the takeaway, the table.
fn chart(caption: &str, summary: &str, table: &Table) -> String {
    format!(
        "**{}.** {}\n\n{}",
        inline(caption.trim_end_matches('.')),
        inline(summary),
        table_markdown(table)
    )
}

/// A table: its caption in italics, the header row, the alignment row and the body.
pub fn table_markdown(table: &Table) -> String {
    let mut out = String::new();
    if !table.caption.is_empty() {
        out += &format!("_{}_\n\n", inline(&table.caption));
    }
    let columns = table.headers.len().max(
        table
            .rows
            .iter()
            .map(|r| r.cells.len() + 1)
            .max()
            .unwrap_or(0),
    );
    let header = |i: usize| table.headers.get(i).map_or("", String::as_str);
    out += &line((0..columns).map(header));
    out += "|";
    for i in 0..columns {
        // A column after the header is numeric when every row gives a number there.
        let numeric = i > 0
            && !table.rows.is_empty()
            && table
                .rows
                .iter()
                .all(|r| r.cells.get(i - 1).is_some_and(|c| c.value.is_some()));
        out += if numeric { "---:|" } else { "---|" };
    }
    out += "\n";
    for row in &table.rows {
        let cells = (1..columns).map(|i| row.cells.get(i - 1).map_or("", |c| c.text.as_str()));
        out += &line(std::iter::once(row.header.as_str()).chain(cells));
    }
    out + "\n"
}

/// One row of a table: `| a | b |`, an empty cell as `| |`.
fn line<'a>(cells: impl Iterator<Item = &'a str>) -> String {
    let mut out = String::from("|");
    for text in cells {
        let text = cell(text);
        out += &if text.is_empty() {
            " |".to_string()
        } else {
            format!(" {text} |")
        };
    }
    out + "\n"
}

/// Text on one line: a line break would end a paragraph or a table row.
fn inline(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Text in a table cell: on one line, its pipes escaped so they do not split the cell.
fn cell(text: &str) -> String {
    inline(text).replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Cell, Row};

    fn table() -> Table {
        Table {
            class: "mirror".into(),
            id: Some("t".into()),
            caption: "Runs per version".into(),
            headers: vec!["Version".into(), "Runs".into(), "Verdict".into()],
            rows: vec![
                Row::new("a|b", vec![Cell::number("12", 12), Cell::text("pass")]),
                Row::new(
                    "c",
                    vec![Cell::number("3", 3), Cell::text("fail:\nover the floor")],
                ),
            ],
        }
    }

    /// Written out by hand: what GitHub renders as a table with a right-aligned count.
    #[test]
    fn a_table_has_its_caption_header_alignment_and_rows() {
        assert_eq!(
            table_markdown(&table()),
            "_Runs per version_\n\n\
             | Version | Runs | Verdict |\n\
             |---|---:|---|\n\
             | a\\|b | 12 | pass |\n\
             | c | 3 | fail: over the floor |\n\n"
        );
    }

    #[test]
    fn a_row_short_of_cells_is_padded_and_an_empty_table_has_its_header() {
        let mut short = table();
        short.rows = vec![Row::new("only", vec![])];
        assert!(table_markdown(&short).ends_with("|---|---|---|\n| only | | |\n\n"));
        short.rows.clear();
        assert!(table_markdown(&short).ends_with("| Version | Runs | Verdict |\n|---|---|---|\n\n"));
    }

    #[test]
    fn parts_are_headed_sections_of_paragraphs_lists_and_tables() {
        let parts = [Part {
            id: "p".into(),
            title: "3. Quality gates".into(),
            blocks: vec![
                Block::Text("Gates of\nthe plan:".into()),
                Block::List {
                    class: "gates".into(),
                    items: vec!["pass: TTFT".into(), "fail: quality".into()],
                },
                Block::Table(table()),
            ],
        }];
        let md = markdown(&parts);
        assert!(md.starts_with(
            "## 3. Quality gates\n\nGates of the plan:\n\n- pass: TTFT\n- fail: quality\n\n_Runs per version_\n\n"
        ));
        assert!(md.ends_with("| c | 3 | fail: over the floor |\n\n"));
    }
}
