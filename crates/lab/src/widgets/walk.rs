//! Walking a chart with the keyboard, the same way for every chart of the lab: the page's
//! own ([`BarChart`](crate::widgets::chart::BarChart), the sweep, Your turn's, the draw
//! strip) and the ones a worker writes as markup (`widgets::markup`).
//!
//! A chart takes part by its markup alone, so one key handler serves them all:
//! - an element marked `data-walk` holds the chart and its mirror table;
//! - the chart's picture is marked `data-walk-chart`: one tab stop (`tabindex="0"`),
//!   `role="application"` so that a screen reader hands it the arrow keys, named by the
//!   takeaway sentence that is also its visible caption;
//! - the table's body rows are the points, in order; a row's `data-group`, when the rows
//!   have one, puts it in a group (a stage's kept and removed tokens), a level between the
//!   chart and its points, as Olli's tree has;
//! - the marks that draw row i carry `data-point="i"` (a row may have none: a window with
//!   nothing measured);
//! - an `aria-live="polite"` paragraph of class `walk-live` inside says each move.
//!
//! Left and Right move between siblings, Up and Down between levels, Page Up and Page Down
//! ten siblings at a time, Home and End go to the first and last sibling, N and P to the next
//! and the previous key point (wrapping round), Escape goes back to the chart level, H says
//! the keys, S (or the Listen button under the chart) plays the chart, M sounds each move.
//! The key points are the rows the table itself marks ([`KEY_ROWS`]): the landed token, the
//! released configuration, a window or a slice that breached. Each move
//! says what the mirror table says of that row, header by header, and its position; the
//! marks of the row (or the group) get the class `walk-at`, drawn as a focus ring. Where the
//! walk stands lives in the chart's `data-at`, so a chart re-drawn with new data starts
//! again at its top.
//!
//! **The chart as sound** ([`tones`]): a mark's `data-sound` is its row's value; the rows
//! play left to right as short generated tones (Web Audio), pitch rising with the value
//! over two octaves from the smallest value to the largest, so a flat distribution sounds
//! level and a peaked one sounds like a spike. Nothing plays without a key or a click. A
//! test hands the page an `OfflineAudioContext` as `window.walkAudioContext`, and the tones
//! go there instead of to the speakers.

/// The keys, as H says them: short sentences, so that they read at grade 9 or below.
pub const KEYS: &str = "The keys in this chart. Left and Right: the next point. Up and Down: \
                        a level up or down. Page Up and Page Down: ten points. Home and End: \
                        the first or the last. N and P: the next or the last key point. \
                        Escape: back to the whole chart. S: play the chart. M: sound each \
                        move. H: these keys.";

/// The table rows a walk treats as key points, for N and P: the rows each chart's table
/// already marks (a stage's most likely token, the landed token, the released
/// configuration, the window that detected a breach, a window or slice over its line).
pub const KEY_ROWS: &str =
    "tr.top, tr.landed, tr.cap-chosen-row, tr.cap-detected-row, tr.breach, tr.over";

/// How far Page Up and Page Down move.
pub const PAGE: usize = 10;

/// What follows every walkable chart, the page's and the workers' alike: the keys as a
/// visible hint, and the live region that says each move.
pub const NOTES: &str = "<p class=\"walk-keys chart-only\">Focus the chart to walk it: ← → \
                         points, ↑ ↓ levels, PgUp PgDn ten, Home, End, N P key points, Esc; S \
                         plays it, M sounds each move, H lists the keys. <button type=\"button\" class=\"walk-listen secondary\">\
                         Listen</button></p><p class=\"walk-live chart-only\" aria-live=\"polite\"></p>";

/// The lowest tone, for the smallest value (A3), and the span above it.
pub const LOWEST_HZ: f64 = 220.0;
pub const OCTAVES: f64 = 2.0;
/// Each tone's length and the silence after it, in seconds.
pub const TONE_S: f64 = 0.15;
pub const GAP_S: f64 = 0.05;

/// One tone of a chart's sound: when it starts after the first, and its pitch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tone {
    pub start_s: f64,
    pub hz: f64,
}

