//! All of the lab's state that lives in the URL, read and written in one place.
//!
//! The shell owns five keys: `panel` (which panel is open, by its slug), `embed=1` (one
//! panel, minimal chrome, for an iframe), `view=table` (tables first, charts hidden),
//! `show` (the controls a lesson varies, see [`crate::widgets::controls`]) and
//! `theme=light|dark|auto` (`auto`, the default, follows `prefers-color-scheme`).
//! Every other key belongs to the open panel, which reads [`pairs`] once when it is
//! created and calls [`write`] whenever its fields change. Back and forward re-create the
//! open panel from the URL they land on (see `app.rs`), so a panel never has to listen.

use leptos::prelude::Effect;
use wasm_bindgen::JsValue;

/// The keys the shell keeps when a panel writes its own.
pub const SHELL_KEYS: [&str; 5] = ["panel", "embed", "view", "show", "theme"];

/// Writes closer together than this (typing) replace the newest history entry instead of
/// adding one, so Back undoes an edit, not a keystroke.
const HISTORY_GROUP_MS: f64 = 1000.0;

thread_local! {
    static LAST_PUSH_MS: std::cell::Cell<f64> = const { std::cell::Cell::new(f64::NEG_INFINITY) };
    static CHANGED: leptos::prelude::ArcTrigger = leptos::prelude::ArcTrigger::new();
}

/// Makes the reactive code running now re-run whenever the lab changes its URL.
pub fn track() {
    use leptos::prelude::Track;
    CHANGED.with(|t| t.track());
}

/// The panels, in the order the lab lists them; the slug is the `panel` key's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PanelId {
    Step,
    Generate,
    YourTurn,
    Compare,
    KvCache,
    Memory,
    Checkpoint,
    Capacity,
    Observe,
}

impl PanelId {
    pub const ALL: [PanelId; 9] = [
        PanelId::Step,
        PanelId::Generate,
        PanelId::YourTurn,
        PanelId::Compare,
        PanelId::KvCache,
        PanelId::Memory,
        PanelId::Checkpoint,
        PanelId::Capacity,
        PanelId::Observe,
    ];

    pub fn slug(self) -> &'static str {
        match self {
            PanelId::Step => "step",
            PanelId::Generate => "generate",
            PanelId::YourTurn => "your-turn",
            PanelId::Compare => "compare",
            PanelId::KvCache => "kv-cache",
            PanelId::Memory => "memory",
            PanelId::Checkpoint => "checkpoint",
            PanelId::Capacity => "capacity",
            PanelId::Observe => "observe",
        }
    }

    /// The name on the panel's tab.
    pub fn title(self) -> &'static str {
        match self {
            PanelId::Step => "Decoding step",
            PanelId::Generate => "Generate",
            PanelId::YourTurn => "Your turn",
            PanelId::Compare => "Compare",
            PanelId::KvCache => "KV-cache memory",
            PanelId::Memory => "GPU memory ledger",
            PanelId::Checkpoint => "Checkpoint",
            PanelId::Capacity => "Capacity plan",
            PanelId::Observe => "Observe",
        }
    }

    /// What the panel's input ids start with; a control's name in `show` is its id without it.
    pub fn control_prefix(self) -> &'static str {
        match self {
            PanelId::Step | PanelId::Checkpoint => "",
            PanelId::Generate => "gen-",
            PanelId::YourTurn => "yt-",
            PanelId::Compare => "cmp-",
            PanelId::KvCache => "kv-cache-",
            PanelId::Memory => "memory-",
            PanelId::Capacity => "cap-",
            PanelId::Observe => "obs-",
        }
    }

    pub fn from_slug(slug: &str) -> Option<PanelId> {
        PanelId::ALL.into_iter().find(|p| p.slug() == slug)
    }
}

/// The lab's colours: `Auto` follows the reader's `prefers-color-scheme`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Theme {
    #[default]
    Auto,
    Light,
    Dark,
}

impl Theme {
    pub const ALL: [Theme; 3] = [Theme::Auto, Theme::Light, Theme::Dark];

