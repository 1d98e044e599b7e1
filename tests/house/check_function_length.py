#!/usr/bin/python3
"""Function-length check: no function of the project's C++ passes LIMIT lines.

A function past ~100 lines does several things one after another; each of them
deserves a name (docs/testing.md, House rules that are tests). The check reads
the tracked (or new, not ignored) non-test C++ sources (.h, .cc, .cu, .cpp,
.hpp; not under tests/, not named *_test.*), with comments, strings and
character literals blanked, and finds function bodies by their braces: a `{`
at namespace or class scope whose header (the text since the previous `;`,
`{` or `}`) has a parameter list and is not a class, struct, enum, union,
namespace, extern block or initializer. A function's length is its lines from
the header's first line to the closing brace. Lambdas and local classes count
toward the function they are in.

Exceptions are listed in EXCEPTIONS with why and a ceiling: an exception past
its ceiling fails, and so does one that no longer needs its place (so the
list only shrinks).

Exit status 0 when every function is within the limit, 1 with one line per
function past it (path:line, name, lines, longest first), 2 on a file that
cannot be read.

usage: check_function_length.py [--root DIR] [--limit LINES] [--list N] [--no-exceptions]
"""

import argparse
import pathlib
import re
import sys

# The same files as the file-size check: tracked or new, not under tests/, not named *_test.*.
from check_file_size import is_test, project_files

CPP_SUFFIXES = {".h", ".cc", ".cu", ".cpp", ".hpp"}
LIMIT = 100

# "path:function": (the most lines it may have, why it is past the limit). An entry may not grow past its
# ceiling, and one that is back under the limit (or gone) must leave the list: the list only shrinks.
TABLE = "a table, one entry per line: data, not steps"
NOT_YET_SPLIT = "a sequence of steps not yet named, kept from growing until it is split (issue 64)"
EXCEPTIONS = {
    "worker/profile/op_class.cc:OperatorClass": (275, "the operator-name rules that classify an op, " + TABLE),
    "server/search/sobol.cc:JoeKuo": (258, "Joe and Kuo's Sobol direction numbers, " + TABLE),
    "server/cli/cli.cc:RunCli": (218, "every subcommand's CLI11 flags, one declaration each: " + TABLE),
    "search_spaces/trial_spec.cc:ToJson": (101, "a trial spec's every field written, " + TABLE),
    "search_spaces/space_strategy.cc:SpaceParser::ParseStrategy": (109, "a strategy's every field read, " + TABLE),
    "worker/sandbox/sandbox.cc:RunSandbox": (244, NOT_YET_SPLIT),
    "worker/profile/profile_summary.cc:Run": (225, NOT_YET_SPLIT),
    "worker/trial/kernel_lab.cc:JudgeCandidate": (223, NOT_YET_SPLIT),
    "worker/trial/lab_timing.cc:ClockTiming": (154, NOT_YET_SPLIT),
    "worker/agent/supervision.cc:Agent::Supervise": (151, NOT_YET_SPLIT),
    "worker/agent/agent.cc:Agent::RunTrial": (151, NOT_YET_SPLIT),
    "worker/profile/bottleneck.cc:BottleneckVerdict": (141, NOT_YET_SPLIT),
    "server/report/report.cc:ReportBuilder::Build": (116, NOT_YET_SPLIT),
}

SCOPE_WORDS = re.compile(r"\b(namespace|class|struct|union|enum|extern)\b")
CONTROL_WORDS = re.compile(r"^\s*(if|for|while|switch|catch|do|else|try)\b")
NAME = re.compile(r"([~\w:<>]+|operator\s*[^\s(]+)\s*\($")


