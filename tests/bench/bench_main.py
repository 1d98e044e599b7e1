"""What every Python benchmark tool's main shares (tests/bench/), as bench_main.h for the C++ tools:
an error that reaches the main (a file that cannot be read, a value that does not parse, a command it
runs that fails) is printed with the tool's name and its message and ends the tool with exit 1, not
with a traceback.

    if __name__ == "__main__":
        bench_main.run(main)
"""
import os
import subprocess
import sys


def run(main):
    tool = os.path.basename(sys.argv[0])
    try:
        status = main()
    except subprocess.CalledProcessError as e:
        output = (e.stderr or e.output or "").strip() if isinstance(e.stderr or e.output, str) else ""
        sys.exit(f"{tool}: {' '.join(map(str, e.cmd))} failed (exit {e.returncode})" +
                 (f": {output.splitlines()[-1]}" if output else ""))
    except (OSError, ValueError, KeyError) as e:  # a JSONDecodeError is a ValueError
        sys.exit(f"{tool}: {type(e).__name__}: {e}")
    sys.exit(status or 0)
