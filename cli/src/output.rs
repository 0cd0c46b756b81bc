//! Terminal output: colours, tables, progress bars, JSON.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::error::{CliError, CliResult};

/// When to colour the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// On a terminal, unless `NO_COLOR` is set or `TERM=dumb`.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// A text style.
#[derive(Debug, Clone, Copy)]
pub enum Style {
    Bold,
    Dim,
    Green,
    Red,
    Yellow,
    Cyan,
}

impl Style {
    fn code(self) -> &'static str {
        match self {
            Style::Bold => "1",
            Style::Dim => "2",
            Style::Green => "32",
            Style::Red => "31",
            Style::Yellow => "33",
            Style::Cyan => "36",
        }
    }
}

/// How to talk to the user.
#[derive(Debug, Clone, Copy)]
pub struct Ui {
    /// Machine-readable output.
    pub json: bool,
    /// Colours on stdout.
    pub color: bool,
    /// Colours on stderr.
    pub color_err: bool,
    /// Progress bars on stderr.
    pub progress: bool,
}

fn no_color_env() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) || std::env::var_os("TERM").is_some_and(|t| t == "dumb")
}

impl Ui {
    /// Decides colours and progress bars from the terminal and the environment.
    pub fn new(json: bool, color: ColorChoice, no_progress: bool) -> Ui {
        let decide = |is_term: bool| match color {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => is_term && !no_color_env(),
        };
        let stderr_term = std::io::stderr().is_terminal();
        Ui {
            json,
            color: decide(std::io::stdout().is_terminal()),
            color_err: decide(stderr_term),
            progress: stderr_term && !no_progress,
        }
    }

    /// `text` in `style` on stdout.
    pub fn paint(&self, style: Style, text: &str) -> String {
        paint(self.color, style, text)
    }

    /// `text` in `style` on stderr.
    pub fn paint_err(&self, style: Style, text: &str) -> String {
        paint(self.color_err, style, text)
    }

    /// A progress bar of `len` steps named `message`, or a spinner without
    /// `len`; hidden unless stderr is a terminal. Its message is the item at
    /// hand.
    pub fn progress(&self, len: Option<u64>, message: &str) -> ProgressBar {
        if !self.progress {
            return ProgressBar::hidden();
        }
        let bar = match len {
            Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr()).with_style(
                ProgressStyle::with_template("{prefix:>10} [{bar:30}] {pos}/{len} {wide_msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            ),
            None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()).with_style(
                ProgressStyle::with_template("{spinner} {prefix} {pos} {wide_msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            ),
        };
        bar.set_prefix(message.to_owned());
        bar.enable_steady_tick(Duration::from_millis(120));
        bar
    }

    /// A note on stderr (not in `--json` mode's stdout).
    pub fn note(&self, text: &str) {
        eprintln!("{text}");
    }
}

fn paint(on: bool, style: Style, text: &str) -> String {
    if on && !text.is_empty() {
        format!("\x1b[{}m{text}\x1b[0m", style.code())
    } else {
        text.to_owned()
    }
}

/// Writes `text` to stdout; a closed pipe (`| head`) ends quietly.
///
/// # Errors
/// Exit 1 when stdout fails otherwise.
pub fn emit(text: &str) -> CliResult<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError::failure(format!("cannot write the output: {e}"))),
    }
}

/// Prints a JSON value, pretty, with a final newline.
///
/// # Errors
/// As [`emit`].
pub fn emit_json(v: &serde_json::Value) -> CliResult<()> {
    let text = serde_json::to_string_pretty(v).map_err(|e| CliError::failure(e.to_string()))?;
    emit(&(text + "\n"))
}

/// A table with aligned columns; cells may be styled.
pub struct Table {
    headers: Vec<String>,
    right: Vec<bool>,
    rows: Vec<Vec<(String, Option<Style>)>>,
}

