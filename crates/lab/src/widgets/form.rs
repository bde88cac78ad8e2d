//! The one form model every panel uses. A panel's form is the text of its fields; it reads
//! itself from the URL's pairs, writes itself back, and checks into the value it stands for
//! or into [`Problems`]: every field that is wrong, each with a sentence naming its value.
//! The components mark each wrong field at the field (`aria-invalid`, and
//! `aria-describedby` pointing at its message) and list them all above the results
//! ([`ProblemSummary`]), as WCAG 3.3.1 and 3.3.3 ask.

use std::fmt;

use leptos::prelude::*;

/// What a panel's form is.
pub trait Form: Clone + Default + PartialEq + Send + Sync + 'static {
    /// What the form stands for once every field reads.
    type Checked;

    /// The form a URL's pairs ask for. Keys it does not know belong to other parts of the
    /// lab; a known key whose value the form cannot hold (an unknown name) is a problem of
    /// that field, and the field keeps its default.
    fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> (Self, Problems);

    /// The pairs that give this form back through [`from_pairs`](Form::from_pairs).
    fn to_pairs(&self) -> Vec<(&'static str, String)>;

    /// The checked value, or every field's problem.
    fn check(&self) -> Result<Self::Checked, Problems>;
}

/// One field's problem: the field (its input's id) and a sentence for the learner.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub field: &'static str,
    pub message: String,
}

/// Every problem of a form, in the order of its fields.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Problems(Vec<Problem>);

impl Problems {
    /// One problem, for a form that found it alone.
    pub fn one(field: &'static str, message: impl Into<String>) -> Problems {
        let mut problems = Problems::default();
        problems.add(field, message);
        problems
    }

    pub fn add(&mut self, field: &'static str, message: impl Into<String>) {
        self.0.push(Problem {
            field,
            message: message.into(),
        });
    }

    /// Names `field` when `prompt` is blank: the model needs a token to start from.
    pub fn prompt(&mut self, field: &'static str, prompt: &str) {
        if prompt.trim().is_empty() {
            self.add(
                field,
                "Type a prompt: the model needs at least one token to start from.",
            );
        }
    }

    /// `result`'s value, or `None` with its error's sentence kept against `field`.
    pub fn field<T, E: fmt::Display>(
        &mut self,
        field: &'static str,
        result: Result<T, E>,
    ) -> Option<T> {
        result.map_err(|e| self.add(field, e.to_string())).ok()
    }

    /// The problems of another part of the form, after these.
    pub fn extend(&mut self, other: Problems) {
        self.0.extend(other.0);
    }

    /// These problems less those of `field`, once the learner has changed it.
    pub fn without(&self, field: &str) -> Problems {
        Problems(
            self.0
                .iter()
                .filter(|p| p.field != field)
                .cloned()
                .collect(),
        )
    }

