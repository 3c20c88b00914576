//! The scaling chart: model-state memory against model size, one line per
//! optimizer, each crossing the capacity line at its threshold.

use std::collections::BTreeMap;

use super::axis::{Log, log_ticks};
use super::canvas::{Canvas, FONT_SIZE, Text, text_width};
use super::{GRID, INK, MUTED};
use crate::estimate::{Capacity, Comparison};
use crate::units::{ByteUnit, Bytes, Count, UnitSystem};

/// Line colours, one per optimizer (Tableau 10); past ten the lines dash.
const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];
/// The dash of a line that would otherwise look like another.
const DASH: &str = "7 5";

const WIDTH: f64 = 800.0;
const HEIGHT: f64 = 500.0;
const LEFT: f64 = 84.0;
const RIGHT: f64 = 200.0;
const TOP: f64 = 76.0;
const BOTTOM: f64 = 56.0;
/// Past this many ticks on the y axis, only powers of ten are labelled.
const MAX_TICKS: usize = 10;
/// Room between the data and the top and bottom of the y axis, as a factor.
const Y_PADDING: f64 = 1.4;
/// Rows of threshold labels above the capacity line; past them the legend
/// alone gives the threshold.
const LABEL_ROWS: usize = 3;
/// Where a legend entry's text starts, right of its line sample.
const LEGEND_TEXT: f64 = 28.0;
/// The height of a legend entry, and of its second line.
const LEGEND_ENTRY: f64 = 24.0;
const LEGEND_LINE: f64 = 16.0;

/// The plot area and its two log scales.
struct Plot {
    right: f64,
    bottom: f64,
    x: Log,
    y: Log,
}

