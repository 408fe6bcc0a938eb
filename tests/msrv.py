#!/usr/bin/env python3
"""A `rust-version` that is true: no normal dependency of a published crate declares a
newer `rust-version` than the crate itself.

Reads `cargo metadata` (the locked resolve, every target platform), walks each
published workspace crate's normal dependencies transitively (build and dev
dependencies are not a user's concern: a user builds the crate, not its tests; a
build dependency is followed, since a user compiles it too) and fails, naming each
offender and the path that pulls it in, when one declares a higher `rust-version`.
"""
import json
import subprocess
import sys


def version(text):
    """`1.85` and `1.85.0` are the same version."""
    parts = [int(part) for part in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def main():
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    meta = json.loads(out)
    packages = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    failures = []
    for member in meta["workspace_members"]:
        crate = packages[member]
        if crate.get("publish") == []:
            continue  # publish = false: nobody builds it from a registry
        declared = crate.get("rust_version")
        if not declared:
            failures.append(f"{crate['name']} declares no rust-version")
            continue
        # Breadth first, remembering who pulled each dependency in.
        parent = {member: None}
        queue = [member]
        while queue:
            current = queue.pop(0)
            for dep in nodes[current]["deps"]:
                kinds = {k["kind"] for k in dep["dep_kinds"]}
                if not kinds & {None, "build"}:
                    continue
                if dep["pkg"] in parent:
                    continue
                parent[dep["pkg"]] = current
                queue.append(dep["pkg"])
        worst = None
        for pkg in parent:
            if pkg in meta["workspace_members"]:
                continue  # the workspace's own crates declare the same version
            needed = packages[pkg].get("rust_version")
            if needed and version(needed) > version(declared):
                chain = []
                at = pkg
                while at is not None:
                    chain.append(f"{packages[at]['name']} {packages[at]['version']}")
                    at = parent[at]
                failures.append(
                    f"{crate['name']} declares rust-version {declared}, but "
                    f"{packages[pkg]['name']} {packages[pkg]['version']} needs {needed}: "
                    + " <- ".join(chain)
                )
            if needed and (worst is None or version(needed) > version(worst[0])):
                worst = (needed, packages[pkg]["name"])
        if worst:
            print(f"{crate['name']}: rust-version {declared}; its newest dependency needs {worst[0]} ({worst[1]})")
    if failures:
        print("\n".join(failures), file=sys.stderr)
        print(
            "Raise the workspace's rust-version in Cargo.toml, or pin a dependency version "
            "that allows the declared one.",
            file=sys.stderr,
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