    /// These problems in the order of `fields` (a field not listed last), each field's
    /// own in the order found.
    pub fn in_order(mut self, fields: &[&str]) -> Problems {
        let place = |p: &Problem| fields.iter().position(|f| *f == p.field);
        self.0.sort_by_key(|p| place(p).unwrap_or(usize::MAX));
        self
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Problem> {
        self.0.iter()
    }

    /// The message shown at `field`: its problems, one after the other.
    pub fn of(&self, field: &str) -> Option<String> {
        let messages: Vec<&str> = self
            .0
            .iter()
            .filter(|p| p.field == field)
            .map(|p| p.message.as_str())
            .collect();
        (!messages.is_empty()).then(|| messages.join(" "))
    }

    /// `value` when no field had a problem; the problems otherwise.
    pub fn or<T>(self, value: impl FnOnce() -> Option<T>) -> Result<T, Problems> {
        if self.is_empty() {
            // Every field read, so `value` has all it needs; if it still has nothing, the
            // form failed to record a problem, which is worth saying rather than hiding.
            value().ok_or_else(|| Problems::one("form", "The form could not be read."))
        } else {
            Err(self)
        }
    }
}

/// For a form whose every field is typed text under its own URL key: the texts the URL's
/// `pairs` give, each in place of its default as it is, so that the check reports a bad one
/// at its field. Keys not in `keys` belong to other parts of the lab.
pub fn texts_from_pairs<'a, const N: usize>(
    keys: [&str; N],
    defaults: [String; N],
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> [String; N] {
    let mut texts = defaults;
    for (key, value) in pairs {
        if let Some(i) = keys.iter().position(|k| *k == key) {
            texts[i] = value.to_string();
        }
    }
    texts
}

/// The inverse of [`texts_from_pairs`]: each key with its field's text, trimmed.
pub fn pairs_from_texts<const N: usize>(
    keys: [&'static str; N],
    texts: [&str; N],
) -> Vec<(&'static str, String)> {
    keys.into_iter()
        .zip(texts)
        .map(|(key, text)| (key, text.trim().to_string()))
        .collect()
}

/// The id of the message element of `field`, which its input's `aria-describedby` names.
pub fn problem_id(field: &str) -> String {
    format!("{field}-problem")
}

/// A form's problems: the URL's, while the learner has not changed their fields, then
/// those of `checked`, the form's check (or its result, which fails with the check's).
pub fn problems_of<T: Send + Sync + 'static>(
    url: Option<RwSignal<Problems>>,
    checked: Memo<Result<T, Problems>>,
) -> Signal<Problems> {
    Signal::derive(move || {
        let mut all = url.map(|u| u.get()).unwrap_or_default();
        checked.with(|c| {
            if let Err(found) = c {
                all.extend(found.clone());
            }
        });
        all
    })
}

/// The message at each field, for the form whose problems are `problems`.
pub fn problem_at(
    problems: Signal<Problems>,
) -> impl Fn(&'static str) -> Signal<Option<String>> + Copy {
    move |field| Signal::derive(move || problems.with(|p| p.of(field)))
}

/// The list of every problem above a panel's results: how many fields need a change, then
/// each message as a link to its field. Nothing when the form reads.
#[component]
pub fn ProblemSummary(problems: Signal<Problems>) -> impl IntoView {
    move || {
        problems.with(|problems| {
            (!problems.is_empty()).then(|| {
                let heading = match problems.len() {
                    1 => "One field needs a change:".to_string(),
                    n => format!("{n} fields need a change:"),
                };
                let items = problems
                    .iter()
                    .map(|p| {
                        let href = format!("#{}", p.field);
                        view! { <li><a href=href>{p.message.clone()}</a></li> }
                    })
                    .collect_view();
                view! {
                    <div class="problem-summary error" role="alert" data-testid="problem-summary">
                        <p>{heading}</p>
                        <ul>{items}</ul>
                    </div>
                }
            })
        })
    }
}

/// For tests: the form's one problem after `edit`, which must be at `field`.
#[cfg(test)]
pub fn the_only_problem<F: Form>(edit: impl FnOnce(&mut F), field: &str) -> String {
    let mut form = F::default();
    edit(&mut form);
    let Err(problems) = form.check() else {
        panic!("{field}: the form checks");
    };
    assert_eq!(problems.len(), 1, "{problems:?}");
    problems
        .of(field)
        .unwrap_or_else(|| panic!("{field}: {problems:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_keep_every_field_in_order() {
        let mut problems = Problems::default();
        assert_eq!(problems.field("seed", Ok::<_, String>(7)), Some(7));
        assert_eq!(
            problems.field::<u64, String>("top-k", Err("Top-k is bad.".into())),
            None
        );
        problems.add("logits", "Logit \"zz\" is not a number.");
        problems.add("top-k", "Again.");
        assert_eq!(problems.len(), 3);
        assert_eq!(
            problems.of("top-k").as_deref(),
            Some("Top-k is bad. Again.")
        );
        assert_eq!(problems.of("seed"), None);
        let fields: Vec<_> = problems.iter().map(|p| p.field).collect();
        assert_eq!(fields, ["top-k", "logits", "top-k"]);
        assert!(problems.or(|| Some(1)).is_err());
        assert_eq!(Problems::default().or(|| Some(1)), Ok(1));
    }

    #[test]
    fn text_fields_go_to_and_from_their_keys() {
        let keys = ["a", "b", "c"];
        let texts = texts_from_pairs(
            keys,
            ["1", "2", "3"].map(String::from),
            [("panel", "x"), ("c", " 30 "), ("a", "ten")],
        );
        assert_eq!(texts, ["ten", "2", " 30 "], "a bad value is kept as it is");
        assert_eq!(
            pairs_from_texts(keys, texts.each_ref().map(String::as_str)),
            [("a", "ten".into()), ("b", "2".into()), ("c", "30".into())]
        );
    }
}