def blank(text: str) -> str:
    """Comments, string and character literals (raw strings included) and preprocessor lines replaced
    by spaces, newlines kept, so that braces and line numbers are the code's."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c == "#":  # a preprocessor line, with its continuations
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        if c == "\n":
            at_line_start = True
            out.append(c)
            i += 1
            continue
        if not c.isspace():
            at_line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                out.append(" ")
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:end]))
            i = end
            continue
        raw = re.match(r'R"([^()\\\s]{0,16})\(', text[i:i + 20])
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = ")" + raw.group(1) + '"'
            end = text.find(close, i + raw.end())
            end = n if end < 0 else end + len(close)
            out.append('""' + "".join(ch if ch == "\n" else " " for ch in text[i + 2:end]))
            i = end
            continue
        if c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator: 1'000'000
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else ""))
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


FUNCTION_END = re.compile(r"\)\s*(const|override|final|noexcept|&&?|\s)*(->\s*[\w:<>,\s*&]+)?$")
INIT_LIST = re.compile(r"\)\s*:\s*[\w:]")


def classify(header: str) -> str:
    """What a `{` at namespace or class scope opens, from the text before it."""
    flat = " ".join(header.split())
    before_paren = flat.split("(")[0]
    if "(" not in flat and SCOPE_WORDS.search(flat):
        return "scope"
    if "(" not in flat or CONTROL_WORDS.match(flat) or "=" in before_paren:
        return "other"
    if FUNCTION_END.search(flat) or (INIT_LIST.search(flat) and flat.endswith("}")):
        return "function"  # (the second: a constructor whose initializer list ends with a brace initializer)
    if INIT_LIST.search(flat) and re.search(r"[\w>]$", flat):
        return "init"  # a member's brace initializer in a constructor's initializer list
    return "other"


def functions(text: str):
    """(first line, name, lines) of each function body at namespace or class scope."""
    code = blank(text)
    found = []
    stack = []  # one entry per open brace: (kind, first line, header)
    header_start = 0  # where the text before the next brace began
    for i, c in enumerate(code):
        if c == ";":
            header_start = i + 1
        elif c == "{":
            header = code[header_start:i]
            kind = "other" if any(k in ("function", "other") for k, _, _ in stack) else classify(header)
            first = header_start + len(header) - len(header.lstrip())
            stack.append((kind, code.count("\n", 0, first) + 1, " ".join(header.split())))
            if kind != "init":
                header_start = i + 1
        elif c == "}" and stack:
            kind, first_line, header = stack.pop()
            if kind == "function":
                lines = code.count("\n", 0, i) + 1 - first_line + 1
                name = NAME.search(header.split("(")[0].rstrip() + "(")
                found.append((first_line, name.group(1) if name else header[:60], lines))
            if kind != "init":
                header_start = i + 1
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=pathlib.Path(__file__).resolve().parents[2], type=pathlib.Path)
    parser.add_argument("--limit", default=LIMIT, type=int, help=f"the most lines a function may have ({LIMIT})")
    parser.add_argument("--list", default=0, type=int, help="also print the N longest functions")
    parser.add_argument("--no-exceptions", action="store_true", help="hold every function to the limit")
    args = parser.parse_args()
    exceptions = {} if args.no_exceptions else EXCEPTIONS
    too_long, everything, seen_exceptions, grown = [], [], set(), []
    for relative in project_files(args.root):
        path = args.root / relative
        if is_test(relative) or relative.suffix not in CPP_SUFFIXES or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            print(f"{relative}: cannot be read: {e}", file=sys.stderr)
            return 2
        for line, name, lines in functions(text):
            everything.append((lines, f"{relative}:{line}", name))
            if lines <= args.limit:
                continue
            key = f"{relative}:{name}"
            if key in exceptions:
                seen_exceptions.add(key)
                ceiling, why = exceptions[key]
                if lines > ceiling:
                    print(f"{relative}:{line}: {name} is {lines} lines, past its ceiling of {ceiling} ({why}): "
                          "split it rather than grow it")
                    grown.append(key)
                continue
            too_long.append((lines, f"{relative}:{line}", name))
    for lines, where, name in sorted(everything, reverse=True)[:args.list]:
        print(f"{lines:5}  {where}  {name}")
    for lines, where, name in sorted(too_long, reverse=True):
        print(f"{where}: {name} is {lines} lines, past the limit of {args.limit}: give its steps names")
    stale = sorted(set(exceptions) - seen_exceptions)
    for key in stale:
        print(f"{key}: listed as an exception but no longer past {args.limit} lines (or gone): remove it")
    return 1 if too_long or stale or grown else 0


if __name__ == "__main__":
    sys.exit(main())
