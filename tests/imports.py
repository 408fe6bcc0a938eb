"""Reads the workspace's module imports and reports the two things that make a crate
hard to change safely: upward imports (a module importing from one of its ancestors,
such as a child's `use super::*`) and import circles (modules that import each other,
directly or through others).

    python3 tests/imports.py [--max-upward N] [--max-circles N] [--verbose]

A module is a source file (inline `mod tests` blocks, `tests.rs`/`testing.rs` files
and files declared `#[cfg(test)] mod name;` are test code and are left out). An import is a `use` path or a `crate::`/`super::`/
`self::` path in code; it is an edge to the module that defines the item, following
re-exports (`pub use`, `pub(crate) use`, `use`) to their source. A glob (`use
super::*`) is an edge to the module it globs. Exits non-zero when a count passes its
maximum. Standard library only.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRATES = ["mcp-core", "mcp-runtime", "mcp-macros", "mcp-agent", "mcp-cli"]


def strip(text):
    """Source without comments, string literals and test modules."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'r#*"(?:.|\n)*?"#*', '""', text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    m = re.search(r"#\[cfg\(test\)\]\s*mod \w+\s*\{", text)
    if m:
        text = text[: m.start()]
    return text


def modules(crate):
    """{module path: file} for a crate's source files."""
    src = os.path.join(ROOT, crate, "src")
    out = {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs") or f in ("tests.rs", "testing.rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), src)[:-3].split(os.sep)
            if rel in (["lib"], ["main"]):
                path = ("crate",)
            elif rel[-1] == "mod":
                path = ("crate",) + tuple(rel[:-1])
            else:
                path = ("crate",) + tuple(rel)
            out[path] = os.path.join(dirpath, f)
    # `#[cfg(test)] mod name;`: a file of test code, like `tests.rs`.
    for path, file in list(out.items()):
        for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", open(file).read()):
            out.pop(path + (m.group(1),), None)
    # `#[path = "x.rs"] mod name;`
    for path, file in list(out.items()):
        for m in re.finditer(r'#\[path\s*=\s*"([^"]+)"\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)', open(file).read()):
            target = os.path.normpath(os.path.join(os.path.dirname(file), m.group(1)))
            for p, f in list(out.items()):
                if f == target and p != path + (m.group(2),):
                    out[path + (m.group(2),)] = f
                    del out[p]
    return out


def use_trees(text):
    """Every `use` declaration: (visibility, the paths it names)."""
    for m in re.finditer(r"(?<![\w:])(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", text):
        vis = m.group(1) or ""
        tree = re.sub(r"\s+as\s+\w+", "", m.group(2))
        for path in expand(re.sub(r"\s+", "", tree)):
            yield vis, path


def expand(tree):
    """`a::{b,c::{d,e}}` as [a::b, a::c::d, a::c::e]."""
    if "{" not in tree:
        return [tree]
    i = tree.index("{")
    prefix, inner = tree[:i], tree[i + 1 : tree.rindex("}")]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    if cur:
        parts.append(cur)
    out = []
    for p in parts:
        for e in expand(p):
            out.append(prefix + e if e != "self" else prefix.rstrip(":"))
    return out


