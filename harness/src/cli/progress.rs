//! A one-line progress bar on stderr, for runs longer than a moment, and
//! only when stderr is a terminal (never in CI logs or captured output).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Runs shorter than this show no bar at all.
const QUIET_FOR: Duration = Duration::from_millis(700);
/// Redraw at most this often.
const REDRAW: Duration = Duration::from_millis(100);

pub struct Progress {
    total: usize,
    done: usize,
    failed: usize,
    start: Instant,
    last: Option<Instant>,
    shown: bool,
    enabled: bool,
}

impl Progress {
    pub fn new(total: usize) -> Progress {
        Progress {
            total,
            done: 0,
            failed: 0,
            start: Instant::now(),
            last: None,
            shown: false,
            enabled: std::io::stderr().is_terminal() && std::env::var_os("CI").is_none(),
        }
    }

    /// One case finished.
    pub fn tick(&mut self, failed: bool) {
        self.done += 1;
        self.failed += failed as usize;
        if !self.enabled || self.start.elapsed() < QUIET_FOR {
            return;
        }
        if self.last.is_some_and(|t| t.elapsed() < REDRAW) && self.done < self.total {
            return;
        }
        self.last = Some(Instant::now());
        self.shown = true;
        let _ = write!(std::io::stderr(), "\r{}\x1b[K", self.line());
    }

    /// The bar's text: `[=====>    ] 523/1160 cases, 2 not passed, 1.2s`.
    pub fn line(&self) -> String {
        const WIDTH: usize = 30;
        let filled = (self.done * WIDTH).checked_div(self.total).unwrap_or(WIDTH);
        let bar: String = (0..WIDTH)
            .map(|i| match i.cmp(&filled) {
                std::cmp::Ordering::Less => '=',
                std::cmp::Ordering::Equal => '>',
                std::cmp::Ordering::Greater => ' ',
            })
            .collect();
        format!(
            "[{bar}] {}/{} cases, {} not passed, {:.1}s",
            self.done,
            self.total,
            self.failed,
            self.start.elapsed().as_secs_f64()
        )
    }

    /// Erases the bar (before other output, and at the end).
    pub fn clear(&mut self) {
        if self.shown {
            let _ = write!(std::io::stderr(), "\r\x1b[K");
            self.shown = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_fills_with_cases() {
        let mut p = Progress::new(4);
        p.enabled = false;
        assert!(p.line().starts_with("[>"), "{}", p.line());
        p.tick(false);
        p.tick(true);
        let l = p.line();
        assert!(l.contains("2/4 cases, 1 not passed"), "{l}");
        assert!(l.starts_with(&format!("[{}>", "=".repeat(15))), "{l}");
    }
}
