#!/usr/bin/env python3
"""Offline checks of deploy/docker/*.Dockerfile beyond a linter's syntax check.

  check_dockerfiles.py SOURCE_DIR STAGING_DIR [BINARY...]

For each Dockerfile:
- stages: COPY --from names an earlier stage; every FROM after the first
  that names a stage refers to an earlier one; ARGs used in FROM are declared;
- COPY sources exist in the repository and pass the Dockerfile's own
  .dockerignore allowlist;
- the last stage runs as a numeric non-root USER, has a HEALTHCHECK and an
  exec-form ENTRYPOINT;
- Debian stages: every package named in `apt-get install` exists (apt-cache);
- writes, for each build stage, the files its COPY lines bring in under
  STAGING_DIR/<dockerfile>/<stage>/ (so that the test can run the stage's
  CMake configure on exactly those files) and its cmake -S/-B command's -D
  options to STAGING_DIR/<dockerfile>/<stage>.cmake-args;
- the runtime stages based on Debian: the packages installed there, with
  their dependencies (apt-cache depends --recurse), provide every shared
  library that the given BINARY files (built here) load, per `ldd` and
  `dpkg -S`. BINARY is NAME=PATH, NAME being the file the Dockerfile copies.
"""
import fnmatch
import os
import re
import shlex
import shutil
import subprocess
import sys

src, staging = sys.argv[1], sys.argv[2]
binaries = dict(b.split("=", 1) for b in sys.argv[3:])
problems = []
GLIBC_PACKAGES = {"libc6"}


def parse(path):
    """Instructions as (keyword, text), continuation lines joined, comments dropped."""
    instructions, current = [], ""
    for raw in open(path):
        line = raw.rstrip("\n")
        if not current and (line.strip().startswith("#") or not line.strip()):
            continue
        if line.strip().startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        keyword, _, rest = current.strip().partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
        current = ""
    return instructions


def apt_packages(run_text):
    packages = []
    for command in re.split(r"&&|;", run_text):
        words = shlex.split(command)
        if "apt-get" in words and "install" in words:
            for w in words[words.index("install") + 1:]:
                if not w.startswith("-"):
                    packages.append(w)
    return packages


def dockerignore_allows(ignore_file, path):
    if not os.path.exists(ignore_file):
        return True
    allowed = True
    for line in open(ignore_file):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").rstrip("/")
        if pattern == "**" or fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/"):
            allowed = negate
    return allowed


def closure(packages):
    out = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
                          "--no-breaks", "--no-replaces", "--no-enhances", "--no-pre-depends", *packages],
                         capture_output=True, text=True, check=True).stdout
    names = set(packages)
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("Depends:") or line.startswith("PreDepends:"):
            names.add(line.split(":", 1)[1].strip().strip("<>").split(":")[0])
        elif line and not line.startswith("|") and ":" not in line:
            names.add(line.strip("<>").split(":")[0])
    return names


def owning_packages(binary):
    libs = []
    for line in subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout.splitlines():
        m = re.match(r"\s*(\S+) => (/\S+)", line)
        if m:
            libs.append((m.group(1), os.path.realpath(m.group(2))))
    # One dpkg -S for all (a call per library takes minutes for LibTorch's hundreds).
    candidates = {}
    for soname, path in libs:
        alt = path.replace("/usr/lib/", "/lib/", 1) if path.startswith("/usr/lib/") else "/usr" + path
        candidates[soname] = (path, alt)  # /lib vs /usr/lib after the usr merge
    out = subprocess.run(["dpkg", "-S", *{p for pair in candidates.values() for p in pair}],
                         capture_output=True, text=True).stdout
    owner_of = {}
    for line in out.splitlines():
        packages, _, owned = line.partition(": ")
        owner_of[owned.strip()] = packages.split(",")[0].split(":")[0].strip()
    owners = {soname: owner_of.get(path) or owner_of.get(alt) for soname, (path, alt) in candidates.items()}
    return owners


