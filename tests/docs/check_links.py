#!/usr/bin/python3
"""Every relative link of the README and docs/ names a file that exists.

Reads README.md and docs/*.md, takes each markdown link target `](PATH)` or
`](PATH#anchor)` that is not a URL, and resolves it against the linking
file's folder. Also refuses the names of documents that live outside the
repository (DESIGN.md, STYLE.md) anywhere in the project's sources and docs.
Exit 0 when all resolve, 1 with one line per dangling reference.

usage: check_links.py [--root DIR]
"""
import argparse
import pathlib
import re
import subprocess
import sys

LINK = re.compile(r"\]\(([^)\s]+)\)")
OUTSIDE = re.compile(r"\b(DESIGN|STYLE)\.md\b")
SOURCES = {".md", ".h", ".cc", ".cu", ".py", ".sh", ".txt", ".yaml", ".yml", ".proto"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parents[2]))
    root = pathlib.Path(parser.parse_args().root)
    problems = []
    for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                    continue
                path = (doc.parent / target.split("#", 1)[0]).resolve()
                if not path.exists():
                    problems.append(f"{doc.relative_to(root)}:{number}: link to {target}, which does not exist")
    files = subprocess.run(["git", "-C", str(root), "ls-files", "--cached", "--others", "--exclude-standard"],
                           check=True, capture_output=True, text=True).stdout.split("\n")
    for name in files:
        path = root / name
        if path.suffix not in SOURCES or not path.is_file() or name.startswith("tests/docs/"):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                problems.append(f"{name}:{number}: refers to {OUTSIDE.search(line).group(0)}, "
                                "which is not in the repository (docs/architecture.md lists the documents)")
    for problem in problems:
        print(problem)
    print(f"docs: {len(problems)} dangling reference(s)" if problems else "docs: every reference resolves")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
