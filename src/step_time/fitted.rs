//! The step-time model's fitted constants and its published validation
//! error. Written by `tools/fit_step_time.py` from
//! `tests/fixtures/published/step_times.json` (do not edit by hand: run
//! the tool, which fits on the `fit` cases and reports the `held-out` ones
//! it never saw).

/// The achievable share of the dense peak a large matmul reaches on
/// Ampere (A100), fitted on the `fit` cases run on A100s.
pub const AMPERE_MATMUL: f64 = 0.67;
/// The same on Hopper (H100, H200), fitted on the `fit` cases run on H100s.
pub const HOPPER_MATMUL: f64 = 0.485;
/// Published cases the fit read.
pub const FIT_CASES: u32 = 32;
/// Their mean |error| at the fitted constants.
pub const FIT_MEAN_ABS_ERROR: f64 = 0.093;
/// Published cases held out of the fit.
pub const HELD_OUT_CASES: u32 = 30;
/// Their mean |error| (predicted - measured) / measured.
pub const HELD_OUT_MEAN_ABS_ERROR: f64 = 0.099;
/// The share of them within 15% of the measurement.
pub const HELD_OUT_WITHIN_15_PERCENT: f64 = 0.833;
