#!/usr/bin/python3
"""The function-length check must measure what it says and bite: functions found by their braces with
comments, strings, raw strings, initializer lists, lambdas and control blocks around them; in a scratch
tree, a function one line past the limit fails and is named, one at the limit passes.

usage: function_length_selftest.py SOURCE_DIR
"""
import pathlib
import subprocess
import sys
import tempfile

source_dir = pathlib.Path(sys.argv[1])
sys.path.insert(0, str(source_dir / "tests" / "house"))
import check_function_length as check  # noqa: E402

SAMPLE = r'''#include <string>
namespace frontier {
namespace {
const int kTable[] = {1, 2, 3};  // not a function { brace in a comment
}  // namespace

int Free(int x) {
  if (x > 0) {
    return 1;
  }
  return 0;
}

struct Point {
  int x{0};
  Point(int a, int b) : x(a), y_{b} {
    const auto f = [&](int v) { return v + 1; };
    x = f(x);
  }
  int Get() const { return x; }
  int y_;
};

std::string Text() {
  const char* raw = R"({"not": {"a": "function() {"}})";
  const char* s = "} {";
  return std::string(raw) + s + '{';
}

auto Trailing(int a) -> int {
  /* { */ return a;
}
}  // namespace frontier
'''

found = {name: (line, lines) for line, name, lines in check.functions(SAMPLE)}
expected = {"Free": (7, 6), "Point": (16, 4), "Get": (20, 1), "Text": (24, 5), "Trailing": (30, 3)}
if found != expected:
    sys.exit(f"FAIL: functions found {found}, expected {expected}")

with tempfile.TemporaryDirectory() as work:
    root = pathlib.Path(work)
    (root / "server").mkdir()
    (root / "tests").mkdir()
    body = lambda n: "int F() {\n" + "  ;\n" * (n - 2) + "}\n"  # noqa: E731
    (root / "server" / "at_limit.cc").write_text(body(100))
    (root / "tests" / "long_test.cc").write_text(body(500))
    run = lambda: subprocess.run([sys.executable, str(source_dir / "tests/house/check_function_length.py"),  # noqa
                                  "--root", work, "--no-exceptions"], capture_output=True, text=True)
    result = run()
    if result.returncode != 0:
        sys.exit(f"FAIL: functions within the rules were refused:\n{result.stdout}")
    (root / "server" / "past_limit.cc").write_text(body(101))
    result = run()
    if result.returncode != 1 or "server/past_limit.cc:1: F is 101 lines" not in result.stdout:
        sys.exit(f"FAIL: a 101-line function was not refused by name (exit {result.returncode}):\n{result.stdout}")
    print("refused as expected:", result.stdout.strip())