class Crate:
    def __init__(self, name):
        self.name = name
        self.mods = modules(name)
        self.text = {p: strip(open(f).read()) for p, f in self.mods.items()}
        self.exports = {}
        self.globs = {}
        self.defines = {}
        for p, t in self.text.items():
            for _, path in use_trees(t):
                segs = path.split("::")
                if segs[-1] != "*":
                    if self.absolute(p, segs) == p + (segs[-1],):
                        continue  # an inline module naming its parent's item
                    self.exports.setdefault(p, {})[segs[-1]] = segs
                else:
                    self.globs.setdefault(p, []).append(segs[:-1])
            self.defines[p] = set(
                re.findall(
                    r"\b(?:struct|enum|fn|trait|type|const|static|union)\s+(\w+)", t
                )
            )

    def absolute(self, at, segs):
        """The absolute segments of `segs` as written in module `at`, or None when
        the path leaves the crate."""
        if segs[0] == "crate":
            return ("crate",) + tuple(segs[1:])
        base = at
        i = 0
        while i < len(segs) and segs[i] in ("super", "self"):
            if segs[i] == "super":
                base = base[:-1]
            i += 1
        if i > 0:
            return base + tuple(segs[i:])
        if at + (segs[0],) in self.mods:
            return at + tuple(segs)
        return None

    def resolve(self, at, segs, depth=0):
        """The module defining what `segs` (written in `at`) names."""
        path = self.absolute(at, segs)
        if path is None or depth > 8:
            return None
        mod = ("crate",)
        rest = list(path[1:])
        while rest and mod + (rest[0],) in self.mods:
            mod = mod + (rest.pop(0),)
        if not rest or rest == ["*"]:
            return mod
        name = rest[0]
        if name in self.defines.get(mod, ()):
            return mod
        src = self.exports.get(mod, {}).get(name)
        if src and src[-1] == name and tuple(src) != tuple(segs):
            # A re-export: where it comes from (outside the crate: no edge).
            return self.resolve(mod, src, depth + 1)
        for glob in self.globs.get(mod, ()):
            # Brought in by a glob: the globbed module that has it.
            source = self.absolute(mod, glob)
            if source is None or not self.has(source, name):
                continue
            target = self.resolve(mod, glob + [name], depth + 1)
            if target is not None and target != mod:
                return target
        return mod

    def has(self, mod, name):
        """Whether module `mod` defines or imports `name` (one level of globs)."""
        if name in self.defines.get(mod, ()) or name in self.exports.get(mod, {}):
            return True
        if mod + (name,) in self.mods:
            return True
        for glob in self.globs.get(mod, ()):
            source = self.absolute(mod, glob)
            if source and (
                name in self.defines.get(source, ()) or name in self.exports.get(source, {})
            ):
                return True
        return False

    def edges(self):
        out = {}
        for p, t in self.text.items():
            found = set()
            for _, path in use_trees(t):
                segs = path.split("::")
                target = self.resolve(p, segs)
                if target:
                    found.add(target)
            for m in re.finditer(r"\b((?:crate|super|self)(?:::\w+)+)", t):
                if "tests" in m.group(1).split("::"):
                    continue  # test-only code reaching into a test module
                target = self.resolve(p, m.group(1).split("::"))
                if target:
                    found.add(target)
            found.discard(p)
            out[p] = found
        return out


def circles(edges):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index:
            visit(v)
    return out


def name(crate, path):
    return crate + "::" + "::".join(path[1:]) if len(path) > 1 else crate


def main():
    args = sys.argv[1:]
    limit = lambda flag: int(args[args.index(flag) + 1]) if flag in args else None
    max_up, max_circles, verbose = limit("--max-upward"), limit("--max-circles"), "--verbose" in args
    upward, all_circles = [], []
    for c in CRATES:
        crate = Crate(c)
        edges = crate.edges()
        for src, targets in edges.items():
            for t in targets:
                if len(t) < len(src) and src[: len(t)] == t:
                    upward.append((name(c, src), name(c, t)))
        for comp in circles(edges):
            all_circles.append([name(c, m) for m in comp])
    print(f"upward imports: {len(upward)}")
    if verbose:
        for s, t in sorted(upward):
            print(f"  {s} -> {t}")
    print(f"import circles: {len(all_circles)}")
    for comp in all_circles:
        print("  " + ", ".join(comp) if verbose else "  " + ", ".join(comp[:6]) + (" …" if len(comp) > 6 else ""))
    failed = (max_up is not None and len(upward) > max_up) or (
        max_circles is not None and len(all_circles) > max_circles
    )
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