impl Table {
    /// A table with these headers; a header starting with `>` is right-aligned.
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.trim_start_matches('>').to_owned()).collect(),
            right: headers.iter().map(|h| h.starts_with('>')).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row.
    pub fn row(&mut self, cells: Vec<(String, Option<Style>)>) {
        self.rows.push(cells);
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as text.
    pub fn render(&self, ui: &Ui) -> String {
        let n = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, (cell, _)) in row.iter().enumerate().take(n) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let line = |cells: Vec<(String, Option<Style>)>, out: &mut String| {
            let mut parts = Vec::new();
            for (i, (cell, style)) in cells.into_iter().enumerate().take(n) {
                let pad = widths[i].saturating_sub(cell.chars().count());
                let last = i + 1 == n;
                let painted = match style {
                    Some(s) => ui.paint(s, &cell),
                    None => cell,
                };
                let text = if self.right[i] {
                    format!("{}{painted}", " ".repeat(pad))
                } else if last {
                    painted
                } else {
                    format!("{painted}{}", " ".repeat(pad))
                };
                parts.push(text);
            }
            out.push_str(parts.join("  ").trim_end());
            out.push('\n');
        };
        line(
            self.headers.iter().map(|h| (h.clone(), Some(Style::Bold))).collect(),
            &mut out,
        );
        for row in &self.rows {
            line(row.clone(), &mut out);
        }
        out
    }
}

/// `1234567` → `1.2 MiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// A JSON value on one line (`, ` and `: ` as separators), shortened to
/// `max` characters.
pub fn short_json(v: &serde_json::Value, max: usize) -> String {
    let text = flat_spaced(v, 0);
    if text.chars().count() <= max {
        text
    } else {
        let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

/// The number of characters a terminal shows for `s` (colour codes skipped).
pub fn visible_len(s: &str) -> usize {
    let mut n = 0;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            n += 1;
        }
    }
    n
}

/// A JSON value pretty-printed for reading: an array or object that fits on
/// the rest of the line (within `width` columns) stays on one line, others
/// open one line per item. Every line is indented by `indent` spaces.
pub fn readable_json(v: &serde_json::Value, indent: usize, width: usize) -> String {
    let mut out = String::new();
    out.push_str(&" ".repeat(indent));
    write_readable(v, indent, width, &mut out, 0);
    out.push('\n');
    out
}

/// How deep [`readable_json`] and [`short_json`] show a value; deeper lists
/// and maps are shown as `…` (stored values nest at most 128 levels, and
/// their rendering adds a few).
pub const MAX_SHOWN_DEPTH: usize = 512;

fn write_readable(v: &serde_json::Value, indent: usize, width: usize, out: &mut String, depth: usize) {
    if depth >= MAX_SHOWN_DEPTH {
        out.push('…');
        return;
    }
    let line_start = out.rfind('\n').map_or(0, |i| i + 1);
    let used = out[line_start..].chars().count();
    let flat = flat_spaced(v, depth);
    if used + flat.chars().count() <= width || !matches!(v, serde_json::Value::Array(_) | serde_json::Value::Object(_))
    {
        out.push_str(&flat);
        return;
    }
    let pad = " ".repeat(indent + 2);
    match v {
        serde_json::Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                out.push('\n');
                out.push_str(&pad);
                write_readable(item, indent + 2, width, out, depth + 1);
                if i + 1 < items.len() {
                    out.push(',');
                }
            }
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            out.push(']');
        }
        serde_json::Value::Object(m) => {
            out.push('{');
            let n = m.len();
            for (i, (k, item)) in m.iter().enumerate() {
                out.push('\n');
                out.push_str(&pad);
                out.push_str(&serde_json::Value::String(k.clone()).to_string());
                out.push_str(": ");
                write_readable(item, indent + 2, width, out, depth + 1);
                if i + 1 < n {
                    out.push(',');
                }
            }
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            out.push('}');
        }
        _ => {}
    }
}

