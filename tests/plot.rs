//! `trainmem plot`: well-formed SVG with the figures of the comparison,
//! written atomically, and one-line errors.

use std::path::Path;

use assert_cmd::Command;

fn run(args: &[&str]) -> (i32, String, String) {
    let output = Command::cargo_bin("trainmem")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

/// Draws `args` into a fresh folder and returns the SVG and the printed line.
fn plot(args: &[&str]) -> (String, String) {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("chart.svg");
    let mut all = vec!["plot", "--output", path.to_str().unwrap()];
    all.extend_from_slice(args);
    let (code, stdout, stderr) = run(&all);
    assert_eq!(code, 0, "{args:?}: {stderr}");
    assert!(stderr.is_empty(), "{args:?} wrote to stderr: {stderr}");
    let files: Vec<_> = std::fs::read_dir(folder.path()).unwrap().collect();
    assert_eq!(files.len(), 1, "only the chart is left in the folder");
    (std::fs::read_to_string(&path).unwrap(), stdout)
}

/// Every text of a well-formed SVG document: `<text>` and `<title>` content.
fn texts(svg: &str) -> Vec<String> {
    let document = roxmltree::Document::parse(svg).expect("the chart is well-formed XML");
    let root = document.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    let width: f64 = root.attribute("width").unwrap().parse().unwrap();
    assert!((780.0..=3000.0).contains(&width), "width {width}");
    for node in root.descendants().filter(|n| n.has_tag_name("text")) {
        let size: f64 = node
            .attribute("font-size")
            .or(root.attribute("font-size"))
            .unwrap()
            .parse()
            .unwrap();
        assert!(size >= 12.0, "legible text: font-size {size}");
    }
    assert!(
        root.attribute("font-family")
            .unwrap()
            .contains("sans-serif")
    );
    root.descendants()
        .filter(|n| n.has_tag_name("text") || n.has_tag_name("title"))
        .filter_map(|n| n.text().map(str::to_string))
        .collect()
}

fn assert_has(texts: &[String], wanted: &[&str]) {
    for want in wanted {
        assert!(
            texts.iter().any(|t| t == want),
            "no text `{want}` in {texts:?}"
        );
    }
}

#[test]
fn textbook_breakdown_is_the_default() {
    let (svg, line) = plot(&[]);
    assert!(
        line.starts_with("wrote ") && line.ends_with(": memory breakdown of 4 optimizers at 7B\n")
    );
    let texts = texts(&svg);
    assert_has(
        &texts,
        &[
            "SGD",
            "SGD+momentum",
            "RMSProp",
            "Adam",
            "56 GB",
            "84 GB",
            "112 GB",
            "capacity 80 GB",
            "memory (GB)",
            "weights",
            "gradients",
            "optimizer states",
            "Training memory by optimizer: 7B parameters, fp32",
        ],
    );
    assert!(
        !texts.iter().any(|t| t == "activations"),
        "no legend entry for activations at 0"
    );
    assert!(
        !texts.iter().any(|t| t == "master weights"),
        "no master weights in fp32"
    );
    insta::assert_snapshot!("plot_textbook_breakdown", svg);
}

#[test]
fn textbook_scaling_marks_the_thresholds() {
    let (svg, line) = plot(&["--kind", "scaling"]);
    assert!(line.ends_with(": memory of 4 optimizers from 100M to 20B parameters\n"));
    let texts = texts(&svg);
    assert_has(
        &texts,
        &[
            "SGD",
            "SGD+momentum",
            "RMSProp",
            "Adam",
            "5B",
            "6.67B",
            "10B",
            "fits up to 5B",
            "fits up to 6.67B",
            "fits up to 10B",
            "capacity 80 GB",
            "100M",
            "20B",
            "7B",
        ],
    );
    let markers = roxmltree::Document::parse(&svg)
        .unwrap()
        .descendants()
        .filter(|n| n.has_tag_name("circle"))
        .count();
    assert_eq!(markers, 4, "one threshold marker per optimizer");
    insta::assert_snapshot!("plot_textbook_scaling", svg);
}

#[test]
fn flags_reach_the_chart() {
    let (svg, _) = plot(&["--capacity", "80GiB"]);
    assert_has(
        &texts(&svg),
        &["memory (GiB)", "capacity 80 GiB", "104.31 GiB"],
    );
    let (svg, _) = plot(&[
        "--units",
        "gb",
        "--device",
        "h100",
        "--precision",
        "mixed-bf16",
    ]);
    assert_has(
        &texts(&svg),
        &["master weights", "capacity h100-80gb (85.52 GB)"],
    );
    let (svg, line) = plot(&["--model", "gpt2", "--optimizers", "all"]);
    assert!(line.contains("at gpt2"), "{line}");
    let gpt2 = texts(&svg);
    assert!(
        gpt2.iter()
            .any(|t| t.starts_with("Training memory by optimizer: gpt2 (124.44M parameters)"))
    );
    assert_has(&gpt2, &["AdamW", "SGD"]);
    let (svg, _) = plot(&[
        "--kind",
        "scaling",
        "--model",
        "llama-2-7b",
        "--optimizers",
        "adam,sgd",
    ]);
    assert_has(&texts(&svg), &["llama-2-7b", "Adam", "SGD"]);
}

/// A model name with markup in it is escaped, not injected.
#[test]
fn names_are_escaped() {
    let folder = tempfile::tempdir().unwrap();
    let model = folder.path().join("a&b<c>\"d'");
    std::fs::create_dir(&model).unwrap();
    let preset = concat!(env!("CARGO_MANIFEST_DIR"), "/presets/gpt2.json");
    std::fs::copy(preset, model.join("config.json")).unwrap();
    let (svg, _) = plot(&["--model", model.to_str().unwrap()]);
    let texts = texts(&svg);
    assert!(texts.iter().any(|t| t.contains("a&b<c>\"d'")), "{texts:?}");
}

#[test]
fn a_bad_kind_is_a_one_line_error() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("chart.svg");
    let (code, stdout, stderr) =
        run(&["plot", "--output", path.to_str().unwrap(), "--kind", "pie"]);
    assert_eq!(code, 2);
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        "error: unknown chart kind `pie` (accepted: breakdown, scaling, techniques)\n"
    );
    assert!(!path.exists());
}

