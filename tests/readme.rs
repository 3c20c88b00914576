//! The README's examples are the binary's real output: every ```console block
//! that starts with `$ trainmem ARGS` must match what that command prints.
//! `python3 tools/update_readme.py` rewrites them after a deliberate change.

use assert_cmd::Command;

#[test]
fn readme_examples_are_real_output() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let mut checked = 0;
    for block in readme.split("```console\n").skip(1) {
        let block = block.split("```").next().unwrap();
        let (command, expected) = block.split_once('\n').unwrap();
        let Some(args) = command.strip_prefix("$ trainmem") else {
            continue;
        };
        let output = Command::cargo_bin("trainmem")
            .unwrap()
            .args(args.split_whitespace())
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8(output.stdout).unwrap(),
            expected,
            "README block `{command}`"
        );
        checked += 1;
    }
    assert!(checked >= 3, "only {checked} README examples found");
}
