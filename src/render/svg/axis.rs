//! Scales from data to pixels, and where their ticks go.

/// A linear map from `[low, high]` onto the pixels `[start, end]`.
#[derive(Debug, Clone, Copy)]
pub struct Linear {
    low: f64,
    high: f64,
    start: f64,
    end: f64,
}

impl Linear {
    /// `low` maps to `start`, `high` to `end` (`end < start` for a y axis).
    pub fn new(low: f64, high: f64, start: f64, end: f64) -> Linear {
        Linear {
            low,
            high,
            start,
            end,
        }
    }

    /// The pixel of `value`.
    pub fn map(&self, value: f64) -> f64 {
        if self.high == self.low {
            return self.start;
        }
        self.start + (value - self.low) / (self.high - self.low) * (self.end - self.start)
    }
}

/// A logarithmic map from `[low, high]` (both positive) onto `[start, end]`.
#[derive(Debug, Clone, Copy)]
pub struct Log {
    linear: Linear,
}

impl Log {
    /// `low` maps to `start`, `high` to `end`.
    pub fn new(low: f64, high: f64, start: f64, end: f64) -> Log {
        Log {
            linear: Linear::new(low.log10(), high.log10(), start, end),
        }
    }

    /// The pixel of `value` (positive).
    pub fn map(&self, value: f64) -> f64 {
        self.linear.map(value.max(f64::MIN_POSITIVE).log10())
    }
}

/// Ticks from 0 to at least `max` at a round step (1, 2 or 5 x 10^k), about
/// `target` of them; the last tick is the top of the axis.
pub fn linear_ticks(max: f64, target: usize) -> Vec<f64> {
    if !max.is_finite() || max <= 0.0 {
        return vec![0.0, 1.0];
    }
    let rough = max / target.max(1) as f64;
    let magnitude = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|step| *step >= rough)
        .unwrap_or(10.0 * magnitude);
    let count = (max / step).ceil() as usize;
    (0..=count).map(|i| i as f64 * step).collect()
}

/// Ticks at 1, 2 and 5 x 10^k between `low` and `high` (both positive).
pub fn log_ticks(low: f64, high: f64) -> Vec<f64> {
    let mut ticks = Vec::new();
    if !low.is_finite() || !high.is_finite() || low <= 0.0 || high < low {
        return ticks;
    }
    let mut decade = 10f64.powf(low.log10().floor());
    while decade <= high {
        for mantissa in [1.0, 2.0, 5.0] {
            let tick = mantissa * decade;
            // A relative tolerance, so 1e9 computed as 10^9 still counts.
            if tick >= low * (1.0 - 1e-9) && tick <= high * (1.0 + 1e-9) {
                ticks.push(tick);
            }
        }
        decade *= 10.0;
    }
    ticks
}

/// A tick value for a label: at most two decimals, trailing zeros dropped.
pub fn number(value: f64) -> String {
    let text = format!("{value:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".to_string()
    } else {
        text.to_string()
    }
}

/// A memory axis's horizontal grid lines from `left` to `right`, each
/// labelled `12 GB` at the left, for `ticks` in `symbol`s mapped by `y`.
pub fn memory_grid(
    canvas: &mut super::canvas::Canvas,
    ticks: &[f64],
    y: &Linear,
    (left, right): (f64, f64),
    symbol: &str,
) {
    use super::canvas::Text;
    for tick in ticks {
        let ty = y.map(*tick);
        canvas.line((left, ty), (right, ty), super::GRID, 1.0, None);
        let label = format!("{} {symbol}", number(*tick));
        canvas.text(left - 8.0, ty + 4.0, &label, Text::default().end());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_ticks_are_round() {
        assert_eq!(linear_ticks(123.2, 6), vec![0.0, 50.0, 100.0, 150.0]);
        assert_eq!(linear_ticks(80.0, 4), vec![0.0, 20.0, 40.0, 60.0, 80.0]);
        assert_eq!(linear_ticks(0.0, 4), vec![0.0, 1.0]);
    }

    #[test]
    fn log_ticks_follow_one_two_five() {
        assert_eq!(
            log_ticks(1e8, 2e10),
            vec![1e8, 2e8, 5e8, 1e9, 2e9, 5e9, 1e10, 2e10]
        );
        assert!(log_ticks(0.0, 1.0).is_empty());
    }

    #[test]
    fn scales_map_ends() {
        let y = Linear::new(0.0, 100.0, 400.0, 100.0);
        assert_eq!(y.map(0.0), 400.0);
        assert_eq!(y.map(50.0), 250.0);
        let x = Log::new(1e8, 1e10, 0.0, 200.0);
        assert!((x.map(1e9) - 100.0).abs() < 1e-9);
    }

    #[test]
    fn numbers_are_short() {
        assert_eq!(number(20.0), "20");
        assert_eq!(number(0.5), "0.5");
        assert_eq!(number(2.25), "2.25");
    }
}
