//! Which of the open panel's controls a lesson shows. The URL's `show` names them: a
//! control's name is its input's id less the panel's prefix, in lower case with `_` (`-`
//! and capitals read the same): `temperature`, `top_k`, and `n` for the capacity panel's
//! `cap-n`. Every other control is hidden, and its value is stated in one read-only
//! sentence ([`Controls::fixed`]), so that a lesson varies one thing. A hidden control
//! whose value has a problem is shown, so the problem is never out of reach.
//!
//! Every control registers itself here ([`hidden`]) when it is created, shown or not: the
//! shell builds the sentence from the register, and the embed-code dialog offers each
//! control to tick. A control without a value (an action such as "New seed") belongs to the
//! setting it changes, and shows and hides with it.

use leptos::prelude::*;

/// One control of the open panel.
#[derive(Clone)]
pub struct Control {
    /// Its name in `show`.
    pub name: String,
    pub label: &'static str,
    /// What it is set to, in words; `None` for an action.
    pub value: Option<Signal<String>>,
}

/// The open panel's controls and the names `show` lists; one per lab, in a context.
#[derive(Clone, Copy)]
pub struct Controls {
    show: StoredValue<Vec<String>>,
    prefix: StoredValue<&'static str>,
    all: RwSignal<Vec<Control>>,
}

/// `id` less `prefix`, with `_` for `-`: the form `show` is compared in.
fn name_of(prefix: &str, id: &str) -> String {
    id.strip_prefix(prefix)
        .unwrap_or(id)
        .replace('-', "_")
        .to_ascii_lowercase()
}

impl Default for Controls {
    fn default() -> Controls {
        Controls::empty()
    }
}

impl Controls {
    /// An empty register, showing every control.
    fn empty() -> Controls {
        Controls {
            show: StoredValue::new(Vec::new()),
            prefix: StoredValue::new(""),
            all: RwSignal::new(Vec::new()),
        }
    }

    /// Empties the register for a panel about to be created, whose ids start with `prefix`,
    /// and whose lesson shows `show` (empty: every control).
    pub fn open(&self, prefix: &'static str, show: &[String]) {
        self.prefix.set_value(prefix);
        self.show
            .set_value(show.iter().map(|s| name_of("", s)).collect());
        self.all.set(Vec::new());
    }

    /// Whether `show` lists anything.
    pub fn limited(&self) -> bool {
        self.show.with_value(|s| !s.is_empty())
    }

    fn shows(&self, name: &str) -> bool {
        self.show
            .with_value(|s| s.is_empty() || s.iter().any(|n| n == name))
    }

    /// Registers the control `id`; whether the lesson shows it.
    fn add(&self, id: &str, label: &'static str, value: Option<Signal<String>>) -> bool {
        let name = name_of(self.prefix.get_value(), id);
        let shown = self.shows(&name);
        self.all
            .update(|all| all.push(Control { name, label, value }));
        shown
    }

    /// The settings (controls with a value) of the open panel, each name once.
    pub fn settings(&self) -> Vec<Control> {
        let mut out: Vec<Control> = Vec::new();
        self.all.with(|all| {
            for c in all.iter().filter(|c| c.value.is_some()) {
                if !out.iter().any(|o| o.name == c.name) {
                    out.push(c.clone());
                }
            }
        });
        out
    }

    /// The read-only sentence stating every setting the lesson fixes; `None` when `show`
    /// lists nothing.
    pub fn fixed(&self) -> Option<String> {
        // The register changes as the panel's controls are created, after `show` is set:
        // whoever reads this re-reads it then.
        self.all.track();
        if !self.limited() {
            return None;
        }
        let (shown, fixed): (Vec<Control>, Vec<Control>) = self
            .settings()
            .into_iter()
            .partition(|c| self.shows(&c.name));
        let words = |c: &Control| {
            let value = c.value.map(|v| v.get()).unwrap_or_default();
            let value = value.trim();
            format!(
                "{}: {}",
                c.label,
                if value.is_empty() { "none" } else { value }
            )
        };
        let varied: Vec<&str> = shown.iter().map(|c| c.label).collect();
        let fixed: Vec<String> = fixed.iter().map(words).collect();
        Some(format!(
            "This experiment varies {}. Fixed: {}.",
            if varied.is_empty() {
                "nothing".to_string()
            } else {
                varied.join(", ")
            },
            if fixed.is_empty() {
                "nothing".to_string()
            } else {
                fixed.join("; ")
            }
        ))
    }

    /// A sentence naming what `show` lists that the open panel does not have.
    pub fn unknown(&self) -> Option<String> {
        let settings = self.settings();
        let names: Vec<String> = self
            .all
            .with(|all| all.iter().map(|c| c.name.clone()).collect());
        let missing: Vec<String> = self.show.with_value(|s| {
            s.iter()
                .filter(|n| !names.contains(n))
                .map(|n| format!("\"{n}\""))
                .collect()
        });
        (!missing.is_empty() && !names.is_empty()).then(|| {
            format!(
                "The URL's show= names {}, which this panel does not have. Its controls: {}.",
                missing.join(", "),
                settings
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
    }
}

/// Registers the control `id` (for an action, its setting's id) and gives its box's
/// `hidden`: true while the lesson fixes it and it has no problem. `value` is the setting
/// in words; none for an action.
pub fn hidden(
    id: &'static str,
    label: &'static str,
    value: Option<Signal<String>>,
    problem: Option<Signal<Option<String>>>,
) -> impl Fn() -> bool + Copy + Send + Sync + 'static {
    let shown = use_context::<Controls>().is_none_or(|c| c.add(id, label, value));
    move || !shown && problem.and_then(|p| p.get()).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed(value: &str) -> Option<Signal<String>> {
        Some(Signal::stored(value.to_string()))
    }

    #[test]
    fn show_names_controls_less_the_prefix_and_the_rest_are_stated() {
        let controls = Controls::default();
        controls.open("gen-", &["Temperature".to_string(), "top-k".to_string()]);
        assert!(controls.add("gen-temperature", "Temperature", fixed("0.7")));
        assert!(controls.add("gen-top-k", "Top-k", fixed("3")));
        assert!(!controls.add("gen-seed", "Seed", fixed("7")));
        assert!(!controls.add("gen-stop", "Stop strings", fixed(" ")));
        // An action belongs to its setting and is not stated.
        assert!(!controls.add("gen-seed", "New seed", None));
        assert_eq!(
            controls.fixed().as_deref(),
            Some("This experiment varies Temperature, Top-k. Fixed: Seed: 7; Stop strings: none.")
        );
        assert_eq!(controls.unknown(), None);

        controls.open("cap-", &["rate".to_string(), "ttft_ms".to_string()]);
        assert!(controls.add("cap-rate", "Arrival rate", fixed("4")));
        assert!(!controls.add("cap-ttft", "SLO: TTFT", fixed("500")));
        assert_eq!(
            controls.unknown().as_deref(),
            Some("The URL's show= names \"ttft_ms\", which this panel does not have. Its controls: rate, ttft.")
        );
    }

    #[test]
    fn without_show_every_control_is_shown_and_nothing_is_stated() {
        let controls = Controls::default();
        controls.open("", &[]);
        assert!(controls.add("temperature", "Temperature", fixed("1")));
        assert!(controls.add("seed", "New seed", None));
        assert!(!controls.limited());
        assert_eq!(controls.fixed(), None);
        assert_eq!(controls.settings().len(), 1);
    }
}