/// The pitch of `value` on a chart whose values span `lo..=hi`: [`LOWEST_HZ`] for the
/// smallest, [`OCTAVES`] higher for the largest, evenly in octaves between; the middle when
/// every value is the same.
pub fn pitch(value: f64, lo: f64, hi: f64) -> f64 {
    let at = if hi > lo {
        (value - lo) / (hi - lo)
    } else {
        0.5
    };
    LOWEST_HZ * (OCTAVES * at).exp2()
}

/// The smallest and the largest finite value: the ends of the pitch scale.
pub fn span(values: &[f64]) -> (f64, f64) {
    let finite = values.iter().copied().filter(|v| v.is_finite());
    let lo = finite.clone().fold(f64::INFINITY, f64::min);
    (lo, finite.fold(f64::NEG_INFINITY, f64::max))
}

/// The tones of `values` (one per row, left to right); a row with no finite value keeps its
/// place in time, silent.
pub fn tones(values: &[f64]) -> Vec<Tone> {
    let (lo, hi) = span(values);
    values
        .iter()
        .enumerate()
        .filter(|(_, v)| v.is_finite())
        .map(|(i, &v)| Tone {
            start_s: i as f64 * (TONE_S + GAP_S),
            hz: pitch(v, lo, hi),
        })
        .collect()
}

/// Where a walk stands: on the whole chart, on a group of rows, or on one row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    Chart,
    Group(usize),
    Point(usize),
}

impl At {
    /// `data-at`'s text: `chart`, `g3`, `p5`; anything else is the chart.
    pub fn parse(text: &str) -> At {
        let number = |rest: &str| rest.parse().ok();
        match text.split_at_checked(1) {
            Some(("g", rest)) => number(rest).map_or(At::Chart, At::Group),
            Some(("p", rest)) => number(rest).map_or(At::Chart, At::Point),
            _ => At::Chart,
        }
    }

    pub fn text(self) -> String {
        match self {
            At::Chart => "chart".into(),
            At::Group(g) => format!("g{g}"),
            At::Point(i) => format!("p{i}"),
        }
    }
}

/// What a key makes the chart say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Say {
    /// The whole chart: its point count and how to go down.
    Chart,
    Group(usize),
    Point(usize),
    Keys,
    /// Escape, back at the chart level.
    Left,
    /// S: the whole chart as tones.
    Play,
    /// M: sound each move, or not.
    Sound,
    /// N or P in a chart with no key point.
    NoKeyPoint,
}

/// The rows of a chart as a walk sees them: the group of each row, numbered in order of
/// first appearance, or none at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    groups: Vec<usize>,
    group_count: usize,
    /// The key points ([`KEY_ROWS`]), in order.
    keys: Vec<usize>,
}

impl Shape {
    /// From each row's `data-group` (`None` where it has none). The rows are grouped only
    /// when every row has a group and there are at least two.
    pub fn new<S: AsRef<str>>(groups: &[Option<S>]) -> Shape {
        let mut names: Vec<&str> = Vec::new();
        let mut of_row = Vec::with_capacity(groups.len());
        for group in groups {
            let Some(name) = group.as_ref().map(AsRef::as_ref) else {
                return Shape::flat(groups.len());
            };
            let index = names.iter().position(|n| *n == name).unwrap_or_else(|| {
                names.push(name);
                names.len() - 1
            });
            of_row.push(index);
        }
        if names.len() < 2 {
            return Shape::flat(groups.len());
        }
        Shape {
            groups: of_row,
            group_count: names.len(),
            keys: Vec::new(),
        }
    }

    /// `rows` rows and no groups.
    pub fn flat(rows: usize) -> Shape {
        Shape {
            groups: vec![0; rows],
            group_count: 0,
            keys: Vec::new(),
        }
    }

    /// The same rows, with the key points where `is_key` is true.
    pub fn keyed(mut self, is_key: &[bool]) -> Shape {
        self.keys = (0..self.rows())
            .filter(|&i| is_key.get(i) == Some(&true))
            .collect();
        self
    }

