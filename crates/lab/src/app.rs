//! The lab's shell: title, a skip link and the panels.

use leptos::prelude::*;

use crate::generate_panel::GeneratePanel;
use crate::step_panel::StepPanel;

#[component]
pub fn App() -> impl IntoView {
    view! {
        <a class="skip-link" href="#main">"Skip to the lab"</a>
        <header>
            <h1>"Decoding-policy lab"</h1>
            <p class="tagline">
                "The model supplies possibilities; the decoding policy decides which possibilities can become product behaviour."
            </p>
        </header>
        <main id="main">
            <StepPanel/>
            <GeneratePanel/>
        </main>
    }
}
