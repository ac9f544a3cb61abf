//! speedscope JSON (<https://www.speedscope.app/file-format-schema.json>): one "sampled"
//! profile with shared frames.

use serde_json::json;

use super::ExportOptions;
use crate::model::{Counter, Profile};

/// Renders the profile as a speedscope file.
pub fn render(profile: &Profile, options: &ExportOptions) -> String {
    let m = &profile.metadata;
    let frames: Vec<_> = profile
        .frames()
        .iter()
        .map(|f| json!({ "name": f.name }))
        .collect();
    let mut samples = Vec::new();
    let mut weights = Vec::new();
    let counter = options.counter_for(profile);
    for (stack, counts) in profile.stacks() {
        samples.push(stack.to_vec());
        weights.push(counts.get(counter));
    }
    let total: u64 = weights.iter().sum();
    let unit = match (counter, m.weight_unit.as_str()) {
        (Counter::Total, unit @ ("nanoseconds" | "bytes")) => unit,
        _ => "none",
    };
    json!({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "exporter": format!("jtap {}", env!("CARGO_PKG_VERSION")),
        "name": format!("jtap {} profile", m.event),
        "activeProfileIndex": 0,
        "shared": { "frames": frames },
        "profiles": [{
            "type": "sampled",
            "name": format!("{} ({})", m.event, m.engine),
            "unit": unit,
            "startValue": 0,
            "endValue": total,
            "samples": samples,
            "weights": weights,
        }],
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::tests::sample_profile;

    #[test]
    fn parses_back_with_totals() {
        let p = sample_profile();
        let v: serde_json::Value =
            serde_json::from_str(&render(&p, &ExportOptions::default())).unwrap();
        let weights: u64 = v["profiles"][0]["weights"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_u64().unwrap())
            .sum();
        assert_eq!(weights, p.total_samples());
        assert_eq!(
            v["shared"]["frames"].as_array().unwrap().len(),
            p.frames().len()
        );
    }
}