#[test]
fn an_unwritable_path_is_a_one_line_error() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("missing").join("chart.svg");
    let (code, stdout, stderr) = run(&["plot", "--output", path.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert_eq!(stdout, "");
    assert!(
        stderr.starts_with("error: `") && stderr.contains("cannot write"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    let (code, _, stderr) = run(&["plot", "--output", folder.path().to_str().unwrap()]);
    assert_eq!(code, 2, "a folder is not a file: {stderr}");
    assert_eq!(
        std::fs::read_dir(folder.path()).unwrap().count(),
        0,
        "no temporary file left"
    );
}

#[test]
fn a_chart_replaces_the_old_file_whole() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("chart.svg");
    std::fs::write(&path, "old").unwrap();
    let (code, _, stderr) = run(&["plot", "--output", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(std::fs::read_to_string(&path).unwrap().starts_with("<svg"));
    assert_eq!(std::fs::read_dir(folder.path()).unwrap().count(), 1);
}

/// The chart in the README is what the binary draws today.
#[test]
fn readme_chart_is_current() {
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/textbook.svg");
    let (svg, _) = plot(&[]);
    assert_eq!(
        std::fs::read_to_string(committed).unwrap(),
        svg,
        "regenerate it: cargo run -- plot --output docs/textbook.svg"
    );
}

/// Issue 11: `plot` refuses a format it cannot draw, naming the one it can,
/// instead of ignoring it.
#[test]
fn a_format_other_than_svg_is_refused() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("chart.svg");
    for format in ["json", "table", "csv"] {
        let (code, stdout, stderr) = run(&[
            "plot",
            "--output",
            path.to_str().unwrap(),
            "--format",
            format,
        ]);
        assert_eq!(code, 2, "{format}: {stderr}");
        assert_eq!(stdout, "");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with(&format!("error: invalid --format `{format}`"))
                && stderr.contains("svg"),
            "{stderr}"
        );
        assert!(!path.exists());
    }
    let (code, _, stderr) = run(&[
        "plot",
        "--output",
        path.to_str().unwrap(),
        "--format",
        "svg",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(std::fs::read_to_string(&path).unwrap().starts_with("<svg"));
}

/// Issue 11: an SVG is not written into `x.png`, nor into a file without
/// an extension.
#[test]
fn an_output_not_ending_in_svg_is_refused() {
    let folder = tempfile::tempdir().unwrap();
    for name in ["x.png", "chart", "chart.svg.txt"] {
        let path = folder.path().join(name);
        let (code, stdout, stderr) = run(&["plot", "--output", path.to_str().unwrap()]);
        assert_eq!(code, 2, "{name}: {stderr}");
        assert_eq!(stdout, "");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(".svg") && stderr.contains("- for stdout"),
            "{stderr}"
        );
    }
    assert_eq!(std::fs::read_dir(folder.path()).unwrap().count(), 0);
    // The extension is read without regard to case.
    let path = folder.path().join("CHART.SVG");
    let (code, _, stderr) = run(&["plot", "--output", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
}

/// Issue 11: `--output -` writes the SVG to stdout, and no file named `-`.
#[test]
fn a_dash_writes_the_chart_to_stdout() {
    let folder = tempfile::tempdir().unwrap();
    let output = Command::cargo_bin("trainmem")
        .unwrap()
        .current_dir(folder.path())
        .args(["plot", "--output", "-", "--kind", "scaling"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(output.stderr.is_empty());
    let svg = String::from_utf8(output.stdout).unwrap();
    assert!(texts(&svg).iter().any(|t| t.contains("80 GB")), "{svg}");
    assert_eq!(std::fs::read_dir(folder.path()).unwrap().count(), 0);
    // The same chart as written to a file.
    let (file, _) = plot(&["--kind", "scaling"]);
    assert_eq!(svg, file);
}
