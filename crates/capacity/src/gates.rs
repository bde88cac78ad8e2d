//! The gates a configuration of the sweep is held to (the p99 SLOs on all traffic and on
//! every slice, and each slice's quality floor on its weight path), their verdicts, and the
//! sentences the report, the decision's reason and the lab print for them.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::figures::{figure, pct};

/// What a gate holds a configuration to. Serialised by the names the report prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Gate {
    /// The p99 time to first token, against the SLO.
    #[serde(rename = "p99 TTFT")]
    TtftP99,
    /// The p99 time per output token, against the SLO.
    #[serde(rename = "p99 time per output token")]
    TpotP99,
    /// A slice's bits per byte on the configuration's weight path, against its floor.
    #[serde(rename = "quality")]
    Quality,
}

impl Gate {
    /// The unit of the measured value and the limit: "s" or "bits/byte".
    pub fn unit(self) -> &'static str {
        match self {
            Gate::TtftP99 | Gate::TpotP99 => "s",
            Gate::Quality => "bits/byte",
        }
    }
}

impl fmt::Display for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Gate::TtftP99 => "p99 TTFT",
            Gate::TpotP99 => "p99 time per output token",
            Gate::Quality => "quality",
        })
    }
}

/// One gate's verdict. Its `Display` is the sentence the report and the lab print:
/// "p99 TTFT (eu) 2.310 s: over 1.000 by 1.310 (+131.0 %)". In JSON the gate's unit is
/// written beside it, for readers of the file, and not read back (it is the gate's own).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct GateResult {
    pub gate: Gate,
    /// "all" or a slice code.
    pub slice: String,
    pub measured: f64,
    pub limit: f64,
    pub passed: bool,
    /// How far over the limit (0 when it passed).
    pub excess: f64,
}

impl Serialize for GateResult {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut out = serializer.serialize_struct("GateResult", 7)?;
        out.serialize_field("gate", &self.gate)?;
        out.serialize_field("slice", &self.slice)?;
        out.serialize_field("measured", &self.measured)?;
        out.serialize_field("limit", &self.limit)?;
        out.serialize_field("unit", self.gate.unit())?;
        out.serialize_field("passed", &self.passed)?;
        out.serialize_field("excess", &self.excess)?;
        out.end()
    }
}

impl GateResult {
    pub(crate) fn new(gate: Gate, slice: &str, measured: f64, limit: f64) -> GateResult {
        GateResult {
            gate,
            slice: slice.into(),
            measured,
            limit,
            passed: measured <= limit,
            excess: (measured - limit).max(0.0),
        }
    }
}

impl fmt::Display for GateResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Bits per byte differ in the fourth decimal between weight paths; show five.
        let number = |x: f64| {
            if self.gate == Gate::Quality {
                format!("{x:.5}")
            } else {
                figure(x)
            }
        };
        write!(
            f,
            "{} ({}) {} {}: ",
            self.gate,
            self.slice,
            number(self.measured),
            self.gate.unit()
        )?;
        if self.passed {
            write!(f, "within {}", number(self.limit))
        } else {
            write!(
                f,
                "over {} by {} ({})",
                number(self.limit),
                number(self.excess),
                pct(self.excess / self.limit)
            )
        }
    }
}

/// The gates a configuration failed. `Display` joins their sentences with "; ", as the
/// report, the decision's reason and the lab list them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FailedGates(pub Vec<GateResult>);

impl FailedGates {
    /// The gates of `gates` that did not pass, in order.
    pub fn of(gates: &[GateResult]) -> FailedGates {
        FailedGates(gates.iter().filter(|g| !g.passed).cloned().collect())
    }

    /// The first failed gate, and how many more: "p99 TTFT (all) …; and 5 more gates".
    pub fn in_brief(&self) -> String {
        match &self.0[..] {
            [] => "no gate".into(),
            [one] => one.to_string(),
            [first, rest @ ..] => format!(
                "{first}; and {} more gate{}",
                rest.len(),
                if rest.len() == 1 { "" } else { "s" }
            ),
        }
    }
}

impl std::ops::Deref for FailedGates {
    type Target = [GateResult];

    fn deref(&self) -> &[GateResult] {
        &self.0
    }
}

impl fmt::Display for FailedGates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, gate) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{gate}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn over(gate: Gate, slice: &str, measured: f64, limit: f64) -> GateResult {
        GateResult::new(gate, slice, measured, limit)
    }

    #[test]
    fn verdicts_read_as_sentences_and_failed_ones_join() {
        let ttft = over(Gate::TtftP99, "eu", 2.31, 1.0);
        assert_eq!(
            ttft.to_string(),
            "p99 TTFT (eu) 2.310 s: over 1.000 by 1.310 (+131.0 %)"
        );
        let quality = over(Gate::Quality, "en", 2.0, 2.1);
        assert!(quality.passed);
        assert_eq!(
            quality.to_string(),
            "quality (en) 2.00000 bits/byte: within 2.10000"
        );
        let tpot = over(Gate::TpotP99, "all", 0.002, 0.001);
        let failed = FailedGates::of(&[ttft.clone(), quality, tpot.clone()]);
        assert_eq!(failed.len(), 2);
        assert_eq!(failed.to_string(), format!("{ttft}; {tpot}"));
        assert_eq!(failed.in_brief(), format!("{ttft}; and 1 more gate"));
        assert_eq!(FailedGates::default().in_brief(), "no gate");
    }

    #[test]
    fn a_gate_is_written_with_its_unit_and_read_back() {
        let gate = over(Gate::TpotP99, "all", 0.002, 0.001);
        let json = serde_json::to_value(&gate).unwrap();
        assert_eq!(json["gate"], "p99 time per output token");
        assert_eq!(json["unit"], "s");
        assert_eq!(serde_json::from_value::<GateResult>(json).unwrap(), gate);
    }
}
