#!/usr/bin/python3
"""File-size check: no non-test source file of the project passes LIMIT lines.

A file past ~800 lines has stopped being one concept (docs/architecture.md:
"one concept, one home"): split it by concern, with each part's contract in
its header, before it grows further. Source files are the tracked (or new,
not ignored) files with a source suffix; test files are those under tests/
and those named *_test.* or test_*.py. Generated files are not tracked, so
they are not counted. Exit status 0 when every file is within the limit, 1
with one line per file past it (its path and line count, longest first).

usage: check_file_size.py [--root DIR] [--limit LINES]
"""

import argparse
import pathlib
import subprocess
import sys

SOURCE_SUFFIXES = {".h", ".cc", ".cu", ".cpp", ".hpp", ".in", ".py", ".sh", ".js", ".proto", ".cmake"}
SCRIPT_NAMES_WITHOUT_SUFFIX = {"frontier-llm-proposer", "frontier-llm-kernels", "frontier-optuna-proposer"}


def project_files(root: pathlib.Path):
    """The files git sees (tracked, or new and not ignored); every file when root is not a checkout."""
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "--cached", "--others", "--exclude-standard"],
                                check=True, capture_output=True, text=True).stdout.splitlines()
        return [pathlib.Path(line) for line in listed]
    except (OSError, subprocess.CalledProcessError):
        return [path.relative_to(root) for path in root.rglob("*") if path.is_file()]


def is_test(path: pathlib.Path) -> bool:
    return (path.parts[0] == "tests" or "_test." in path.name or path.name.startswith("test_"))


def is_source(path: pathlib.Path) -> bool:
    return path.suffix in SOURCE_SUFFIXES or path.name in SCRIPT_NAMES_WITHOUT_SUFFIX or path.name == "CMakeLists.txt"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=pathlib.Path(__file__).resolve().parents[2], type=pathlib.Path)
    parser.add_argument("--limit", default=800, type=int, help="the most lines a source file may have (800)")
    args = parser.parse_args()
    too_long, counted = [], 0
    for relative in project_files(args.root):
        path = args.root / relative
        if is_test(relative) or not is_source(relative) or not path.is_file():
            continue
        counted += 1
        with open(path, "rb") as handle:
            lines = sum(1 for _ in handle)
        if lines > args.limit:
            too_long.append((lines, relative))
    for lines, relative in sorted(too_long, reverse=True):
        print(f"{relative}: {lines} lines, past the limit of {args.limit}: split it by concern")
    if too_long:
        return 1
    print(f"file size: {counted} source files, none past {args.limit} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
