#!/usr/bin/env python3
"""Checks the shape of src/: the layer rule, module cycles and function length.

    python3 scripts/layers.py [--max-lines 120]

Every top-level module of the library has a rank (LAYERS below, highest first); a
module may import only modules of a lower rank, or its own folder. So dependencies
point one way (command -> engine -> plan -> config -> sources -> leaves) and no cycle
can form between layers; inside a folder, cycles between files are reported too.
Functions longer than --max-lines outside `#[cfg(test)]` modules are reported.

Imports are read as text (`crate::`, `super::`, `self::` paths and grouped `use`
lists, comments and doc comments skipped), so the rule holds for what the code
names. Exits 1 with one line per finding; prints a summary either way.
"""

import argparse
import os
import re
import sys

# Highest first. A module may import only modules listed below it: the command
# runs the engine over a plan built from the configuration; the engine reads bytes
# from sources and puts them in place by the layout's rules.
LAYERS = [
    ("cmd", "reference", "fuzz"),  # the command layer: exit codes, signals, the process; the generated docs; the fuzz entry points (they reach into every parser)
    ("output",),  # formats the plan and the engine's outcomes
    ("engine",),  # locks, reuse, transfers, ranges, unpacking
    ("plan",),  # declared URIs -> artifacts
    ("config",),  # flags, env twins, properties file, defaults
    ("mirror",),  # the node-local mirror server (fetches origins through the sources)
    ("source",),  # one file per scheme behind one trait
    ("stage",),  # staging server, stores, upload client, the wire contract
    ("layout", "cli"),  # the on-disk layout; the clap definitions
    ("s3", "maven", "oci"),  # S3 settings and client (shared by the source and the staging store); the Maven resolver; the OCI registry client
    ("cloud",),  # what the object_store backends share; GCS and Azure settings and clients
    ("net", "archive", "progress", "doctor", "openpgp"),  # leaves with some weight; the classpath doctor (reads jars); OpenPGP signatures (rpgp)
    ("fault", "properties", "origin"),  # small leaves
    ("retry",),  # the retry policy (what the faults are is theirs to say)
    ("util", "env_vars"),  # the smallest leaves
]
RANK = {name: len(LAYERS) - i for i, group in enumerate(LAYERS) for name in group}


def module_files(src):
    files = {}
    for root, _, names in os.walk(src):
        for name in names:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            parts = os.path.relpath(path, src)[:-3].split(os.sep)
            if parts[-1] == "mod":
                parts = parts[:-1]
            if parts in (["lib"], ["main"]):
                parts = []
            files["::".join(parts)] = path
    return files


def without_comments(text):
    """Blanks comments (line, block, doc), and the contents of string and char
    literals, keeping line breaks: braces and paths are then only the code's."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + len(hashes) + 2)
            end = n if end < 0 else end + 1 + len(hashes)
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]):
            end = text.find("'", i + 2 if text[i + 1] == "\\" else i + 1) + 1
            out.append("' '")
            i = end
        else:
            out.append(c)
            i += 1
    return "".join(out)


def without_tests(lines):
    """Drops `#[cfg(test)] mod x { ... }` blocks; keeps line numbers (blanks them)."""
    out, depth, skipping = [], 0, False
    for i, line in enumerate(lines):
        if not skipping and line.strip() == "#[cfg(test)]" and i + 1 < len(lines) and re.match(
            r"\s*(pub(\([a-z]+\))? )?mod \w+\s*\{", lines[i + 1]
        ):
            skipping, depth = True, 0
            out.append("")
            continue
        if skipping:
            depth += line.count("{") - line.count("}")
            out.append("")
            if depth <= 0 and "}" in line:
                skipping = False
            continue
        out.append(line)
    return out


def resolve(files, module, path):
    parts = path.split("::")
    base = module.split("::") if module else []
    if parts[0] == "crate":
        current, parts = [], parts[1:]
    elif parts[0] == "super":
        current = base[:]
        while parts and parts[0] == "super":
            current, parts = current[:-1], parts[1:]
    elif parts[0] == "self":
        current, parts = base[:], parts[1:]
    else:
        return None
    best = None
    for k in range(len(parts) + 1):
        candidate = "::".join(current + parts[:k])
        if candidate in files:
            best = candidate
    return best


def imports(files, module, text):
    targets = set(re.findall(r"\b((?:crate|super|self)(?:::\w+)+)", text))
    for root, group in re.findall(r"use\s+(crate|super|self)::\{([^}]*)\}", text):
        for item in group.split(","):
            item = item.strip().split(" as ")[0].strip()
            if item and item != "self":
                targets.add(f"{root}::{item}")
    found = set()
    for path in targets:
        target = resolve(files, module, path)
        if target is None or target == module:
            continue
        a, b = module.split("::"), target.split("::")
        if a[: len(b)] == b or b[: len(a)] == a:
            continue  # a module and its own parent or child
        found.add(target)
    return found


def cycles(edges):
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def long_functions(path, lines, limit):
    found = []
    for i, line in enumerate(lines):
        m = re.match(r"\s*(?:pub(?:\([a-z]+\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(\w+)", line)
        if not m:
            continue
        depth, opened = 0, False
        for j in range(i, len(lines)):
            body = lines[j]
            if not opened and ";" in body and "{" not in body:
                break  # a declaration without a body
            depth += body.count("{") - body.count("}")
            opened = opened or "{" in body
            if opened and depth <= 0:
                if j - i + 1 > limit:
                    found.append(f"long: {path}:{i + 1} {m.group(1)} {j - i + 1} lines")
                break
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--src", default=os.path.join(os.path.dirname(__file__), "..", "src"))
    parser.add_argument("--max-lines", type=int, default=120)
    args = parser.parse_args()
    files = module_files(args.src)
    findings, edges, count = [], {}, 0
    for module, path in sorted(files.items()):
        lines = without_tests(without_comments(open(path, encoding="utf-8").read()).split("\n"))
        edges[module] = imports(files, module, "\n".join(lines))
        count += len(edges[module])
        top = module.split("::")[0]
        for target in sorted(edges[module]):
            target_top = target.split("::")[0]
            if not module or top == target_top:
                continue
            if top not in RANK or target_top not in RANK:
                unknown = top if top not in RANK else target_top
                findings.append(f"layer: module '{unknown}' has no layer in scripts/layers.py")
            elif RANK[target_top] >= RANK[top]:
                findings.append(f"layer: {module} imports {target} ({top} may not depend on {target_top})")
        findings += long_functions(os.path.relpath(path), lines, args.max_lines)
    for component in cycles(edges):
        findings.append(f"cycle of {len(component)}: {', '.join(component)}")
    findings = sorted(set(findings))
    for finding in findings:
        print(finding)
    print(f"{len(files)} files, {count} import edges, {len(findings)} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
