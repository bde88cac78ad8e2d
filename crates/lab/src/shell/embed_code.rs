//! "Embed this experiment": the iframe snippet for the open panel as it stands, for a
//! course author to paste into a course page. The author ticks the controls the lesson
//! varies (the snippet's `show=`; none ticked shows them all); the frame's `title`, which a
//! screen reader announces, names the panel and what it varies, and the page's `theme=`
//! goes with it. "Copy embed code" puts the snippet on the clipboard and says so in a live
//! region; the snippet is also on screen, to select by hand where the browser refuses the
//! clipboard.

use std::fmt;

use leptos::prelude::*;
use wasm_bindgen_futures::JsFuture;

use crate::js::js_text;
use crate::shell::url::{self, PanelId, Theme, SHELL_KEYS};
use crate::widgets::controls::Controls;

/// The query of the embedded experiment: the open panel's own pairs (from `pairs`, the
/// page's), the panel and its table view, `embed=1`, then `show` and `theme` when set.
pub fn embed_pairs(
    pairs: &[(String, String)],
    panel: PanelId,
    show: &[String],
    theme: Theme,
) -> Vec<(String, String)> {
    let mut out = vec![
        ("panel".to_string(), panel.slug().to_string()),
        ("embed".to_string(), "1".to_string()),
    ];
    out.extend(
        pairs
            .iter()
            .filter(|(k, v)| k == "view" && v == "table")
            .cloned(),
    );
    if !show.is_empty() {
        out.push(("show".to_string(), show.join(",")));
    }
    if theme != Theme::Auto {
        out.push(("theme".to_string(), theme.name().to_string()));
    }
    out.extend(
        pairs
            .iter()
            .filter(|(k, _)| !SHELL_KEYS.contains(&k.as_str()))
            .cloned(),
    );
    out
}

/// `text` made safe inside a double-quoted HTML attribute.
fn attribute(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The snippet: the frame at `src` (a host without `embed.js` keeps its 600-pixel height
/// and the panel scrolls inside), then the script at `lab_dir`, which fits every lab frame
/// on the page to its content.
pub fn snippet(src: &str, title: &str, lab_dir: &str) -> String {
    format!(
        "<iframe src=\"{}\" title=\"{}\" style=\"width:100%;height:600px;border:0\" loading=\"lazy\"></iframe>\n<script src=\"{}embed.js\" async></script>",
        attribute(src),
        attribute(title),
        attribute(lab_dir)
    )
}

/// The lab's address less its query (`…/index.html` or `…/`), and its folder.
fn lab_address() -> (String, String) {
    let Some(location) = web_sys::window().map(|w| w.location()) else {
        return (String::new(), String::new());
    };
    let here = format!(
        "{}{}",
        location.origin().unwrap_or_default(),
        location.pathname().unwrap_or_default()
    );
    let dir = here[..here.rfind('/').map_or(here.len(), |i| i + 1)].to_string();
    (here, dir)
}

/// Why the clipboard did not take the embed code.
#[derive(Clone, Debug, PartialEq)]
enum CopyError {
    /// No window: not a page.
    NoWindow,
    /// What the browser threw, as its text.
    Refused(String),
}

impl fmt::Display for CopyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CopyError::NoWindow => f.write_str("the page has no window"),
            CopyError::Refused(thrown) => f.write_str(thrown),
        }
    }
}

/// Puts `text` on the clipboard.
async fn copy(text: String) -> Result<(), CopyError> {
    let window = web_sys::window().ok_or(CopyError::NoWindow)?;
    JsFuture::from(window.navigator().clipboard().write_text(&text))
        .await
        .map(|_| ())
        .map_err(|e| CopyError::Refused(js_text(e)))
}

/// The frame's title: the panel, and what the lesson varies.
pub fn title(panel: PanelId, varied: &[&str]) -> String {
    match varied {
        [] => format!("Decoding-policy lab: {}", panel.title()),
        _ => format!(
            "Decoding-policy lab: {}, varying {}",
            panel.title(),
            varied.join(", ")
        ),
    }
}

