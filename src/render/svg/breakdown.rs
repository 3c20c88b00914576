//! The breakdown chart: one stacked bar per optimizer at the comparison's
//! last model, piece by piece, against the capacity line.

use super::axis::{Linear, linear_ticks, memory_grid};
use super::canvas::{Canvas, FONT_SIZE, Text, text_width};
use super::{INK, MUTED, model_label};
use crate::Memory;
use crate::estimate::Comparison;
use crate::units::{ByteUnit, Bytes, UnitSystem};

/// The colour of each piece, bottom of the stack first, in
/// [`Memory::pieces`] order.
const PIECE_COLORS: [&str; 5] = ["#4e79a7", "#76b7b2", "#f28e2b", "#e15759", "#59a14f"];

const WIDTH: f64 = 800.0;
const HEIGHT: f64 = 460.0;
const LEFT: f64 = 84.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 76.0;
const BOTTOM: f64 = 48.0;
/// The narrowest slot a bar gets (room for its total above it); past that
/// the chart grows wider.
const MIN_BAND: f64 = 68.0;
/// The share of its slot a bar fills.
const BAR_SHARE: f64 = 0.6;
/// Label rotation when names are wider than their slot.
const SLANT: i32 = -35;
/// Ticks on the memory axis, about.
const TICKS: usize = 5;
/// Headroom above the tallest bar or the capacity line, as a factor.
const HEADROOM: f64 = 1.08;

