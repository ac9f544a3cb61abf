//! speedscope JSON (<https://www.speedscope.app/file-format-schema.json>): one "sampled"
//! profile per event, over shared frames.

use std::collections::HashMap;

use serde_json::json;

use super::ExportOptions;
use crate::model::{Counter, Profile};

/// Renders the profiles of a session (one per event) as one speedscope file.
pub fn render(profiles: &[&Profile], options: &ExportOptions) -> String {
    let mut frames = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut sampled = Vec::new();
    for profile in profiles {
        let m = &profile.metadata;
        let ids: Vec<usize> = profile
            .frames()
            .iter()
            .map(|f| {
                *index.entry(f.name.as_str()).or_insert_with(|| {
                    frames.push(json!({ "name": f.name }));
                    frames.len() - 1
                })
            })
            .collect();
        let mut samples = Vec::new();
        let mut weights = Vec::new();
        let counter = options.counter_for(profile);
        for (stack, counts) in profile.stacks() {
            samples.push(stack.iter().map(|&f| ids[f as usize]).collect::<Vec<_>>());
            weights.push(counts.get(counter));
        }
        let total: u64 = weights.iter().sum();
        let unit = match (counter, m.weight_unit.as_str()) {
            (Counter::Total, unit @ ("nanoseconds" | "bytes")) => unit,
            _ => "none",
        };
        sampled.push(json!({
            "type": "sampled",
            "name": format!("{} ({})", m.event, m.engine),
            "unit": unit,
            "startValue": 0,
            "endValue": total,
            "samples": samples,
            "weights": weights,
        }));
    }
    let events: Vec<&str> = profiles.iter().map(|p| p.metadata.event.as_str()).collect();
    json!({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "exporter": format!("jtap {}", env!("CARGO_PKG_VERSION")),
        "name": format!("jtap {} profile", events.join(", ")),
        "activeProfileIndex": 0,
        "shared": { "frames": frames },
        "profiles": sampled,
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
            serde_json::from_str(&render(&[&p], &ExportOptions::default())).unwrap();
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

    #[test]
    fn several_events_are_several_profiles_over_shared_frames() {
        let cpu = sample_profile();
        let mut wall = sample_profile();
        wall.metadata.event = "wall".into();
        let v: serde_json::Value =
            serde_json::from_str(&render(&[&cpu, &wall], &ExportOptions::default())).unwrap();
        assert_eq!(v["profiles"].as_array().unwrap().len(), 2);
        assert_eq!(
            v["shared"]["frames"].as_array().unwrap().len(),
            cpu.frames().len()
        );
        assert_eq!(v["profiles"][1]["name"], "wall (cpu)");
    }
}
