#!/usr/bin/python3
"""Layering check: every project include must follow docs/architecture.md.

Reads the allowed arrows from the ```layering block of docs/architecture.md:

    module-path [torch] [grpc] -> allowed-module allowed-module ...

A source file belongs to the module whose path is the longest prefix of its
own path (a file directly in server/ belongs to `server`, not to
`server/rpc`). An `#include "X"` of a project file is allowed when X's module
is the file's own module, one named after its arrow, or a module inside one
of those; `tests` may include anything. `torch` lets a module include
LibTorch (<torch/...>, <ATen/...>, <c10/...>); `grpc` lets it include gRPC
or the generated stubs (<grpcpp/...>, "frontier/v1/..."). Everything else is
refused. Exit status 0 when every edge is allowed, 1 with one line per
forbidden edge, 2 when the rules themselves cannot be read.

usage: check_layering.py [--root DIR]
"""

import argparse
import pathlib
import re
import subprocess
import sys

SOURCE_SUFFIXES = {".h", ".cc", ".cu", ".cpp", ".hpp"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
TORCH_PREFIXES = ("torch/", "ATen/", "c10/", "caffe2/")
GRPC_PREFIXES = ("grpcpp/", "grpc/", "grpc++/")
GENERATED_PREFIX = "frontier/v1/"  # generated protobuf/gRPC stubs


class RulesError(Exception):
    pass


def read_rules(architecture: pathlib.Path):
    """Returns {module: (allowed modules, torch allowed, grpc allowed)}."""
    text = architecture.read_text(encoding="utf-8")
    match = re.search(r"```layering\n(.*?)```", text, re.S)
    if not match:
        raise RulesError(f"{architecture}: no ```layering block")
    rules = {}
    for number, line in enumerate(match.group(1).splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if "->" not in line:
            raise RulesError(f"{architecture}: layering line {number}: expected 'module [flags] -> modules'")
        left, right = line.split("->", 1)
        words = left.split()
        module, flags = words[0].rstrip("/"), set(words[1:])
        unknown = flags - {"torch", "grpc"}
        if unknown:
            raise RulesError(f"{architecture}: layering line {number}: unknown flag {sorted(unknown)}")
        if module in rules:
            raise RulesError(f"{architecture}: layering line {number}: module {module} listed twice")
        rules[module] = ({m.rstrip("/") for m in right.split()}, "torch" in flags, "grpc" in flags)
    return rules


def module_of(path: str, modules):
    """The longest module path that contains `path` (a file or folder)."""
    best = None
    for module in modules:
        if path == module or path.startswith(module + "/"):
            if best is None or len(module) > len(best):
                best = module
    return best


def source_files(root: pathlib.Path):
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "--cached", "--others", "--exclude-standard"],
                                check=True, capture_output=True, text=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        listed = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()]
    for name in sorted(set(listed)):
        if pathlib.PurePosixPath(name).suffix in SOURCE_SUFFIXES and (root / name).is_file():
            yield name


def check(root: pathlib.Path):
    rules = read_rules(root / "docs" / "architecture.md")
    for module, (allowed, _, _) in rules.items():
        for target in allowed:
            if target not in rules:
                raise RulesError(f"docs/architecture.md: {module} -> {target}: {target} is not a module")
    problems = []
    for name in source_files(root):
        own = module_of(name, rules)
        if own is None:
            problems.append(f"{name}: in no module of docs/architecture.md")
            continue
        allowed, torch_ok, grpc_ok = rules[own]
        for number, line in enumerate((root / name).read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            quote, target = match.groups()
            where = f"{name}:{number}: {own}"
            if target.startswith(TORCH_PREFIXES) and not torch_ok:
                problems.append(f"{where} may not include LibTorch <{target}>")
            elif (target.startswith(GRPC_PREFIXES) or target.startswith(GENERATED_PREFIX)) and not grpc_ok:
                problems.append(f"{where} may not include gRPC ({target})")
            elif quote == '"' and not target.startswith(GENERATED_PREFIX):
                if not (root / target).is_file():
                    continue  # not a project path (e.g. a header beside the file); the compiler judges it
                theirs = module_of(target, rules)
                if theirs is None:
                    problems.append(f"{where} includes {target}, which is in no module")
                elif own != "tests" and theirs != own and module_of(theirs, allowed) is None:
                    problems.append(f"{where} may not include {target} ({theirs}): "
                                    f"{own} -> {theirs} is not an arrow of docs/architecture.md")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parents[2]))
    args = parser.parse_args()
    root = pathlib.Path(args.root)
    try:
        problems = check(root)
    except (RulesError, OSError) as error:
        print(f"layering: {error}", file=sys.stderr)
        return 2
    for problem in problems:
        print(problem)
    if problems:
        print(f"layering: {len(problems)} forbidden include(s)")
        return 1
    print("layering: every include follows docs/architecture.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
