"""Rewrite every ```console block of README.md that starts with `$ trainmem ARGS`
with the real output of the release binary.

Run from the repository root after `cargo build --release`:

    python3 tools/update_readme.py

`tests/readme.rs` fails when a block and the binary disagree.
"""
import re
import subprocess

BLOCK = re.compile(r"```console\n\$ trainmem ?(.*?)\n.*?```", re.S)


def rerun(match: re.Match) -> str:
    args = match.group(1)
    run = subprocess.run(["./target/release/trainmem", *args.split()], capture_output=True, text=True)
    # `trainmem check` exits 1 for a run that does not fit; 2 is bad input.
    if run.returncode not in (0, 1):
        raise SystemExit(f"`trainmem {args}` failed: {run.stderr.strip()}")
    out = run.stdout
    return f"```console\n$ trainmem {args}".rstrip() + "\n" + out + "```"


with open("README.md", encoding="utf-8") as f:
    text = f.read()
with open("README.md", "w", encoding="utf-8") as f:
    f.write(BLOCK.sub(rerun, text))
