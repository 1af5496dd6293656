//! A ready-made terminal progress bar for [`build_index`](crate::build_index).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::build::{IndexPhase, IndexProgress};

/// Draws build progress on stderr (bytes read, documents, passages); draws nothing when stderr is
/// not a terminal. Use as `build_index(.., &|p| bar.update(&p))`, then [`finish`](Self::finish).
pub struct IndexProgressBar {
    bar: ProgressBar,
}

impl IndexProgressBar {
    pub fn new() -> Self {
        Self::with_target(ProgressDrawTarget::stderr())
    }

    /// A bar that never draws (for `--quiet` or JSON output).
    pub fn hidden() -> Self {
        Self::with_target(ProgressDrawTarget::hidden())
    }

    fn with_target(target: ProgressDrawTarget) -> Self {
        let bar = ProgressBar::with_draw_target(Some(0), target);
        let style = ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({eta}) {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        Self { bar }
    }

    pub fn update(&self, progress: &IndexProgress) {
        self.bar.set_length(progress.bytes_total);
        self.bar.set_position(progress.bytes_read);
        let message = match progress.phase {
            IndexPhase::Reading => format!("{} documents, {} passages", progress.documents, progress.passages),
            IndexPhase::Committing => format!("{} passages, committing", progress.passages),
            IndexPhase::Done => format!("{} documents, {} passages, done", progress.documents, progress.passages),
        };
        self.bar.set_message(message);
    }

    /// Removes the bar from the terminal.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Default for IndexProgressBar {
    fn default() -> Self {
        Self::new()
    }
}