    /// The theme a `theme` value names.
    pub fn named(name: &str) -> Option<Theme> {
        Theme::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The `theme` key's value, and the `data-theme` the style sheet reads.
    pub fn name(self) -> &'static str {
        match self {
            Theme::Auto => "auto",
            Theme::Light => "light",
            Theme::Dark => "dark",
        }
    }
}

/// The shell's reading of a query: the panel, the modes, and what it could not read.
#[derive(Clone, Debug, PartialEq)]
pub struct Shell {
    pub panel: PanelId,
    pub embed: bool,
    pub table_view: bool,
    /// The controls the URL's `show` names (empty: every control), as it names them.
    pub show: Vec<String>,
    pub theme: Theme,
    /// Sentences about shell keys that were present but not understood.
    pub problems: Vec<String>,
}

impl Shell {
    /// Reads the shell's keys from query pairs; anything unreadable falls back to the
    /// default and is named in `problems`.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Shell {
        let mut shell = Shell {
            panel: PanelId::Step,
            embed: false,
            table_view: false,
            show: Vec::new(),
            theme: Theme::Auto,
            problems: Vec::new(),
        };
        let (mut named, mut generate_keys) = (false, false);
        for (key, value) in pairs {
            match key {
                // Permalinks from before the lab had panels name no panel.
                "run" | "backend" | "prompt" => generate_keys = true,
                _ => {}
            }
            match key {
                "panel" => match PanelId::from_slug(value) {
                    Some(p) => {
                        shell.panel = p;
                        named = true;
                    }
                    None => shell.problems.push(format!(
                        "The URL asks for a panel named \"{value}\", which the lab does not have; showing the decoding step. Panels: {}.",
                        PanelId::ALL.map(PanelId::slug).join(", ")
                    )),
                },
                "embed" => match value {
                    "1" | "true" => shell.embed = true,
                    "0" | "false" | "" => {}
                    other => shell.problems.push(format!(
                        "The URL's embed=\"{other}\" is not 1 or 0; showing the whole lab."
                    )),
                },
                "view" => match value {
                    "table" => shell.table_view = true,
                    "chart" | "" => {}
                    other => shell.problems.push(format!(
                        "The URL's view=\"{other}\" is not \"table\" or \"chart\"; showing charts."
                    )),
                },
                "show" => {
                    shell.show = value
                        .split(',')
                        .map(str::trim)
                        .filter(|name| !name.is_empty())
                        .map(str::to_string)
                        .collect()
                }
                "theme" => match Theme::named(value) {
                    Some(theme) => shell.theme = theme,
                    None => shell.problems.push(format!(
                        "The URL's theme=\"{value}\" is not light, dark or auto; following the system's."
                    )),
                },
                _ => {}
            }
        }
        if !named && generate_keys {
            shell.panel = PanelId::Generate;
        }
        shell
    }

    /// The shell's own query pairs (defaults left out).
    pub fn to_pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = vec![("panel", self.panel.slug().to_string())];
        if self.embed {
            pairs.push(("embed", "1".to_string()));
        }
        if self.table_view {
            pairs.push(("view", "table".to_string()));
        }
        if !self.show.is_empty() {
            pairs.push(("show", self.show.join(",")));
        }
        if self.theme != Theme::Auto {
            pairs.push(("theme", self.theme.name().to_string()));
        }
        pairs
    }
}

/// Builds a query string (with the leading `?`) from pairs, in their order.
pub fn query_string(pairs: &[(&str, String)]) -> String {
    let Ok(params) = web_sys::UrlSearchParams::new() else {
        return String::new();
    };
    for (key, value) in pairs {
        params.append(key, value);
    }
    format!("?{}", String::from(params.to_string()))
}

/// Every key–value pair of the page URL's query, in order.
pub fn pairs() -> Vec<(String, String)> {
    let Some(search) = web_sys::window().and_then(|w| w.location().search().ok()) else {
        return Vec::new();
    };
    let Ok(params) = web_sys::UrlSearchParams::new_with_str(&search) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let entries = js_sys::try_iter(&params).ok().flatten();
    for entry in entries.into_iter().flatten().flatten() {
        let pair = js_sys::Array::from(&entry);
        if let (Some(k), Some(v)) = (pair.get(0).as_string(), pair.get(1).as_string()) {
            out.push((k, v));
        }
    }
    out
}