/// One-line JSON with a space after `,` and `:`, `…` below
/// [`MAX_SHOWN_DEPTH`] (`depth`: how deep `v` is).
fn flat_spaced(v: &serde_json::Value, depth: usize) -> String {
    if depth >= MAX_SHOWN_DEPTH && matches!(v, serde_json::Value::Array(_) | serde_json::Value::Object(_)) {
        return "…".to_owned();
    }
    match v {
        serde_json::Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(|x| flat_spaced(x, depth + 1)).collect();
            format!("[{}]", parts.join(", "))
        }
        serde_json::Value::Object(m) => {
            let parts: Vec<String> = m
                .iter()
                .map(|(k, x)| {
                    format!(
                        "{}: {}",
                        serde_json::Value::String(k.clone()),
                        flat_spaced(x, depth + 1)
                    )
                })
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
        other => other.to_string(),
    }
}

/// `v5` for a LangGraph version string (`0…05.0.2292…`), the text otherwise.
pub fn short_version(v: &impl std::fmt::Display) -> String {
    let text = v.to_string();
    match text.split_once('.') {
        Some((int, _)) if !int.is_empty() && int.bytes().all(|b| b.is_ascii_digit()) => {
            let trimmed = int.trim_start_matches('0');
            format!("v{}", if trimmed.is_empty() { "0" } else { trimmed })
        }
        _ => format!("v{text}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn versions_shorten_to_their_counter() {
        assert_eq!(short_version(&"00000000000000000000000000000005.0.2292"), "v5");
        assert_eq!(short_version(&"00000000000000000000000000000000.0.1"), "v0");
        assert_eq!(short_version(&3), "v3");
        assert_eq!(short_version(&"abc"), "vabc");
    }

    #[test]
    fn readable_json_folds_what_fits() {
        let v = json!({"a": [1, 2], "b": {"c": "x".repeat(30)}});
        assert_eq!(
            readable_json(&v, 0, 80),
            format!("{{\"a\": [1, 2], \"b\": {{\"c\": \"{}\"}}}}\n", "x".repeat(30))
        );
        assert_eq!(
            readable_json(&v, 2, 30),
            format!(
                "  {{\n    \"a\": [1, 2],\n    \"b\": {{\n      \"c\": \"{}\"\n    }}\n  }}\n",
                "x".repeat(30)
            )
        );
    }

    #[test]
    fn tables_align_and_colour_codes_take_no_room() {
        let ui = Ui {
            json: false,
            color: true,
            color_err: false,
            progress: false,
        };
        let mut t = Table::new(&["NAME", ">N"]);
        t.row(vec![("a".into(), Some(Style::Cyan)), ("10".into(), None)]);
        t.row(vec![("long".into(), None), ("2".into(), None)]);
        let text = t.render(&ui);
        let plain: Vec<String> = text
            .lines()
            .map(|l| {
                let mut s = String::new();
                let mut chars = l.chars();
                while let Some(c) = chars.next() {
                    if c == '\x1b' {
                        chars.by_ref().find(|&c| c == 'm');
                    } else {
                        s.push(c);
                    }
                }
                s
            })
            .collect();
        assert_eq!(plain, ["NAME   N", "a     10", "long   2"]);
        assert_eq!(visible_len(&ui.paint(Style::Red, "abc")), 3);
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
    }

    /// A value nested far deeper than any store holds is shown to
    /// MAX_SHOWN_DEPTH levels, without exhausting the stack.
    #[test]
    fn deep_values_are_cut() {
        let mut v = json!(1);
        for _ in 0..100_000 {
            v = serde_json::Value::Array(vec![v]);
        }
        let text = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let out = (short_json(&v, 10_000), readable_json(&v, 0, 20));
                // serde_json's own drop recurses: leak the test value
                std::mem::forget(v);
                out
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(
            text.0.contains('…') && text.0.matches('[').count() == MAX_SHOWN_DEPTH,
            "{}",
            text.0
        );
        assert!(text.1.contains('…'));
        assert!(text.1.matches('[').count() <= MAX_SHOWN_DEPTH);
    }
}
