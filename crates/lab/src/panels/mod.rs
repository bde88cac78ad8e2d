//! One folder per panel, named by its URL slug (`?panel=kv-cache` is `kv_cache/`). Each holds
//! `panel.rs`, the Leptos component that only draws, and `view_model.rs`, the plain data it
//! draws (form text in, checked values and rows out), tested natively. [`panel_head`] is what
//! they share: the heading that labels the section, and the paragraph that says what the panel
//! does.

use leptos::prelude::*;

use crate::widgets::form::{ProblemSummary, Problems};

pub mod capacity;
pub mod checkpoint;
pub mod compare;
pub mod generate;
pub mod kv_cache;
pub mod memory;
pub mod observe;
pub mod step;
pub mod your_turn;

/// A panel's heading (`{key}-title`, which labels its section), the paragraph that says
/// what it does, its terms (markup) and the summary of its form's problems when it has them.
/// (A function, not a component with children: erasing each panel's view to wrap it cost the
/// page 5 kB.)
pub fn panel_head(
    key: &'static str,
    title: &'static str,
    intro: &'static str,
    terms: Option<&'static str>,
    problems: Option<Signal<Problems>>,
) -> impl IntoView {
    view! {
        <h2 id=format!("{key}-title")>{title}</h2>
        <p>{intro}</p>
        {terms.map(|terms| view! { <div class="terms" inner_html=terms></div> })}
        {problems.map(|problems| view! { <ProblemSummary problems=problems/> })}
    }
}
