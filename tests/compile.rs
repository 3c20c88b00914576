//! `--compile` is refused with a reason, never ignored: what torch.compile
//! saves is Inductor's min-cut partitioner's choice per traced graph.

mod common;

use common::run;

#[test]
fn compile_is_refused_by_every_command_with_its_reason() {
    for command in [
        &["estimate", "--model", "llama-3.2-1b", "--compile"][..],
        &[
            "timeline",
            "--model",
            "llama-3.2-1b",
            "--micro-batch",
            "1",
            "--seq-len",
            "128",
            "--compile",
        ],
        &[
            "fit",
            "--model",
            "llama-3.2-1b",
            "--device",
            "h100-80gb",
            "--compile",
        ],
    ] {
        let (code, out, err) = run(command);
        assert_eq!(code, 2, "{command:?}");
        assert!(out.is_empty());
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("`--compile`") && err.contains("min-cut partitioner"),
            "{err}"
        );
    }
}
