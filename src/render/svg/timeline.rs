//! The step timeline as a chart: memory over the step, stacked by kind,
//! with the phases, the capacity line and the peak marked, like PyTorch's
//! memory snapshot viewer, but before the run.

use super::axis::{Linear, linear_ticks, memory_grid};
use super::canvas::{Canvas, FONT_SIZE, Text, text_width};
use super::{ALERT, INK, KIND_COLORS, MUTED};
use crate::estimate::Estimate;
use crate::render::peak_moment;
use crate::timeline::{Kind, Timeline};
use crate::units::{ByteUnit, Bytes, UnitSystem};

const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 480.0;
const LEFT: f64 = 84.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 96.0;
const BOTTOM: f64 = 40.0;
const TICKS: usize = 5;
const HEADROOM: f64 = 1.1;

/// The timeline of `e`'s most loaded rank as an SVG document.
pub fn timeline(e: &Estimate, timeline: &Timeline, units: UnitSystem) -> String {
    let events = &timeline.events;
    let count = events.len().max(1) as f64;
    // What each kind holds after each event.
    let mut live = [0u64; 7];
    let mut stacks: Vec<[u64; 7]> = Vec::with_capacity(events.len());
    for event in events {
        let index = Kind::ALL.iter().position(|k| *k == event.kind).unwrap_or(0);
        live[index] = if event.bytes >= 0 {
            live[index].saturating_add(event.bytes.unsigned_abs())
        } else {
            live[index].saturating_sub(event.bytes.unsigned_abs())
        };
        stacks.push(live);
    }
    let capacity = e.capacity.as_ref();
    let largest = timeline
        .peak
        .bytes
        .max(capacity.map_or(Bytes::ZERO, |c| c.bytes));
    let unit = ByteUnit::for_size(largest, units);
    let in_unit = |b: u64| b as f64 / unit.bytes as f64;
    let ticks = linear_ticks(in_unit(largest.0) * HEADROOM, TICKS);
    let plot_bottom = HEIGHT - BOTTOM;
    let plot_right = WIDTH - RIGHT;
    let y = Linear::new(0.0, ticks.last().copied().unwrap_or(1.0), plot_bottom, TOP);
    let x = Linear::new(0.0, count, LEFT, plot_right);

    let mut canvas = Canvas::new(WIDTH, HEIGHT);
    let title = format!(
        "One training step: {}, {}, {}",
        e.model.name, e.optimizer, e.precision.name
    );
    canvas.text(LEFT, 30.0, &title, Text::default().size(16).bold());
    let subtitle = format!(
        "memory of the most loaded accelerator over the step, by kind; peak {} in {}",
        timeline.peak.bytes.display_in(unit),
        peak_moment(&timeline.peak)
    );
    canvas.text(LEFT, 52.0, &subtitle, Text::default().color(MUTED));
    memory_grid(&mut canvas, &ticks, &y, (LEFT, plot_right), unit.symbol);
    let axis_title = format!("memory ({})", unit.symbol);
    canvas.text(
        20.0,
        (TOP + plot_bottom) / 2.0,
        &axis_title,
        Text::default().middle().rotate(-90),
    );

    // The stacked areas, one polygon per kind, as steps between events.
    for (k, kind) in Kind::ALL.iter().enumerate() {
        if stacks.iter().all(|s| s[k] == 0) {
            continue;
        }
        let below = |s: &[u64; 7]| s[..k].iter().sum::<u64>();
        let mut top = Vec::with_capacity(stacks.len() * 2);
        let mut bottom = Vec::with_capacity(stacks.len() * 2);
        for (i, s) in stacks.iter().enumerate() {
            let (x0, x1) = (x.map(i as f64), x.map(i as f64 + 1.0));
            let base = below(s);
            let (y_top, y_bottom) = (y.map(in_unit(base + s[k])), y.map(in_unit(base)));
            top.push((x0, y_top));
            top.push((x1, y_top));
            bottom.push((x0, y_bottom));
            bottom.push((x1, y_bottom));
        }
        bottom.reverse();
        top.extend(bottom);
        let most = stacks.iter().map(|s| s[k]).max().unwrap_or(0);
        let tip = format!("{}: up to {}", kind.name(), Bytes(most).display_in(unit));
        canvas.polygon(&top, KIND_COLORS[k], Some(&tip));
    }

    // Phase boundaries; a label that would run into the previous one goes a row up.
    let mut previous = None;
    let mut last_label: Option<(f64, usize)> = None;
    for (i, event) in events.iter().enumerate() {
        if previous != Some(event.phase) {
            let px = x.map(i as f64);
            let name = event.phase.name();
            let row = match last_label {
                Some((end, row)) if px + 3.0 < end + 6.0 => 1 - row,
                _ => 0,
            };
            let label_y = TOP - 8.0 - 14.0 * row as f64;
            canvas.line(
                (px, label_y + 4.0),
                (px, plot_bottom),
                INK,
                0.8,
                Some("3 3"),
            );
            canvas.text(px + 3.0, label_y, name, Text::default().color(MUTED));
            last_label = Some((px + 3.0 + text_width(name, FONT_SIZE), row));
            previous = Some(event.phase);
        }
    }
    canvas.line(
        (LEFT, plot_bottom),
        (plot_right, plot_bottom),
        INK,
        1.0,
        None,
    );

    if let Some(capacity) = capacity {
        let cy = y.map(in_unit(capacity.bytes.0));
        canvas.line((LEFT, cy), (plot_right, cy), ALERT, 1.5, Some("6 4"));
        canvas.text(
            plot_right - 4.0,
            cy - 6.0,
            &capacity.label,
            Text::default().end().color(ALERT).halo(),
        );
    }

    // The peak.
    if let Some(index) = events
        .iter()
        .position(|event| event.total == timeline.peak.bytes && event.bytes > 0)
    {
        let point = (
            x.map(index as f64 + 0.5),
            y.map(in_unit(timeline.peak.bytes.0)),
        );
        canvas.circle(point, 5.0, ALERT);
        let label = format!(
            "peak {} ({})",
            timeline.peak.bytes.display_in(unit),
            peak_moment(&timeline.peak)
        );
        let anchor_right = point.0 > (LEFT + plot_right) / 2.0;
        let style = Text::default().bold().color(ALERT).halo();
        let style = if anchor_right { style.end() } else { style };
        let dx = if anchor_right { -8.0 } else { 8.0 };
        canvas.text(point.0 + dx, point.1 - 8.0, &label, style);
    }

    // The legend, top of the stack first.
    let mut ly = TOP + 8.0;
    for (k, kind) in Kind::ALL.iter().enumerate().rev() {
        let most = timeline.peak.by_kind.get(*kind);
        if stacks.iter().all(|s| s[k] == 0) {
            continue;
        }
        canvas.rect(
            plot_right + 16.0,
            ly - 10.0,
            12.0,
            12.0,
            KIND_COLORS[k],
            None,
        );
        canvas.text(plot_right + 34.0, ly, kind.name(), Text::default());
        canvas.text(
            plot_right + 34.0,
            ly + 14.0,
            &format!("{} at the peak", most.display_in(unit)),
            Text::default().color(MUTED),
        );
        ly += 34.0;
    }

    let description = format!(
        "{} events over load, forward, loss, backward and the optimizer step; the peak, {}, is in {}",
        events.len(),
        timeline.peak.bytes.display_in(unit),
        peak_moment(&timeline.peak)
    );
    canvas.finish(&title, &description)
}