    /// The key point after row `from` (from the first row when `None`), or before it,
    /// wrapping round; `None` when there is none.
    pub fn next_key(&self, from: Option<usize>, forward: bool) -> Option<usize> {
        let (first, last) = (self.keys.first()?, self.keys.last()?);
        Some(match (from, forward) {
            (None, true) => *first,
            (None, false) => *last,
            (Some(i), true) => self.keys.iter().copied().find(|&k| k > i).unwrap_or(*first),
            (Some(i), false) => self
                .keys
                .iter()
                .rev()
                .copied()
                .find(|&k| k < i)
                .unwrap_or(*last),
        })
    }

    pub fn rows(&self) -> usize {
        self.groups.len()
    }

    pub fn is_grouped(&self) -> bool {
        self.group_count > 0
    }

    pub fn group_count(&self) -> usize {
        self.group_count
    }

    /// The group of row `i` (0 when there are none).
    pub fn group_of(&self, i: usize) -> usize {
        self.groups.get(i).copied().unwrap_or(0)
    }

    /// The rows of group `g` in order; every row when there are no groups.
    pub fn members(&self, g: usize) -> Vec<usize> {
        (0..self.rows())
            .filter(|&i| !self.is_grouped() || self.groups[i] == g)
            .collect()
    }

    /// Row `i`'s siblings (its group's rows, or all) and its place among them.
    pub fn siblings(&self, i: usize) -> (Vec<usize>, usize) {
        let members = self.members(self.group_of(i));
        let place = members.iter().position(|&m| m == i).unwrap_or(0);
        (members, place)
    }
}

/// Where `key` (a `KeyboardEvent.key`) takes a walk standing at `at`, and what the chart
/// says; `None` for a key the walk leaves to the page (Tab, Escape on the whole chart).
pub fn step(at: At, key: &str, shape: &Shape) -> Option<(At, Say)> {
    // A stale position (the chart was re-drawn with fewer rows) is the chart.
    let at = match at {
        At::Point(i) if i >= shape.rows() => At::Chart,
        At::Group(g) if g >= shape.group_count() => At::Chart,
        at => at,
    };
    let point = |i: usize| (At::Point(i), Say::Point(i));
    let group = |g: usize| (At::Group(g), Say::Group(g));
    let first_of = |g: usize| shape.members(g).first().copied();
    let moved = match (key, at) {
        ("h" | "H", at) => (at, Say::Keys),
        ("s" | "S", at) => (at, Say::Play),
        ("m" | "M", at) => (at, Say::Sound),
        ("Escape", At::Chart) => return None,
        ("Escape", _) => (At::Chart, Say::Left),
        ("n" | "N" | "p" | "P", at) => {
            let from = match at {
                At::Point(i) => Some(i),
                _ => None,
            };
            match shape.next_key(from, matches!(key, "n" | "N")) {
                Some(i) => point(i),
                None => (at, Say::NoKeyPoint),
            }
        }
        (_, _) if shape.rows() == 0 => match key {
            "ArrowUp" | "ArrowDown" | "ArrowLeft" | "ArrowRight" | "Home" | "End" | "PageUp"
            | "PageDown" => (At::Chart, Say::Chart),
            _ => return None,
        },
        ("ArrowDown", At::Chart) if shape.is_grouped() => group(0),
        ("ArrowDown" | "Home" | "PageDown", At::Chart) => point(0),
        ("End", At::Chart) => point(shape.rows() - 1),
        ("ArrowDown", At::Group(g)) => point(first_of(g)?),
        ("ArrowDown", At::Point(i)) => point(i),
        ("ArrowUp", At::Point(i)) if shape.is_grouped() => group(shape.group_of(i)),
        ("ArrowUp", _) => (At::Chart, Say::Chart),
        ("ArrowLeft" | "ArrowRight" | "PageUp", At::Chart) => (At::Chart, Say::Chart),
        ("PageUp", At::Group(g)) => group(g.saturating_sub(PAGE)),
        ("PageDown", At::Group(g)) => group((g + PAGE).min(shape.group_count() - 1)),
        ("ArrowLeft", At::Group(g)) => group(g.saturating_sub(1)),
        ("ArrowRight", At::Group(g)) => group((g + 1).min(shape.group_count() - 1)),
        ("Home", At::Group(_)) => group(0),
        ("End", At::Group(_)) => group(shape.group_count() - 1),
        (_, At::Point(i)) => {
            let (siblings, place) = shape.siblings(i);
            let last = siblings.len() - 1;
            let to = match key {
                "ArrowLeft" => place.saturating_sub(1),
                "ArrowRight" => (place + 1).min(last),
                "PageUp" => place.saturating_sub(PAGE),
                "PageDown" => (place + PAGE).min(last),
                "Home" => 0,
                "End" => last,
                _ => return None,
            };
            point(siblings[to])
        }
        _ => return None,
    };
    Some(moved)
}

