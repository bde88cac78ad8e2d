//! The lab's shell: the panel list, the table-view switch, embedding, and one open panel.
//!
//! Which panel is open and how it is shown lives in the URL ([`crate::shell::url`]); Back and
//! Forward re-create the open panel from the URL they land on.

use leptos::ev;
use leptos::prelude::*;

use crate::panels::capacity::panel::CapacityPanel;
use crate::panels::checkpoint::panel::CheckpointPanel;
use crate::panels::compare::panel::ComparePanel;
use crate::panels::generate::panel::GeneratePanel;
use crate::panels::kv_cache::panel::KvPanel;
use crate::panels::memory::panel::LedgerPanel;
use crate::panels::observe::panel::ObservePanel;
use crate::panels::step::panel::StepPanel;
use crate::panels::your_turn::panel::YourTurnPanel;
use crate::shell::embed_code::EmbedCode;
use crate::shell::url::{self, PanelId, Shell};
use crate::widgets::controls::Controls;

fn read_shell() -> Shell {
    let pairs = url::pairs();
    Shell::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
}

/// The open panel, created afresh from the URL.
fn panel_view(panel: PanelId) -> AnyView {
    match panel {
        PanelId::Step => view! { <StepPanel/> }.into_any(),
        PanelId::Generate => view! { <GeneratePanel/> }.into_any(),
        PanelId::YourTurn => view! { <YourTurnPanel/> }.into_any(),
        PanelId::Compare => view! { <ComparePanel/> }.into_any(),
        PanelId::KvCache => view! { <KvPanel/> }.into_any(),
        PanelId::Memory => view! { <LedgerPanel/> }.into_any(),
        PanelId::Checkpoint => view! { <CheckpointPanel/> }.into_any(),
        PanelId::Capacity => view! { <CapacityPanel/> }.into_any(),
        PanelId::Observe => view! { <ObservePanel/> }.into_any(),
    }
}

#[component]
pub fn App() -> impl IntoView {
    let initial = read_shell();
    let problems = initial.problems.clone();
    let controls = Controls::default();
    provide_context(controls);
    // The theme is set when the lab starts and whenever Back or Forward land on a URL.
    crate::shell::web::set_theme(initial.theme.name());
    let shell = RwSignal::new(initial);
    // Bumped by Back and Forward, so the open panel is re-created from the URL.
    let visit = RwSignal::new(0u64);
    let handle = window_event_listener(ev::popstate, move |_| {
        let landed = read_shell();
        crate::shell::web::set_theme(landed.theme.name());
        shell.set(landed);
        visit.update(|v| *v += 1);
    });
    on_cleanup(move || handle.remove());
    // Every chart of every panel is walked with the keyboard by this one listener.
    let walk = window_event_listener(ev::keydown, crate::widgets::walk::dom::on_key);
    let listen = window_event_listener(ev::click, crate::widgets::walk::dom::on_click);
    on_cleanup(move || {
        walk.remove();
        listen.remove();
    });

    let open = Memo::new(move |_| (shell.with(|s| s.panel), visit.get()));
    let embed = move || shell.with(|s| s.embed);
    let table_view = move || shell.with(|s| s.table_view);

    let choose = move |panel: PanelId| {
        if shell.with_untracked(|s| s.panel) == panel {
            return;
        }
        shell.update(|s| s.panel = panel);
        url::write_shell(&shell.get_untracked(), false);
    };
    let toggle_table = move |_| {
        shell.update(|s| s.table_view = !s.table_view);
        url::write_shell(&shell.get_untracked(), true);
    };

    let tabs = move || {
        PanelId::ALL
            .into_iter()
            .map(|panel| {
                let href = url::query_string(
                    &Shell {
                        panel,
                        ..shell.get()
                    }
                    .to_pairs(),
                );
                let current = move || (shell.with(|s| s.panel) == panel).then_some("page");
                view! {
                    <li>
                        <a
                            href=href
                            aria-current=current
                            on:click=move |ev: ev::MouseEvent| {
                                if ev.ctrl_key() || ev.meta_key() || ev.shift_key() || ev.button() != 0 {
                                    return;
                                }
                                ev.prevent_default();
                                choose(panel);
                            }
                        >
                            {panel.title()}
                        </a>
                    </li>
                }
            })
            .collect_view()
    };

    let full_lab = move || {
        url::query_string(
            &Shell {
                embed: false,
                show: Vec::new(),
                ..shell.get()
            }
            .to_pairs(),
        )
    };

    let problems = problems
        .into_iter()
        .map(|p| view! { <p class="error" role="alert">{p}</p> })
        .collect_view();

    view! {
        <div class="lab" class:embed=embed class:table-view=table_view>
            <a class="skip-link" href="#main">"Skip to the lab"</a>
            <header>
                <Show
                    when=embed
                    fallback=move || view! {
                        <h1>"Decoding-policy lab"</h1>
                        <p class="tagline">
                            "The model supplies possibilities; the decoding policy decides which possibilities can become product behaviour."
                        </p>
                        <nav aria-label="Panels">
                            <ul class="tabs">{tabs}</ul>
                        </nav>
                    }
                >
                    <h1 class="embed-title">
                        "Decoding-policy lab · "
                        <a href=full_lab target="_blank" rel="noopener">"Open in the full lab"</a>
                    </h1>
                </Show>
                <div class="view-switch">
                    <button
                        type="button"
                        class="secondary"
                        aria-pressed=move || table_view().to_string()
                        on:click=toggle_table
                    >
                        "Table view"
                    </button>
                    <small>"Shows every chart's table first and hides the charts."</small>
                </div>
            </header>
            {problems}
            <main id="main" tabindex="-1">
                {move || controls.unknown().map(|p| view! { <p class="error" role="alert">{p}</p> })}
                {move || controls.fixed().map(|s| view! { <p class="fixed-settings" data-testid="fixed-settings">{s}</p> })}
                {move || {
                    let panel = open.get().0;
                    controls.open(panel.control_prefix(), &shell.with_untracked(|s| s.show.clone()));
                    panel_view(panel)
                }}
                {move || (!embed()).then(|| view! { <EmbedCode panel=open.get().0 controls=controls/> })}
            </main>
        </div>
    }
}
