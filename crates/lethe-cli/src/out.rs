//! Printing: tables for people, JSON for machines, progress on stderr.

use serde::Serialize;

/// Prints a value as pretty JSON on stdout.
pub fn json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Renders rows as an aligned text table.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
    }
    let line = |cells: Vec<String>| -> String {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let pad = widths[i].saturating_sub(c.chars().count());
                if i + 1 == cells.len() {
                    c.clone()
                } else {
                    format!("{c}{}", " ".repeat(pad))
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    let mut out = line(headers.iter().map(|h| h.to_string()).collect());
    out.push('\n');
    out.push_str(&line(widths.iter().map(|w| "-".repeat(*w)).collect()));
    out.push('\n');
    for r in rows {
        out.push_str(&line(r.clone()));
        out.push('\n');
    }
    out
}

/// A number with thousands separators.
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A progress line on stderr (when stderr is a terminal it overwrites itself).
pub fn progress(msg: &str) {
    use std::io::IsTerminal;
    // With -v the progress lines are log lines: timestamped, in order with the rest of the
    // log, so a command's phases can be timed.
    if tracing::enabled!(target: "lethe::progress", tracing::Level::INFO) {
        tracing::info!(target: "lethe::progress", "{msg}");
    } else if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K{msg}");
    } else {
        eprintln!("{msg}");
    }
}

/// A progress callback that prints [`progress`] lines, or nothing when `quiet` (under `--json`,
/// where standard output is for the machine and progress would only be noise).
pub fn progress_unless(quiet: bool) -> impl Fn(&str) + Send + Sync {
    move |m| {
        if !quiet {
            progress(m)
        }
    }
}

/// Ends a progress line.
pub fn progress_done() {
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        eprintln!();
    }
}

/// Progress of a long job: one bar per cleanup stage (`cleanup PHASE K/N TABLE` messages),
/// every other message as a [`progress`] line. Bars only draw on a terminal.
pub struct StageBars {
    multi: indicatif::MultiProgress,
    bars: std::sync::Mutex<Vec<(String, indicatif::ProgressBar)>>,
}

impl StageBars {
    /// No bars yet.
    pub fn new() -> StageBars {
        StageBars {
            multi: indicatif::MultiProgress::with_draw_target(
                indicatif::ProgressDrawTarget::stderr(),
            ),
            bars: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Shows one progress message.
    pub fn show(&self, msg: &str) {
        if tracing::enabled!(target: "lethe::progress", tracing::Level::INFO) {
            // -v: every message a timestamped log line, the cleanup's steps included.
            progress(msg);
            return;
        }
        let parsed = msg.strip_prefix("cleanup ").and_then(|rest| {
            let mut it = rest.splitn(3, ' ');
            let phase = it.next()?;
            let (k, n) = it.next()?.split_once('/')?;
            Some((
                phase.to_string(),
                k.parse::<u64>().ok()?,
                n.parse::<u64>().ok()?,
                it.next().unwrap_or("").to_string(),
            ))
        });
        let Some((phase, k, n, table)) = parsed else {
            if self.bars.lock().map(|b| b.is_empty()).unwrap_or(true) {
                progress(msg);
            } else {
                let _ = self.multi.println(msg);
            }
            return;
        };
        let mut bars = self.bars.lock().expect("progress bars");
        let bar = match bars.iter().find(|(p, _)| *p == phase) {
            Some((_, b)) => b.clone(),
            None => {
                let b = self.multi.add(indicatif::ProgressBar::new(n));
                b.set_style(
                    indicatif::ProgressStyle::with_template(
                        "cleanup {prefix:13} [{bar:30}] {pos}/{len} {msg}",
                    )
                    .expect("a valid template")
                    .progress_chars("=> "),
                );
                b.set_prefix(phase.clone());
                bars.push((phase.clone(), b.clone()));
                b
            }
        };
        bar.set_position(k);
        bar.set_message(table);
    }

    /// Finishes every bar.
    pub fn done(&self) {
        if let Ok(bars) = self.bars.lock() {
            for (_, b) in bars.iter() {
                b.finish();
            }
        }
        progress_done();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts() {
        assert_eq!(super::count(0), "0");
        assert_eq!(super::count(999), "999");
        assert_eq!(super::count(1000), "1,000");
        assert_eq!(super::count(17562), "17,562");
        assert_eq!(super::count(1234567), "1,234,567");
    }
}