/// Memory of model states against model size on log-log axes, where every
/// optimizer's memory (proportional to its parameter count) is a straight
/// line. `comparison` is priced over a grid of sizes (its columns; a row may
/// stop early where its bytes would overflow); `models` are the sizes asked
/// about, drawn as labelled guides.
pub fn scaling(comparison: &Comparison, models: &[(Count, String)], units: UnitSystem) -> String {
    let capacity = comparison.capacity.as_ref();
    let (Some(first), Some(last)) = (comparison.sizes.first(), comparison.sizes.last()) else {
        return Canvas::new(WIDTH, HEIGHT).finish("no sizes to draw", "");
    };
    let memory: Vec<f64> = comparison
        .rows
        .iter()
        .flat_map(|row| {
            row.estimates
                .iter()
                .map(|e| e.memory.model_states().0 as f64)
        })
        .chain(capacity.map(|c| c.bytes.0 as f64))
        .filter(|m| *m > 0.0)
        .collect();
    let low = memory.iter().copied().fold(f64::INFINITY, f64::min);
    let high = memory.iter().copied().fold(0.0, f64::max);
    let plot = Plot {
        right: WIDTH - RIGHT,
        bottom: HEIGHT - BOTTOM,
        x: Log::new(first.0 as f64, last.0 as f64, LEFT, WIDTH - RIGHT),
        y: Log::new(
            low.max(1.0) / Y_PADDING,
            high.max(1.0) * Y_PADDING,
            HEIGHT - BOTTOM,
            TOP,
        ),
    };
    // The legend, right of the plot, makes the chart wider or taller when it
    // needs the room.
    let widest = comparison
        .rows
        .iter()
        .map(|row| text_width(row.optimizer.title, FONT_SIZE))
        .fold(0.0, f64::max);
    let width = WIDTH.max(plot.right + 24.0 + LEGEND_TEXT + widest + 8.0);
    let entry = LEGEND_ENTRY + if capacity.is_some() { LEGEND_LINE } else { 0.0 };
    let height = HEIGHT.max(TOP + entry * (comparison.rows.len() + 1) as f64 + 8.0);

    let title = format!(
        "Model-state memory against model size, {}",
        comparison.precision.name
    );
    let subtitle = match capacity {
        Some(c) => format!(
            "weights, gradients and optimizer states, no activations; a dot marks the largest model that fits {}",
            c.label
        ),
        None => "weights, gradients and optimizer states, no activations".to_string(),
    };
    let mut canvas = Canvas::new(width, height);
    canvas.text(LEFT, 30.0, &title, Text::default().size(16).bold());
    canvas.text(LEFT, 52.0, &subtitle, Text::default().color(MUTED));
    axes(&mut canvas, &plot, (*first, *last), (low, high), units);
    for (size, label) in models {
        let tx = plot.x.map(size.0 as f64);
        if (LEFT..=plot.right).contains(&tx) {
            canvas.line((tx, TOP + 18.0), (tx, plot.bottom), MUTED, 1.0, Some("2 3"));
            let style = Text::default().middle().color(MUTED);
            canvas.text(tx, TOP + 12.0, label, style);
        }
    }

    let styles = line_styles(comparison);
    for (row, (color, dash)) in comparison.rows.iter().zip(&styles) {
        let points: Vec<(f64, f64)> = comparison
            .sizes
            .iter()
            .zip(&row.estimates)
            .map(|(size, e)| {
                (
                    plot.x.map(size.0 as f64),
                    plot.y.map(e.memory.model_states().0 as f64),
                )
            })
            .collect();
        canvas.polyline(&points, color, 2.5, *dash, Some(row.optimizer.title));
    }
    if let Some(capacity) = capacity {
        thresholds(&mut canvas, &plot, comparison, capacity, &styles);
    }

    let mut legend_y = TOP + 4.0;
    let legend_x = plot.right + 24.0;
    for (row, (color, dash)) in comparison.rows.iter().zip(&styles).rev() {
        let sample = [
            (legend_x, legend_y + 7.0),
            (legend_x + 20.0, legend_y + 7.0),
        ];
        canvas.polyline(&sample, color, 2.5, *dash, None);
        canvas.text(
            legend_x + LEGEND_TEXT,
            legend_y + 12.0,
            row.optimizer.title,
            Text::default(),
        );
        if let (Some(max), Some(_)) = (row.max_parameters, capacity) {
            let style = Text::default().color(MUTED);
            let text = format!("fits up to {}", max.short());
            canvas.text(
                legend_x + LEGEND_TEXT,
                legend_y + 12.0 + LEGEND_LINE,
                &text,
                style,
            );
        }
        legend_y += entry;
    }
    if let Some(capacity) = capacity {
        let sample = (
            (legend_x, legend_y + 7.0),
            (legend_x + 20.0, legend_y + 7.0),
        );
        canvas.line(sample.0, sample.1, INK, 1.5, Some("6 4"));
        let text = format!("capacity {}", capacity.label);
        canvas.text(
            legend_x + LEGEND_TEXT,
            legend_y + 12.0,
            &text,
            Text::default(),
        );
    }

    let description = comparison
        .rows
        .iter()
        .map(|row| match row.max_parameters {
            Some(max) => format!("{} fits up to {}", row.optimizer.title, max.short()),
            None => row.optimizer.title.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ");
    let description = format!(
        "Memory from {} to {} parameters: {description}.",
        first.short(),
        last.short()
    );
    canvas.finish(&title, &description)
}

/// Grid lines, ticks (each labelled in its own unit: `500 MB`, `1 GB`,
/// `1 TB`) and the axis titles.
fn axes(
    canvas: &mut Canvas,
    plot: &Plot,
    sizes: (Count, Count),
    memory: (f64, f64),
    units: UnitSystem,
) {
    let unit = ByteUnit::for_size(Bytes(memory.1 as u64), units).bytes as f64;
    let (low, high) = (memory.0.max(1.0) / Y_PADDING, memory.1.max(1.0) * Y_PADDING);
    let mut ticks = log_ticks(low / unit, high / unit);
    if ticks.len() > MAX_TICKS {
        ticks.retain(|t| (t.log10().round() - t.log10()).abs() < 1e-9);
    }
    for tick in ticks {
        let bytes = tick * unit;
        let ty = plot.y.map(bytes);
        canvas.line((LEFT, ty), (plot.right, ty), GRID, 1.0, None);
        let label = Bytes(bytes.round() as u64).display(units);
        canvas.text(LEFT - 8.0, ty + 4.0, &label, Text::default().end());
    }
    for tick in log_ticks(sizes.0.0 as f64, sizes.1.0 as f64) {
        let tx = plot.x.map(tick);
        canvas.line((tx, TOP), (tx, plot.bottom), GRID, 1.0, None);
        let label = Count(tick.round() as u64).short();
        let style = Text::default().middle();
        canvas.text(tx, plot.bottom + 18.0, &label, style);
    }
    canvas.line(
        (LEFT, plot.bottom),
        (plot.right, plot.bottom),
        INK,
        1.0,
        None,
    );
    canvas.line((LEFT, TOP), (LEFT, plot.bottom), INK, 1.0, None);
    let middle = (LEFT + plot.right) / 2.0;
    let style = Text::default().middle();
    canvas.text(
        middle,
        HEIGHT - 14.0,
        "model size (parameters, log scale)",
        style,
    );
    let style = Text::default().middle().rotate(-90);
    canvas.text(20.0, (TOP + plot.bottom) / 2.0, "memory (log scale)", style);
}

/// A colour and a dash per row. Rows with the same memory at every size
/// (SGD+momentum and RMSProp) would hide one another: the later is dashed.
fn line_styles(comparison: &Comparison) -> Vec<(&'static str, Option<&'static str>)> {
    let series: Vec<Vec<Bytes>> = comparison
        .rows
        .iter()
        .map(|row| {
            row.estimates
                .iter()
                .map(|e| e.memory.model_states())
                .collect()
        })
        .collect();
    (0..series.len())
        .map(|i| {
            let repeated = series[..i].contains(&series[i]);
            let dash = (repeated || i >= PALETTE.len()).then_some(DASH);
            (PALETTE[i % PALETTE.len()], dash)
        })
        .collect()
}

/// The capacity line, a dot where each line crosses it, and one label per
/// distinct threshold, raised a row when it would overlap the one before.
fn thresholds(
    canvas: &mut Canvas,
    plot: &Plot,
    comparison: &Comparison,
    capacity: &Capacity,
    styles: &[(&'static str, Option<&'static str>)],
) {
    let cy = plot.y.map(capacity.bytes.0 as f64);
    canvas.line((LEFT, cy), (plot.right, cy), INK, 1.5, Some("6 4"));
    let label = format!("capacity {}", capacity.label);
    canvas.text(LEFT + 6.0, cy + 18.0, &label, Text::default().halo());
    let mut crossings: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for (i, row) in comparison.rows.iter().enumerate() {
        if let Some(max) = row.max_parameters.filter(|m| m.0 > 0) {
            crossings.entry(max.0).or_default().push(i);
        }
    }
    let mut row_ends: Vec<f64> = Vec::new();
    for (max, optimizers) in &crossings {
        let tx = plot.x.map(*max as f64);
        if !(LEFT..=plot.right).contains(&tx) {
            continue;
        }
        for i in optimizers {
            canvas.circle((tx, cy), 5.5, styles[*i].0);
        }
        let label = Count(*max).short();
        let half = text_width(&label, FONT_SIZE) / 2.0;
        let row = row_ends
            .iter()
            .position(|end| *end + 4.0 < tx - half)
            .unwrap_or(row_ends.len());
        if row >= LABEL_ROWS {
            continue;
        }
        if row == row_ends.len() {
            row_ends.push(0.0);
        }
        row_ends[row] = tx + half;
        let style = Text::default().middle().bold().halo();
        canvas.text(tx, cy - 10.0 - 16.0 * row as f64, &label, style);
    }
}