#[component]
pub fn EmbedCode(panel: PanelId, controls: Controls) -> impl IntoView {
    let ticked = RwSignal::new(Vec::<String>::new());
    let said = RwSignal::new(String::new());
    let code = move || {
        // The panel's fields reach the URL in an effect; read the URL after each write.
        url::track();
        let shell = url::pairs();
        let settings = controls.settings();
        let shown: Vec<_> =
            ticked.with(|t| settings.iter().filter(|c| t.contains(&c.name)).collect());
        let names: Vec<String> = shown.iter().map(|c| c.name.clone()).collect();
        let theme = shell
            .iter()
            .find(|(k, _)| k == "theme")
            .and_then(|(_, v)| Theme::named(v))
            .unwrap_or_default();
        let query = embed_pairs(&shell, panel, &names, theme);
        let query: Vec<(&str, String)> =
            query.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        let (here, dir) = lab_address();
        let labels: Vec<&str> = shown.iter().map(|c| c.label).collect();
        snippet(
            &format!("{here}{}", url::query_string(&query)),
            &title(panel, &labels),
            &dir,
        )
    };

    // The dialog is built when it opens: closed, it holds no controls for the page to find.
    let opened = RwSignal::new(false);
    let body = move || {
        let boxes = controls
            .settings()
            .into_iter()
            .map(|c| {
                let id = format!("embed-show-{}", c.name);
                let name = c.name;
                let toggle = move |ev| {
                    let on = event_target_checked(&ev);
                    ticked.update(|t| {
                        t.retain(|n| *n != name);
                        if on {
                            t.push(name.clone());
                        }
                    });
                };
                view! {
                    <div class="cap-choice">
                        <input type="checkbox" id=id.clone() on:change=toggle/>
                        <label for=id>{c.label}</label>
                    </div>
                }
            })
            .collect_view();
        view! {
            <fieldset class="embed-show">
                <legend>"Controls the lesson varies"</legend>
                {boxes}
            </fieldset>
            <label for="embed-snippet">"Embed code"</label>
            <textarea id="embed-snippet" readonly rows="4" prop:value=code></textarea>
            <button type="button" on:click=move |_| {
                let (text, shown) = (code(), ticked.with_untracked(Vec::len));
                leptos::task::spawn_local(async move {
                    said.set(match copy(text).await {
                        Ok(()) => format!("Copied the embed code; the frame shows {}.", match shown {
                            0 => "every control".to_string(),
                            1 => "1 control and states the rest".to_string(),
                            n => format!("{n} controls and states the rest"),
                        }),
                        Err(why) => format!("The browser did not allow copying ({why}); select the code above and copy it."),
                    });
                });
            }>"Copy embed code"</button>
        }
    };

    view! {
        <details
            class="embed-code"
            on:toggle=move |ev| opened.set(event_target::<web_sys::Element>(&ev).has_attribute("open"))
        >
            <summary>"Embed this experiment"</summary>
            {move || opened.get().then(body)}
            <p role="status" data-testid="embed-said">{move || said.get()}</p>
        </details>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_embedded_query_keeps_the_panels_fields_and_replaces_the_shells() {
        let page = pairs(&[
            ("panel", "step"),
            ("view", "table"),
            ("show", "seed"),
            ("theme", "light"),
            ("temperature", "0.7"),
            ("top_k", "3"),
        ]);
        let show = ["temperature".to_string()];
        assert_eq!(
            embed_pairs(&page, PanelId::Step, &show, Theme::Dark),
            pairs(&[
                ("panel", "step"),
                ("embed", "1"),
                ("view", "table"),
                ("show", "temperature"),
                ("theme", "dark"),
                ("temperature", "0.7"),
                ("top_k", "3"),
            ])
        );
        // Every control, the reader's theme: neither key is written.
        let plain = embed_pairs(&page[..1], PanelId::Memory, &[], Theme::Auto);
        assert_eq!(plain, pairs(&[("panel", "memory"), ("embed", "1")]));
    }

    #[test]
    fn the_title_names_the_panel_and_what_it_varies() {
        assert_eq!(
            title(PanelId::Step, &[]),
            "Decoding-policy lab: Decoding step"
        );
        assert_eq!(
            title(PanelId::Capacity, &["Arrival rate", "Requests"]),
            "Decoding-policy lab: Capacity plan, varying Arrival rate, Requests"
        );
    }

    #[test]
    fn the_snippet_escapes_what_it_quotes() {
        let code = snippet(
            "https://lab.example/?panel=step&embed=1",
            "Top-k \"3\" <vs> 5 & more",
            "https://lab.example/",
        );
        assert_eq!(
            code,
            "<iframe src=\"https://lab.example/?panel=step&amp;embed=1\" title=\"Top-k &quot;3&quot; &lt;vs&gt; 5 &amp; more\" style=\"width:100%;height:600px;border:0\" loading=\"lazy\"></iframe>\n<script src=\"https://lab.example/embed.js\" async></script>"
        );
    }
}
