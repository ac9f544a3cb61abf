//! TEMPORARY stand-in for the helper's `render_set` (replaced at merge).
use std::path::{Path, PathBuf};

use super::{ExportOptions, Format};
use crate::model::Profile;

/// Renders the profiles of one session (stand-in: one file per event).
pub fn render_set(
    format: Format,
    profiles: &[Profile],
    options: &ExportOptions,
    path: Option<&Path>,
) -> Vec<(Option<PathBuf>, Vec<u8>)> {
    if profiles.len() <= 1 {
        let bytes = profiles
            .first()
            .map(|p| format.render(p, options))
            .unwrap_or_default();
        return vec![(path.map(Path::to_owned), bytes)];
    }
    profiles
        .iter()
        .map(|p| {
            let file = path.map(|path| {
                let name = path.file_name().unwrap_or_default().to_string_lossy();
                let (stem, ext) = name.split_once('.').unwrap_or((&name, ""));
                path.with_file_name(format!("{stem}.{}.{ext}", p.metadata.event))
            });
            (file, format.render(p, options))
        })
        .collect()
}