/// What a row says: each column header with the row's cell under it (an empty cell is left
/// out), then its place among its siblings, and its group's name when the rows have groups:
/// "Token 2, Probability 0.9700, Status kept, 3 of 4".
pub fn row_text(headers: &[String], cells: &[String], place: usize, of: usize) -> String {
    let mut parts: Vec<String> = headers
        .iter()
        .zip(cells)
        .filter(|(_, cell)| !cell.trim().is_empty())
        .map(|(header, cell)| format!("{} {}", header.trim(), cell.trim()))
        .collect();
    parts.push(format!("{} of {of}", place + 1));
    parts.join(", ")
}

/// What a group says: its name, how many rows it holds, and its place.
pub fn group_text(name: &str, rows: usize, place: usize, of: usize) -> String {
    let noun = if rows == 1 { "point" } else { "points" };
    format!("{name}: {rows} {noun}, group {} of {of}", place + 1)
}

/// What the whole chart says when a walk comes back up to it.
pub fn chart_text(rows: usize, groups: usize) -> String {
    let noun = if rows == 1 { "point" } else { "points" };
    if groups > 0 {
        format!("The whole chart: {rows} {noun} in {groups} groups. Down goes to the groups. H lists the keys.")
    } else {
        format!("The whole chart: {rows} {noun}. Down goes to the points. H lists the keys.")
    }
}

/// The syllables of an English word, by the usual rule of thumb: groups of vowels, less a
/// silent final "e" or "ed", at least one.
#[cfg(test)]
pub(crate) fn syllables(word: &str) -> usize {
    let w: Vec<char> = word
        .chars()
        .filter(|c| c.is_ascii_alphabetic())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    let vowel = |c: char| "aeiouy".contains(c);
    let mut count = 0;
    let mut before = false;
    for &c in &w {
        let v = vowel(c);
        if v && !before {
            count += 1;
        }
        before = v;
    }
    let ends = |tail: &str| w.iter().collect::<String>().ends_with(tail);
    if (ends("e") && !ends("le") || ends("ed") && !ends("ted") && !ends("ded")) && count > 1 {
        count -= 1;
    }
    count.max(1)
}

/// A text's Flesch–Kincaid grade: 0.39 × words per sentence + 11.8 × syllables per word −
/// 15.59. A sentence ends at ".", "!" or "?" before a space or the end (not the point in
/// "64.6"); a figure ("64.6", "2", "3:1") counts as one word of one syllable.
#[cfg(test)]
pub(crate) fn grade(text: &str) -> f64 {
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c == '/')
        .filter(|w| w.chars().any(|c| c.is_alphanumeric()))
        .collect();
    let chars: Vec<char> = text.trim_end().chars().collect();
    let sentences = (0..chars.len())
        .filter(|&i| ".!?".contains(chars[i]) && chars.get(i + 1).is_none_or(|c| c.is_whitespace()))
        .count()
        .max(1);
    let syllables: usize = words.iter().map(|w| syllables(w)).sum();
    let n = words.len().max(1) as f64;
    0.39 * n / sentences as f64 + 11.8 * syllables as f64 / n - 15.59
}

/// Escape's words.
pub const LEFT: &str = "Back at the whole chart. Tab moves on.";

