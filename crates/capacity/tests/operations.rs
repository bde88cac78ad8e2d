//! The failure playbook and the canary: a detector per gate with its owner, and a rollout
//! that completes on the traffic it was planned for and stops on burstier traffic, with
//! its incident counted per slice.

use capacity::{
    CapacityError, Gate, Owners, Plan, PlanInputs, RolloutInputs, TraceSource, TraceSpec,
};

fn inputs(rollout_preset: Option<&str>) -> PlanInputs {
    let mut inputs = PlanInputs::tiny_lab("poisson").unwrap();
    inputs.owners = Owners {
        latency: "inference SRE".into(),
        quality: "language quality lead".into(),
    };
    inputs.rollout = Some(RolloutInputs::canary(0.2));
    inputs.rollout_trace = rollout_preset.map(|p| TraceSource::Generated {
        spec: TraceSpec::preset(p).unwrap(),
    });
    inputs
}

#[test]
fn every_gate_of_what_ships_has_a_detector_an_owner_a_mitigation_and_a_stop() {
    let report = Plan::run(&inputs(None)).unwrap();
    assert_eq!(report.playbook.len(), report.chosen.gates.len());
    for (p, g) in report.playbook.iter().zip(&report.chosen.gates) {
        assert_eq!((p.gate, &p.slice, p.threshold), (g.gate, &g.slice, g.limit));
        let owner = if g.gate == Gate::Quality {
            "language quality lead"
        } else {
            "inference SRE"
        };
        assert_eq!(p.owner, owner);
        assert!(p.stop_condition.starts_with("the canary stops"));
    }
    // The rare slice (5 % of the traffic) gets a reserved replica; all traffic, shedding.
    let eu = report
        .playbook
        .iter()
        .find(|p| p.slice == "eu" && p.gate == Gate::TtftP99)
        .unwrap();
    assert!(eu
        .mitigation
        .starts_with("reserve a replica for the eu slice"));
    let all = report.playbook.iter().find(|p| p.slice == "all").unwrap();
    assert!(all.mitigation.starts_with("shed load at admission"));
    assert!(report
        .to_markdown()
        .contains("## 5. Failure playbook and rollout"));
}

/// Released on the Poisson trace it was planned on, the canary runs to the end; on bursty
/// traffic of the same mean rate (bursts of 8x), the detector fires after t0 and stops it,
/// and the incident is every canary request that missed the SLO before the stop.
#[test]
fn the_canary_completes_on_planned_traffic_and_stops_on_bursts() {
    let calm = Plan::run(&inputs(None)).unwrap();
    let r = calm.rollout.as_ref().unwrap();
    assert!(!r.stop_condition_fired && r.detected_at_s.is_none());
    assert_eq!(r.missed_slo, 0);
    let share = r.canary_requests as f64 / 5000.0;
    assert!(
        (0.15..0.2).contains(&share),
        "{share}: 20 % of the 90 % after t0"
    );

    let bursty = Plan::run(&inputs(Some("bursty"))).unwrap();
    let r = bursty.rollout.as_ref().unwrap();
    assert_eq!(r.candidate, bursty.decision.name);
    assert!(r.stop_condition_fired);
    let detected = r.detected_at_s.unwrap();
    assert!(detected > r.start_s);
    assert_eq!(r.stopped_at_s, Some(detected + r.window_s));
    assert!(r.detector.as_ref().unwrap().contains("p99"));
    let by_slice: u64 = r.missed_by_slice.iter().map(|(_, m, _)| m).sum();
    let of: u64 = r.missed_by_slice.iter().map(|(_, _, n)| n).sum();
    assert_eq!((by_slice, of), (r.missed_slo, r.canary_requests));
    assert!(r.missed_slo > 0);
    // The window that fired breached a gate; none before it did.
    let fired = r
        .timeline
        .iter()
        .position(|w| !w.breached.is_empty())
        .unwrap();
    assert_eq!(r.timeline[fired].end_s, detected);
}

#[test]
fn a_canary_share_outside_its_range_is_an_error() {
    for bad in [0.0, 1.5, f64::NAN] {
        let mut i = inputs(None);
        i.rollout = Some(RolloutInputs::canary(bad));
        let e = Plan::run(&i).unwrap_err();
        assert!(matches!(e, CapacityError::OutOfRange { .. }), "{e}");
        assert!(
            e.to_string().starts_with("canary fraction must lie in"),
            "{e}"
        );
    }
}