/// The comparison's last model as stacked bars, one per optimizer, in the
/// order of the rows (cheapest first), with each bar's total above it.
pub fn breakdown(comparison: &Comparison, units: UnitSystem) -> String {
    let bars: Vec<(&str, Memory)> = comparison
        .rows
        .iter()
        .filter_map(|row| {
            row.estimates
                .last()
                .map(|e| (row.optimizer.title, e.memory))
        })
        .collect();
    let capacity = comparison.capacity.as_ref();
    let largest = bars
        .iter()
        .map(|(_, m)| m.total)
        .chain(capacity.map(|c| c.bytes))
        .max()
        .unwrap_or(Bytes::ZERO);
    let unit = ByteUnit::for_size(largest, units);
    let in_unit = |b: Bytes| b.0 as f64 / unit.bytes as f64;

    let count = bars.len().max(1) as f64;
    let band = ((WIDTH - LEFT - RIGHT) / count).max(MIN_BAND);
    let plot_right = LEFT + band * count;
    let widest_name = bars
        .iter()
        .map(|(name, _)| text_width(name, FONT_SIZE))
        .fold(0.0, f64::max);
    let slanted = widest_name > band * 0.95;
    let extra = if slanted { widest_name * 0.6 } else { 0.0 };
    let (width, height) = (plot_right + RIGHT, HEIGHT + extra);
    let plot_bottom = HEIGHT - BOTTOM;
    let ticks = linear_ticks(in_unit(largest) * HEADROOM, TICKS);
    let y = Linear::new(0.0, ticks.last().copied().unwrap_or(1.0), plot_bottom, TOP);
    let center = |i: usize| LEFT + band * (i as f64 + 0.5);
    let top_of = |memory: &Memory| y.map(in_unit(memory.total));

    let model = comparison
        .sizes
        .last()
        .zip(comparison.labels.last())
        .map(|(size, label)| model_label(*size, label))
        .unwrap_or_default();
    let title = format!(
        "Training memory by optimizer: {model}, {}",
        comparison.precision.name
    );
    let shown: Vec<usize> = (0..PIECE_COLORS.len())
        .filter(|i| bars.iter().any(|(_, m)| m.pieces()[*i].1 > Bytes::ZERO))
        .collect();
    let mut subtitle = format!(
        "per accelerator: {}",
        shown
            .iter()
            .map(|i| piece_name(*i))
            .collect::<Vec<_>>()
            .join(" + ")
    );
    if !bars.iter().any(|(_, m)| m.activations > Bytes::ZERO) {
        subtitle += "; activations not estimated";
    }

    let mut canvas = Canvas::new(width, height);
    canvas.text(LEFT, 30.0, &title, Text::default().size(16).bold());
    canvas.text(LEFT, 52.0, &subtitle, Text::default().color(MUTED));
    memory_grid(&mut canvas, &ticks, &y, (LEFT, plot_right), unit.symbol);
    canvas.line(
        (LEFT, plot_bottom),
        (plot_right, plot_bottom),
        INK,
        1.0,
        None,
    );
    let axis_title = format!("memory ({})", unit.symbol);
    let middle = (TOP + plot_bottom) / 2.0;
    canvas.text(
        20.0,
        middle,
        &axis_title,
        Text::default().middle().rotate(-90),
    );

    for (i, (name, memory)) in bars.iter().enumerate() {
        let bar_width = band * BAR_SHARE;
        let left = center(i) - bar_width / 2.0;
        let mut below = Bytes::ZERO;
        for (piece, (piece_name, bytes)) in memory.pieces().iter().enumerate() {
            if *bytes == Bytes::ZERO {
                continue;
            }
            let above = Bytes(below.0.saturating_add(bytes.0));
            let (top, bottom) = (y.map(in_unit(above)), y.map(in_unit(below)));
            let tip = format!("{name}: {piece_name} {}", bytes.display_in(unit));
            canvas.rect(
                left,
                top,
                bar_width,
                bottom - top,
                PIECE_COLORS[piece],
                Some(&tip),
            );
            below = above;
        }
        let total = memory.total.display_in(unit);
        canvas.text(
            center(i),
            top_of(memory) - 6.0,
            &total,
            Text::default().middle().bold(),
        );
        let style = if slanted {
            Text::default().end().rotate(SLANT)
        } else {
            Text::default().middle()
        };
        canvas.text(center(i), plot_bottom + 18.0, name, style);
    }

    let legend_x = plot_right + 24.0;
    let mut legend_y = TOP + 4.0;
    for piece in shown.iter().rev() {
        canvas.rect(legend_x, legend_y, 14.0, 14.0, PIECE_COLORS[*piece], None);
        canvas.text(
            legend_x + 22.0,
            legend_y + 12.0,
            piece_name(*piece),
            Text::default(),
        );
        legend_y += 24.0;
    }
    if let Some(capacity) = capacity {
        let cy = y.map(in_unit(capacity.bytes));
        canvas.line((LEFT, cy), (plot_right, cy), INK, 1.5, Some("6 4"));
        let label = format!("capacity {}", capacity.label);
        // On the line at the left, unless a bar's total sits there: the
        // legend names the line too.
        let label_end = LEFT + 6.0 + text_width(&label, FONT_SIZE);
        let crowded = bars.iter().enumerate().any(|(i, (_, memory))| {
            let half = text_width(&memory.total.display_in(unit), FONT_SIZE) / 2.0;
            center(i) - half < label_end && ((top_of(memory) - 6.0) - (cy - 6.0)).abs() < 16.0
        });
        if !crowded {
            canvas.text(LEFT + 6.0, cy - 6.0, &label, Text::default().halo());
        }
        canvas.line(
            (legend_x, legend_y + 7.0),
            (legend_x + 14.0, legend_y + 7.0),
            INK,
            1.5,
            Some("4 2"),
        );
        canvas.text(legend_x + 22.0, legend_y + 12.0, &label, Text::default());
    }

    let description = bars
        .iter()
        .map(|(name, memory)| format!("{name} {}", memory.total.display_in(unit)))
        .collect::<Vec<_>>()
        .join(", ");
    canvas.finish(
        &title,
        &format!("Total training memory per optimizer: {description}."),
    )
}

/// The name of the `index`-th piece: `weights`, `master weights`, ...
fn piece_name(index: usize) -> &'static str {
    Memory::default().pieces()[index].0
}