/// N's or P's words in a chart with no key point.
pub const NO_KEY_POINT: &str = "This chart has no key point.";

/// M's words.
pub fn sound_text(on: bool) -> &'static str {
    if on {
        "Each move now sounds its point."
    } else {
        "Moves are silent again."
    }
}

/// The page's side: one `keydown` listener on the window walks whichever chart has focus,
/// and one `click` listener plays the chart whose Listen button was pressed.
pub mod dom {
    use wasm_bindgen::{JsCast, JsValue};
    use web_sys::{BaseAudioContext, Element, KeyboardEvent, MouseEvent};

    use super::{
        chart_text, group_text, pitch, row_text, sound_text, span, step, tones, At, Say, Shape,
        Tone, KEYS, KEY_ROWS, LEFT, NO_KEY_POINT, TONE_S,
    };

    /// The element's text, or "".
    fn text(element: &Element) -> String {
        element.text_content().unwrap_or_default()
    }

    /// Every element under `root` that `selector` matches, in document order.
    fn all(root: &Element, selector: &str) -> Vec<Element> {
        let Ok(list) = root.query_selector_all(selector) else {
            return Vec::new();
        };
        (0..list.length())
            .filter_map(|i| list.item(i)?.dyn_into::<Element>().ok())
            .collect()
    }

    /// Row i's value: the `data-sound` of its first mark that has one (NaN for none).
    fn value(walk: &Element, i: usize) -> f64 {
        all(walk, &format!("[data-point=\"{i}\"][data-sound]"))
            .first()
            .and_then(|m| m.get_attribute("data-sound")?.parse().ok())
            .unwrap_or(f64::NAN)
    }

    thread_local! {
        /// The page's one audio context, made on the first sound (a key or a click).
        static SPEAKERS: std::cell::OnceCell<Option<BaseAudioContext>> = const { std::cell::OnceCell::new() };
    }

    /// Where tones go: the test's `window.walkAudioContext` when it set one, else the
    /// speakers.
    fn context() -> Option<BaseAudioContext> {
        let window = web_sys::window()?;
        let given = js_sys::Reflect::get(&window, &JsValue::from_str("walkAudioContext")).ok();
        if let Some(ctx) = given.and_then(|g| g.dyn_into::<BaseAudioContext>().ok()) {
            return Some(ctx);
        }
        SPEAKERS.with(|s| {
            s.get_or_init(|| {
                web_sys::AudioContext::new()
                    .ok()
                    .map(|c| BaseAudioContext::from(JsValue::from(c)))
            })
            .clone()
        })
    }

    /// Plays `tones` from now: each a sine with a short rise and fall, so no tone clicks.
    fn play(tones: &[Tone]) -> Option<()> {
        let ctx = context()?;
        let now = ctx.current_time() + 0.05;
        for tone in tones {
            let (from, to) = (now + tone.start_s, now + tone.start_s + TONE_S);
            let osc = ctx.create_oscillator().ok()?;
            osc.frequency().set_value(tone.hz as f32);
            let gain = ctx.create_gain().ok()?;
            let level = gain.gain();
            level.set_value_at_time(0.0, from).ok()?;
            level.linear_ramp_to_value_at_time(0.2, from + 0.01).ok()?;
            level.set_value_at_time(0.2, to - 0.02).ok()?;
            level.linear_ramp_to_value_at_time(0.0, to).ok()?;
            osc.connect_with_audio_node(&gain).ok()?;
            gain.connect_with_audio_node(&ctx.destination()).ok()?;
            osc.start_with_when(from).ok()?;
            osc.stop_with_when(to).ok()?;
        }
        Some(())
    }

    /// Plays every row of the chart in `walk`, left to right.
    fn play_all(walk: &Element) {
        let rows = all(walk, "tbody > tr").len();
        let values: Vec<f64> = (0..rows).map(|i| value(walk, i)).collect();
        let _ = play(&tones(&values));
    }

