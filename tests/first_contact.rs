//! Issue 11: trainmem tried as a new user would, through the real binary.

mod common;

use common::run;

/// A near-miss of a preset name suggests the preset of the same family and
/// size, nearest in version.
#[test]
fn a_near_miss_suggests_the_same_family_and_size() {
    let cases = [
        ("llama-3-8b", "llama-3.1-8b"),
        ("llama3-70b", "llama-3.1-70b"),
        ("qwen-7b", "qwen2.5-7b"),
        ("mistral7b", "mistral-7b"),
        ("Meta-Llama-3.1-8B-Instruct", "llama-3.1-8b"),
    ];
    for (wanted, expected) in cases {
        let (code, stdout, stderr) = run(&["estimate", "--model", wanted]);
        assert_eq!(code, 2, "{wanted}");
        assert!(stdout.is_empty());
        assert!(
            stderr.starts_with(&format!(
                "error: unknown model `{wanted}`; did you mean `{expected}`?"
            )),
            "{wanted}: {stderr}"
        );
    }
}