for dockerfile in sorted(f for f in os.listdir(os.path.join(src, "deploy/docker")) if f.endswith(".Dockerfile")):
    path = os.path.join(src, "deploy/docker", dockerfile)
    label = f"deploy/docker/{dockerfile}"
    instructions = parse(path)
    ignore_file = path + ".dockerignore"
    args, stages, stage, base = set(), [], None, {}
    stage_instructions = {}
    for keyword, text in instructions:
        if keyword == "ARG" and stage is None:
            args.add(text.split("=")[0])
        elif keyword == "FROM":
            words = text.split()
            image = words[0]
            for used in re.findall(r"\$\{?(\w+)", image):
                if used not in args:
                    problems.append(f"{label}: FROM uses undeclared ARG {used}")
            stage = words[2] if len(words) >= 3 and words[1].upper() == "AS" else f"#{len(stages)}"
            stages.append(stage)
            base[stage] = image
            stage_instructions[stage] = []
        else:
            stage_instructions[stage].append((keyword, text))
    final = stages[-1]
    for st in stages:
        os.makedirs(os.path.join(staging, dockerfile, st), exist_ok=True)
        cmake_args = []
        for keyword, text in stage_instructions[st]:
            if keyword == "COPY":
                words = shlex.split(text)
                options = [w for w in words if w.startswith("--")]
                files = [w for w in words if not w.startswith("--")]
                sources, _ = files[:-1], files[-1]
                source_stage = next((o.split("=", 1)[1] for o in options if o.startswith("--from=")), None)
                if source_stage:
                    if source_stage not in stages[:stages.index(st)]:
                        problems.append(f"{label}: stage {st}: COPY --from={source_stage} is not an earlier stage")
                    continue
                for s in sources:
                    matches = [m for m in [s] if os.path.exists(os.path.join(src, s))]
                    if not matches:
                        problems.append(f"{label}: stage {st}: COPY source {s} does not exist")
                        continue
                    if not dockerignore_allows(ignore_file, s.rstrip("/")):
                        problems.append(f"{label}: stage {st}: COPY source {s} is excluded by {os.path.basename(ignore_file)}")
                    target = os.path.join(staging, dockerfile, st, s)
                    if os.path.isdir(os.path.join(src, s)):
                        shutil.copytree(os.path.join(src, s), target, dirs_exist_ok=True,
                                        ignore=shutil.ignore_patterns("build*", "node_modules"))
                    else:
                        os.makedirs(os.path.dirname(target), exist_ok=True)
                        shutil.copy2(os.path.join(src, s), target)
            if keyword == "RUN":
                m = re.search(r"cmake -S \. -B \S+ (.*?)(&&|$)", text)
                if m:
                    cmake_args = [a for a in shlex.split(m.group(1)) if a.startswith("-D")]
                if base[st].startswith("${DEBIAN_IMAGE}") or "debian" in base[st]:
                    wanted = apt_packages(text)
                    out = subprocess.run(["apt-cache", "show", "--no-all-versions", *wanted],
                                         capture_output=True, text=True).stdout
                    known = set(re.findall(r"^Package: (\S+)$", out, re.M))
                    for package in wanted:
                        if package not in known:
                            problems.append(f"{label}: stage {st}: no Debian package {package}")
        with open(os.path.join(staging, dockerfile, st + ".cmake-args"), "w") as f:
            f.write("\n".join(cmake_args) + "\n")

    keywords = [k for k, _ in stage_instructions[final]]
    user = [t for k, t in stage_instructions[final] if k == "USER"]
    if not user or not re.fullmatch(r"[1-9]\d*(:[1-9]\d*)?", user[-1]):
        problems.append(f"{label}: the final stage must set a numeric non-root USER (got {user})")
    if "HEALTHCHECK" not in keywords:
        problems.append(f"{label}: the final stage has no HEALTHCHECK")
    entry = [t for k, t in stage_instructions[final] if k == "ENTRYPOINT"]
    if not entry or not entry[-1].startswith("["):
        problems.append(f"{label}: the final stage needs an exec-form ENTRYPOINT (SIGTERM must reach the program)")

    # Runtime libraries of a Debian final stage.
    if "DEBIAN_IMAGE" in base[final] or "debian" in base[final]:
        installed = [p for k, t in stage_instructions[final] if k == "RUN" for p in apt_packages(t)]
        provided = closure(installed) | GLIBC_PACKAGES
        copied = set()
        for k, t in stage_instructions[final]:
            if k == "COPY" and "--from=" in t:
                copied.add(shlex.split(t)[-2].rstrip("/"))
        checked = []
        for name, binary in binaries.items():
            # The binary is in the image when its build stage installs it where the final stage copies from.
            stage_texts = " ".join(t for s in stages[:-1] for k, t in stage_instructions[s] if k == "RUN")
            if not re.search(rf"/build/\S+/{re.escape(name)}(?![\w-])", stage_texts):
                continue
            for soname, owner in owning_packages(binary).items():
                if owner is None:
                    problems.append(f"{label}: {name} loads {soname}, which no Debian package owns")
                elif owner not in provided:
                    problems.append(f"{label}: {name} loads {soname} from {owner}, "
                                    f"which the final stage's packages do not bring")
            checked.append(name)
        print(f"{label}: runtime libraries of {', '.join(checked) or 'nothing built here'} "
              f"covered by {len(installed)} packages ({len(provided)} with dependencies)")
    print(f"{label}: stages {' -> '.join(stages)}")

for p in problems:
    print("FAIL:", p)
sys.exit(1 if problems else 0)
