//! Where the draw landed: the final distribution laid along [0, 1) in ascending ids, as
//! `Generator.choice` reads it, with the uniform draw marked, drawn as a strip and listed
//! as a table (always in the DOM) for screen readers.

use leptos::prelude::*;

use crate::panels::step::view_model::StepView;
use crate::widgets::chart::{mirror_table, walk_notes};

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 36.0;

#[component]
pub fn DrawStrip(view: StepView) -> impl IntoView {
    let landed = view.landed().map(|s| s.id);
    let summary = match (view.draw, view.landed()) {
        // Short sentences, so that the takeaway reads at grade 9 or below.
        (Some(u), Some(s)) => format!(
            "The draw {u:.6} landed in token {}'s share, from {:.4} to {:.4}. Token {} has \
             probability {:.4}. The {} tokens line up from 0 to 1 in id order.",
            s.id,
            s.from,
            s.to,
            s.id,
            s.prob,
            view.strip.len()
        ),
        _ => "Greedy: there is no draw. The top token holds all of 0 to 1.".to_string(),
    };
    let segments = view
        .strip
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let class = if Some(s.id) == landed {
                "segment landed"
            } else {
                "segment"
            };
            view! {
                <rect class=class x=s.from * WIDTH y="4" width=(s.to - s.from) * WIDTH height=HEIGHT - 8.0 data-point=i data-sound=s.prob>
                    <title>{format!("token {}: {:.4} to {:.4}", s.id, s.from, s.to)}</title>
                </rect>
            }
        })
        .collect_view();
    let marker = view.draw.map(|u| {
        view! { <line class="draw-mark" x1=u * WIDTH x2=u * WIDTH y1="0" y2=HEIGHT/> }
    });
    let rows = view
        .strip
        .iter()
        .map(|s| {
            let here = Some(s.id) == landed;
            view! {
                <tr class=if here { "landed" } else { "" } data-token=s.id>
                    <th scope="row">{s.id.to_string()}</th>
                    <td data-value=s.prob.to_string()>{format!("{:.4}", s.prob)}</td>
                    <td data-value=s.from.to_string()>{format!("{:.4}", s.from)}</td>
                    <td data-value=s.to.to_string()>{format!("{:.4}", s.to)}</td>
                    <td>{if here { "the draw landed here" } else { "" }}</td>
                </tr>
            }
        })
        .collect_view();
    let effective = format!(
        "Entropy {:.3} nats: an effective vocabulary of e^H = {:.2} equally likely tokens.",
        view.entropy,
        view.effective_vocabulary()
    );
    view! {
        <figure class="draw-strip" data-testid="draw-strip" data-walk="">
            <figcaption>"Where the draw landed"</figcaption>
            <p class="effective-vocabulary" data-value=view.effective_vocabulary().to_string()>{effective}</p>
            <p class="takeaway chart-summary">{summary.clone()}</p>
            <svg class="chart" viewBox=format!("0 0 {WIDTH} {HEIGHT}") tabindex="0" role="application" aria-label=summary data-walk-chart="" preserveAspectRatio="none">
                {segments}
                {marker}
            </svg>
            {walk_notes()}
            {mirror_table("mirror", None, Some("draw-strip-table"), "Where each token sits from 0 to 1, in id order, and where the draw landed", &["Token", "Probability", "From", "To", "Draw"], rows)}
        </figure>
    }
}
