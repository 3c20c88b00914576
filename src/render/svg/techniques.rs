//! The "Making it fit" answers as a chart: one bar per row (the run as
//! given, then each answer alone), stacked by what is alive at its peak,
//! against the capacity line.

use super::axis::{Linear, linear_ticks, memory_grid};
use super::canvas::{Canvas, FONT_SIZE, Text, text_width};
use super::{ALERT, INK, KIND_COLORS, MUTED};
use crate::estimate::Ladder;
use crate::timeline::Kind;
use crate::units::{ByteUnit, Bytes, UnitSystem};

const LEFT: f64 = 84.0;
const RIGHT: f64 = 170.0;
/// From the plot's right edge to the legend's text.
const LEGEND_INSET: f64 = 46.0;
const TOP: f64 = 76.0;
const HEIGHT: f64 = 440.0;
const BOTTOM: f64 = 40.0;
/// The slot of one bar.
const BAND: f64 = 86.0;
/// The share of its slot a bar fills.
const BAR_SHARE: f64 = 0.6;
/// Step names are slanted under their bars.
const SLANT: i32 = -30;
const TICKS: usize = 5;
const HEADROOM: f64 = 1.08;

/// The ladder's steps as stacked bars of their peaks.
pub fn techniques(ladder: &Ladder, units: UnitSystem) -> String {
    let capacity = ladder.capacity.as_ref();
    let largest = ladder
        .rungs
        .iter()
        .map(|r| r.peak)
        .chain(capacity.map(|c| c.bytes))
        .max()
        .unwrap_or(Bytes::ZERO);
    let unit = ByteUnit::for_size(largest, units);
    let in_unit = |b: Bytes| b.0 as f64 / unit.bytes as f64;
    let count = ladder.rungs.len().max(1) as f64;
    let plot_right = LEFT + BAND * count;
    let widest = ladder
        .rungs
        .iter()
        .map(|r| text_width(&r.technique, FONT_SIZE))
        .fold(0.0, f64::max);
    let capacity_label = capacity.map(|c| format!("capacity {}", c.label));
    let legend = capacity_label
        .as_deref()
        .map_or(0.0, |l| text_width(l, FONT_SIZE))
        .max(RIGHT - LEGEND_INSET);
    let width = plot_right + LEGEND_INSET + legend + 12.0;
    let height = HEIGHT + widest * 0.55;
    let plot_bottom = HEIGHT - BOTTOM;
    let ticks = linear_ticks(in_unit(largest) * HEADROOM, TICKS);
    let y = Linear::new(0.0, ticks.last().copied().unwrap_or(1.0), plot_bottom, TOP);
    let center = |i: usize| LEFT + BAND * (i as f64 + 0.5);

    let title = format!("Making it fit: {}", ladder.model);
    let subtitle = "the step's peak as given, then with each smallest set of changes that fits (each alone), by what is alive at the peak";
    let mut canvas = Canvas::new(width, height);
    canvas.text(LEFT, 30.0, &title, Text::default().size(16).bold());
    canvas.text(LEFT, 52.0, subtitle, Text::default().color(MUTED));
    memory_grid(&mut canvas, &ticks, &y, (LEFT, plot_right), unit.symbol);
    canvas.line(
        (LEFT, plot_bottom),
        (plot_right, plot_bottom),
        INK,
        1.0,
        None,
    );
    let shown: Vec<usize> = (0..Kind::ALL.len())
        .filter(|i| {
            ladder
                .rungs
                .iter()
                .any(|r| r.peak_by_kind.0[*i] > Bytes::ZERO)
        })
        .collect();
    for (i, rung) in ladder.rungs.iter().enumerate() {
        let bar = BAND * BAR_SHARE;
        let left = center(i) - bar / 2.0;
        let mut below = Bytes::ZERO;
        for (k, kind) in Kind::ALL.iter().enumerate() {
            let bytes = rung.peak_by_kind.0[k];
            if bytes == Bytes::ZERO {
                continue;
            }
            let above = Bytes(below.0.saturating_add(bytes.0));
            let (top, bottom) = (y.map(in_unit(above)), y.map(in_unit(below)));
            let tip = format!(
                "{}: {} {}",
                rung.technique,
                kind.name(),
                bytes.display_in(unit)
            );
            canvas.rect(left, top, bar, bottom - top, KIND_COLORS[k], Some(&tip));
            below = above;
        }
        let fits = rung.fits.unwrap_or(true);
        let label = rung.peak.display_in(unit);
        let style = Text::default().middle().bold();
        canvas.text(
            center(i),
            y.map(in_unit(rung.peak)) - 6.0,
            &label,
            if fits { style } else { style.color(ALERT) },
        );
        canvas.text(
            center(i) + 6.0,
            plot_bottom + 16.0,
            &rung.technique,
            Text::default().end().rotate(SLANT),
        );
    }
    let legend_x = plot_right + 24.0;
    let mut legend_y = TOP + 4.0;
    for k in shown.iter().rev() {
        canvas.rect(legend_x, legend_y, 14.0, 14.0, KIND_COLORS[*k], None);
        canvas.text(
            legend_x + 22.0,
            legend_y + 12.0,
            Kind::ALL[*k].name(),
            Text::default(),
        );
        legend_y += 24.0;
    }
    if let Some(capacity) = capacity {
        let cy = y.map(in_unit(capacity.bytes));
        canvas.line((LEFT, cy), (plot_right, cy), ALERT, 1.5, Some("6 4"));
        canvas.line(
            (legend_x, legend_y + 7.0),
            (legend_x + 14.0, legend_y + 7.0),
            ALERT,
            1.5,
            Some("4 2"),
        );
        let label = capacity_label.unwrap_or_default();
        canvas.text(legend_x + 22.0, legend_y + 12.0, &label, Text::default());
    }
    let description = ladder
        .rungs
        .iter()
        .map(|r| format!("{} {}", r.technique, r.peak.display_in(unit)))
        .collect::<Vec<_>>()
        .join(", ");
    canvas.finish(&title, &format!("Peak memory per step: {description}."))
}
