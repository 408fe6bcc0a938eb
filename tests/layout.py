#!/usr/bin/env python3
"""The house's rules that a reader of the tree can check (docs/decisions.md, "Files
named for what they hold"):

* one module style: `foo.rs` + `foo/`, never `mod.rs`;
* library code has no file named for its place instead of its contents (`shared.rs`,
  `util.rs`, `utils.rs`, `common.rs`, `misc.rs`, `helpers.rs`);
* library code has at most MAX_GLOBS glob imports (`use x::*;`), preludes and test
  modules excepted;
* no struct named `*Inner` in library code has more than MAX_INNER_FIELDS fields (a
  handle's shared state is made of components, not a god struct).

Library code: the `src/` folders of the published crates. Prints every offender.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
LIBRARY = ["mcp-core/src", "mcp-runtime/src", "mcp-macros/src", "mcp-agent/src", "mcp-cli/src"]
WORKSPACE = LIBRARY + ["examples", "tests/support", "tests/soak", "tests/bench", "tests/conformance",
                       "mcp-runtime/tests", "mcp-agent/tests", "mcp-macros/tests", "mcp-cli/tests",
                       "mcp-core/tests", "fuzz/fuzz_targets"]
BANNED = {"shared.rs", "util.rs", "utils.rs", "common.rs", "misc.rs", "helpers.rs"}
MAX_GLOBS = 5
MAX_INNER_FIELDS = 12


def rust_files(folders):
    for folder in folders:
        base = ROOT / folder
        if base.exists():
            yield from sorted(p for p in base.rglob("*.rs") if "target" not in p.parts)


def test_module_files():
    """Files that are `#[cfg(test)] mod x;` of their parent (and everything under them)."""
    tests = set()
    for path in rust_files(LIBRARY):
        text = path.read_text()
        for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*mod\s+(\w+)\s*;", text):
            name = m.group(1)
            here = path.parent if path.name in ("lib.rs", "main.rs") else path.parent / path.stem
            tests.add(here / f"{name}.rs")
            tests.add(here / name)
    return tests


def in_test(path, tests):
    return any(path == t or t in path.parents for t in tests)


def inline_test_ranges(text):
    """Byte ranges of `#[cfg(test)] mod x { ... }` blocks."""
    ranges = []
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*mod\s+\w+\s*\{", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        ranges.append((m.start(), i))
    return ranges


def main():
    problems = []
    for path in rust_files(WORKSPACE):
        if path.name == "mod.rs":
            problems.append(f"{path.relative_to(ROOT)}: `mod.rs` (the workspace's style is foo.rs + foo/)")
    tests = test_module_files()
    globs = []
    for path in rust_files(LIBRARY):
        rel = path.relative_to(ROOT)
        if path.name in BANNED:
            problems.append(f"{rel}: a file named for its place, not what it holds")
        if in_test(path, tests):
            continue
        text = path.read_text()
        skip = inline_test_ranges(text)
        for m in re.finditer(r"^\s*(?:pub(?:\([^)]*\))?\s+)?use\s+([\w:]+)::\*\s*;", text, re.M):
            if any(a <= m.start() < b for a, b in skip) or "prelude" in m.group(1):
                continue
            line = text.count("\n", 0, m.start(1)) + 1
            globs.append(f"{rel}:{line}: use {m.group(1)}::*")
        for m in re.finditer(r"struct\s+(\w*Inner)\b[^{;]*\{", text):
            depth, i = 1, m.end()
            while i < len(text) and depth:
                depth += {"{": 1, "}": -1}.get(text[i], 0)
                i += 1
            body = text[m.end():i - 1]
            body = re.sub(r"//[^\n]*", "", body)  # comments
            body = re.sub(r"pub\s*\([^)]*\)", "pub", body).replace("->", "  ")
            # fields at the top level of the body: `name:` after optional visibility
            flat, d = [], 0
            for ch in body:
                d += {"{": 1, "(": 1, "<": 1, "[": 1, "}": -1, ")": -1, ">": -1, "]": -1}.get(ch, 0)
                flat.append(ch if d == 0 else " ")
            fields = re.findall(r"^\s*(?:pub(?:\s*\([^)]*\))?\s+)?(\w+)\s*:", "".join(flat), re.M)
            if len(fields) > MAX_INNER_FIELDS:
                problems.append(f"{rel}: struct {m.group(1)} has {len(fields)} fields (at most {MAX_INNER_FIELDS})")
    if len(globs) > MAX_GLOBS:
        problems.append(f"{len(globs)} glob imports in library code (at most {MAX_GLOBS}):\n  " + "\n  ".join(globs))
    print(f"glob imports in library code: {len(globs)}")
    for g in globs:
        print(f"  {g}")
    if problems:
        print("\n".join(problems), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