    /// Plays the Listen button's chart.
    pub fn on_click(event: MouseEvent) {
        let walk = event
            .target()
            .and_then(|t| t.dyn_into::<Element>().ok())
            .filter(|e| e.class_list().contains("walk-listen"))
            .and_then(|e| e.closest("[data-walk]").ok().flatten());
        if let Some(walk) = walk {
            play_all(&walk);
        }
    }

    /// Walks the focused chart, if the key is one of the walk's.
    pub fn on_key(event: KeyboardEvent) {
        if event.alt_key() || event.ctrl_key() || event.meta_key() {
            return;
        }
        let Some(chart) = event
            .target()
            .and_then(|t| t.dyn_into::<Element>().ok())
            .filter(|e| e.has_attribute("data-walk-chart"))
        else {
            return;
        };
        let Some(walk) = chart.closest("[data-walk]").ok().flatten() else {
            return;
        };
        let rows = all(&walk, "tbody > tr");
        let names: Vec<Option<String>> =
            rows.iter().map(|r| r.get_attribute("data-group")).collect();
        let keys: Vec<bool> = rows
            .iter()
            .map(|r| r.matches(KEY_ROWS).unwrap_or(false))
            .collect();
        let shape = Shape::new(&names).keyed(&keys);
        let at = At::parse(&chart.get_attribute("data-at").unwrap_or_default());
        let Some((next, say)) = step(at, &event.key(), &shape) else {
            return;
        };
        event.prevent_default();
        let _ = chart.set_attribute("data-at", &next.text());
        for marked in all(&walk, ".walk-at") {
            let _ = marked.class_list().remove_1("walk-at");
        }
        let marked: Vec<usize> = match next {
            At::Chart => Vec::new(),
            At::Group(g) => shape.members(g),
            At::Point(i) => vec![i],
        };
        for &i in &marked {
            for mark in all(&walk, &format!("[data-point=\"{i}\"]")) {
                let _ = mark.class_list().add_1("walk-at");
            }
        }
        let group_name = |g: usize| {
            shape
                .members(g)
                .first()
                .and_then(|&i| names[i].clone())
                .unwrap_or_default()
        };
        let sounding = chart.get_attribute("data-sound").is_some_and(|s| s == "on");
        let words = match say {
            Say::Chart => chart_text(shape.rows(), shape.group_count()),
            Say::Keys => KEYS.to_string(),
            Say::Left => LEFT.to_string(),
            Say::NoKeyPoint => NO_KEY_POINT.to_string(),
            Say::Play => {
                play_all(&walk);
                return;
            }
            Say::Sound => {
                let _ = chart.set_attribute("data-sound", if sounding { "off" } else { "on" });
                sound_text(!sounding).to_string()
            }
            Say::Group(g) => group_text(
                &group_name(g),
                shape.members(g).len(),
                g,
                shape.group_count(),
            ),
            Say::Point(i) => {
                if sounding {
                    // The point's own pitch, on the whole chart's scale.
                    let values: Vec<f64> = (0..rows.len()).map(|r| value(&walk, r)).collect();
                    let (lo, hi) = span(&values);
                    if values[i].is_finite() {
                        let hz = pitch(values[i], lo, hi);
                        let _ = play(&[Tone { start_s: 0.0, hz }]);
                    }
                }
                let headers: Vec<String> = all(&walk, "thead th").iter().map(text).collect();
                let cells: Vec<String> = all(&rows[i], "th, td").iter().map(text).collect();
                let (siblings, place) = shape.siblings(i);
                let mut words = row_text(&headers, &cells, place, siblings.len());
                if shape.is_grouped() {
                    words += &format!(" in {}", group_name(shape.group_of(i)));
                }
                words
            }
        };
        if let Some(live) = all(&walk, ".walk-live").first() {
            live.set_text_content(Some(&words));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(shape: &Shape, keys: &[&str]) -> Vec<(At, Say)> {
        let mut at = At::Chart;
        keys.iter()
            .map(|k| {
                let (next, say) = step(at, k, shape).unwrap_or((at, Say::Chart));
                at = next;
                (next, say)
            })
            .collect()
    }

    #[test]
    fn a_flat_chart_is_a_chart_above_its_points() {
        let shape = Shape::flat(4);
        let got = walk(
            &shape,
            &[
                "ArrowDown",
                "ArrowRight",
                "ArrowRight",
                "End",
                "ArrowRight",
                "Home",
                "ArrowLeft",
                "ArrowUp",
            ],
        );
        let points: Vec<At> = got.iter().map(|(at, _)| *at).collect();
        assert_eq!(
            points,
            [
                At::Point(0),
                At::Point(1),
                At::Point(2),
                At::Point(3),
                At::Point(3),
                At::Point(0),
                At::Point(0),
                At::Chart
            ]
        );
        assert_eq!(got[7].1, Say::Chart);
        assert_eq!(
            step(At::Chart, "End", &shape),
            Some((At::Point(3), Say::Point(3)))
        );
    }

    #[test]
    fn groups_sit_between_the_chart_and_their_rows() {
        // Rows 0 and 2 kept, 1 and 3 removed: the groups in order of first appearance.
        let shape = Shape::new(&[Some("kept"), Some("removed"), Some("kept"), Some("removed")]);
        assert_eq!(shape.group_count(), 2);
        assert_eq!(shape.members(1), [1, 3]);
        let got = walk(
            &shape,
            &[
                "ArrowDown",
                "ArrowRight",
                "ArrowDown",
                "ArrowRight",
                "ArrowRight",
                "ArrowUp",
                "Home",
                "ArrowUp",
            ],
        );
        let ats: Vec<At> = got.iter().map(|(at, _)| *at).collect();
        assert_eq!(
            ats,
            [
                At::Group(0),
                At::Group(1),
                At::Point(1),
                At::Point(3),
                At::Point(3),
                At::Group(1),
                At::Group(0),
                At::Chart
            ]
        );
        assert_eq!(shape.siblings(3), (vec![1, 3], 1));
    }

    #[test]
    fn rows_without_a_group_each_or_with_one_group_are_flat() {
        assert!(!Shape::new(&[Some("a"), None]).is_grouped());
        assert!(!Shape::new(&[Some("a"), Some("a")]).is_grouped());
        assert!(!Shape::new::<&str>(&[]).is_grouped());
    }

    #[test]
    fn escape_goes_up_to_the_chart_and_then_lets_the_page_have_it() {
        let shape = Shape::flat(3);
        assert_eq!(
            step(At::Point(2), "Escape", &shape),
            Some((At::Chart, Say::Left))
        );
        assert_eq!(step(At::Chart, "Escape", &shape), None);
        assert_eq!(step(At::Point(1), "Tab", &shape), None);
        assert_eq!(
            step(At::Point(1), "h", &shape),
            Some((At::Point(1), Say::Keys))
        );
    }

    #[test]
    fn a_stale_or_empty_walk_stands_on_the_chart() {
        assert_eq!(
            step(At::Point(9), "ArrowRight", &Shape::flat(3)),
            Some((At::Chart, Say::Chart))
        );
        assert_eq!(
            step(At::Chart, "ArrowDown", &Shape::flat(0)),
            Some((At::Chart, Say::Chart))
        );
        assert_eq!(At::parse("p12"), At::Point(12));
        assert_eq!(At::parse("g0"), At::Group(0));
        assert_eq!(At::parse("p"), At::Chart);
        assert_eq!(At::parse(""), At::Chart);
        assert_eq!(At::parse(&At::Point(4).text()), At::Point(4));
    }

    #[test]
    fn pitch_rises_with_the_value_over_two_octaves() {
        let t = tones(&[0.1, 0.7, f64::NAN, 0.4]);
        assert_eq!(t.len(), 3, "a row with no value is silent");
        assert_eq!(
            t[0],
            Tone {
                start_s: 0.0,
                hz: 220.0
            }
        );
        assert_eq!(t[1].hz, 880.0);
        assert!(
            (t[2].hz - 440.0).abs() < 1e-9,
            "halfway in value is one octave up"
        );
        assert!(
            (t[2].start_s - 3.0 * (TONE_S + GAP_S)).abs() < 1e-12,
            "it keeps its place"
        );
        // A flat chart sounds level, at the middle.
        assert!(tones(&[0.25; 4])
            .iter()
            .all(|t| (t.hz - 440.0).abs() < 1e-9));
        assert_eq!(
            step(At::Point(1), "s", &Shape::flat(3)),
            Some((At::Point(1), Say::Play))
        );
        assert_eq!(
            step(At::Chart, "M", &Shape::flat(3)),
            Some((At::Chart, Say::Sound))
        );
    }

    #[test]
    fn page_keys_move_ten_and_key_points_wrap_round() {
        let shape = Shape::flat(25).keyed(&(0..25).map(|i| i == 7 || i == 19).collect::<Vec<_>>());
        let got = walk(
            &shape,
            &[
                "PageDown", "PageDown", "PageDown", "PageDown", "PageUp", "n", "n", "n", "p", "p",
            ],
        );
        let ats: Vec<At> = got.iter().map(|(at, _)| *at).collect();
        assert_eq!(
            ats,
            [
                At::Point(0),
                At::Point(10),
                At::Point(20),
                At::Point(24),
                At::Point(14),
                At::Point(19),
                At::Point(7),
                At::Point(19),
                At::Point(7),
                At::Point(19)
            ]
        );
        // From the chart (or a group) N takes the first key point and P the last.
        assert_eq!(
            step(At::Chart, "N", &shape),
            Some((At::Point(7), Say::Point(7)))
        );
        assert_eq!(
            step(At::Chart, "P", &shape),
            Some((At::Point(19), Say::Point(19)))
        );
        // Page keys stay among a group's rows.
        let grouped = Shape::new(
            &(0..30)
                .map(|i| Some(if i % 3 == 0 { "a" } else { "b" }))
                .collect::<Vec<_>>(),
        );
        assert_eq!(
            step(At::Point(0), "PageDown", &grouped),
            Some((At::Point(27), Say::Point(27))),
            "group a is rows 0, 3, ..., 27: ten on from its first is its last"
        );
        assert_eq!(
            step(At::Point(4), "n", &Shape::flat(5)),
            Some((At::Point(4), Say::NoKeyPoint))
        );
    }

    /// The walk's own words read at grade 9 or below (Flesch–Kincaid, Chartability's
    /// "Reading level inappropriate").
    #[test]
    fn the_walks_words_are_plain() {
        let hint = NOTES
            .split('>')
            .nth(1)
            .and_then(|t| t.split('<').next())
            .unwrap_or("");
        for text in [
            KEYS,
            hint,
            LEFT,
            NO_KEY_POINT,
            &chart_text(120, 0),
            &chart_text(6, 2),
            sound_text(true),
            sound_text(false),
        ] {
            let g = grade(text);
            assert!(g <= 9.0, "grade {g:.1}: {text}");
        }
    }

    #[test]
    fn the_grade_follows_flesch_kincaid() {
        // Flesch–Kincaid: 0.39 words per sentence + 11.8 syllables per word − 15.59.
        // "The cat sat on the mat." 6 words, 6 syllables, 1 sentence: 2.34 + 11.8 − 15.59.
        assert!((grade("The cat sat on the mat.") - (-1.45)).abs() < 1e-9);
        assert_eq!(syllables("probability"), 5);
        assert_eq!(syllables("token"), 2);
        assert_eq!(syllables("the"), 1);
        assert_eq!(syllables("configuration"), 5);
        assert_eq!(syllables("removed"), 2);
    }

    #[test]
    fn a_row_says_each_header_with_its_cell_and_its_place() {
        let headers = ["Token", "Probability", "Status", "Draw"].map(String::from);
        let cells = ["2", "0.9700", "kept", ""].map(String::from);
        assert_eq!(
            row_text(&headers, &cells, 2, 4),
            "Token 2, Probability 0.9700, Status kept, 3 of 4"
        );
        assert_eq!(group_text("kept", 1, 0, 2), "kept: 1 point, group 1 of 2");
    }
}