/// Sets the open panel's own keys in the URL, keeping the shell's. A write that changes
/// nothing is dropped; one soon after the last new entry replaces it.
pub fn write(panel_pairs: &[(&str, String)]) {
    let current = pairs();
    let mut next: Vec<(&str, String)> = current
        .iter()
        .filter(|(k, _)| SHELL_KEYS.contains(&k.as_str()))
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    next.extend(
        panel_pairs
            .iter()
            .filter(|(k, _)| !SHELL_KEYS.contains(k))
            .map(|(k, v)| (*k, v.clone())),
    );
    let now = crate::js::now_ms();
    let grouped = now - LAST_PUSH_MS.with(|t| t.get()) < HISTORY_GROUP_MS;
    navigate(&query_string(&next), !grouped);
    if !grouped {
        LAST_PUSH_MS.with(|t| t.set(now));
    }
}

/// Writes the open panel's pairs ([`write`]) whenever `pairs` changes, but not on creation:
/// opening a panel should not add a history entry.
pub fn follow(pairs: impl Fn() -> Vec<(&'static str, String)> + 'static) {
    Effect::new(move |written: Option<()>| {
        let pairs = pairs();
        if written.is_some() {
            write(&pairs);
        }
    });
}

/// Sets the shell's keys: a new history entry. The open panel's keys stay when
/// `keep_panel` (a change of view); otherwise they go (a new panel starts from defaults).
pub fn write_shell(shell: &Shell, keep_panel: bool) {
    let mut next: Vec<(String, String)> = shell
        .to_pairs()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    if keep_panel {
        next.extend(
            pairs()
                .into_iter()
                .filter(|(k, _)| !SHELL_KEYS.contains(&k.as_str())),
        );
    }
    let next: Vec<(&str, String)> = next.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    navigate(&query_string(&next), true);
    LAST_PUSH_MS.with(|t| t.set(crate::js::now_ms()));
}

/// Goes to `query` in this page: a new history entry when `push`, else in place. Nothing
/// happens when the query is already the page's.
fn navigate(query: &str, push: bool) {
    let Some(window) = web_sys::window() else {
        return;
    };
    let current = window.location().search().unwrap_or_default();
    let normalised = |q: &str| q.trim_start_matches('?').to_string();
    if normalised(&current) == normalised(query) {
        return;
    }
    let Ok(history) = window.history() else {
        return;
    };
    let _ = if push {
        history.push_state_with_url(&JsValue::NULL, "", Some(query))
    } else {
        history.replace_state_with_url(&JsValue::NULL, "", Some(query))
    };
    CHANGED.with(|t| {
        use leptos::prelude::Notify;
        t.notify()
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_keys_round_trip_and_bad_values_are_named() {
        let shell = Shell::from_pairs([
            ("panel", "kv-cache"),
            ("embed", "1"),
            ("view", "table"),
            ("show", " l, b ,,"),
            ("theme", "dark"),
        ]);
        assert_eq!(shell.panel, PanelId::KvCache);
        assert!(shell.embed && shell.table_view && shell.problems.is_empty());
        assert_eq!(shell.show, ["l", "b"]);
        assert_eq!(shell.theme, Theme::Dark);
        let pairs = shell.to_pairs();
        let back = Shell::from_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str())));
        assert_eq!(back, shell);

        let odd = Shell::from_pairs([
            ("panel", "nope"),
            ("embed", "yes"),
            ("view", "3d"),
            ("theme", "sepia"),
        ]);
        assert_eq!(odd.panel, PanelId::Step);
        assert!(!odd.embed && !odd.table_view);
        assert_eq!(odd.theme, Theme::Auto);
        assert_eq!(odd.problems.len(), 4);
        assert!(odd.problems[3].contains("\"sepia\""), "{:?}", odd.problems);
        let old = Shell::from_pairs([("backend", "cpu"), ("run", "1")]);
        assert_eq!(old.panel, PanelId::Generate);
        assert!(odd.problems[0].contains("\"nope\""), "{:?}", odd.problems);
    }

    #[test]
    fn every_panel_slug_reads_back() {
        for p in PanelId::ALL {
            assert_eq!(PanelId::from_slug(p.slug()), Some(p));
        }
    }
}
