#!/usr/bin/python3
"""The tabular benchmark rebased: the same recorded trials, a baseline far from the front.

On tests/bench/tables/fmnist_backbones.json.gz the front lies in the
baseline's neighbourhood: the space lists the baseline's choice (or the
narrowest width) first in each dimension, so the grid's order visits the
front's configurations among its first 10%. This script derives, from the
recorded trials only (nothing is trained again), a variant whose baseline is
a recorded configuration far from the front:

1. Each configuration's objective means over its completed seeds, the
   feasible ones (constraint means), and the front by pairwise dominance, as
   tests/bench/tabular_front.py computes them.
2. The new baseline B: of the feasible configurations with every seed
   completed and each numeric choice at an end of its list, the one
   farthest from the front: the largest Hamming distance (dimensions that
   differ) to the nearest front configuration, then the largest summed
   distance to all of them; ties go to the earlier one in the table's (the
   grid's) order. --baseline KEY names B instead.
3. The space: the baseline's arch with B's choices written into it (every
   dimension here sets a field outright, so each configuration's trial spec
   is unchanged: --replay checks that), and each dimension's choices listed
   with B's first, the others in their old order (a numeric dimension whose
   B is its last choice is reversed, so it stays ordinal for nsga2, tpe and
   Optuna; one whose B is a middle choice, possible only with --baseline,
   keeps its order). The grid's order therefore starts at B and walks its
   neighbourhood, as the original's starts at its baseline.
4. The trials: B's trials become the baseline's ("{}"); the original
   baseline's trials are dropped (its arch, kernel 0 = the block's default,
   is no configuration of the space); every other trial is kept as
   recorded, under its own configuration key. The table also records
   "baseline_config" (B's key, for tests/bench/tabular_optuna.py, whose
   samplers may ask for it) and "derived_from".

With --original-order FILE it also writes a `strategy_replay table
--sequences` file holding the original table's grid order (less B), so the
old listing's order can be scored against the new baseline.

    /usr/bin/python3 tests/bench/tabular_rebase.py --replay build/tests/bench/strategy_replay

writes tests/bench/tables/fmnist_backbones_far.json.gz (--out).

The output is deterministic (gzip without a timestamp, nothing of --out in it):
tests/bench/tabular_far_check.sh (ctest bench.tabular_far) writes it again and
compares it with the committed one byte for byte.
"""
import argparse
import copy
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile

import yaml

from tabular_front import front_of, means_of  # the table read apart from Frontier, as bench.tabular_front does
import bench_main  # tests/bench/bench_main.py: the tool's error exit

HERE = os.path.dirname(os.path.abspath(__file__))

# The shorthand dimension names (search_spaces/space_dimensions.cc) of this
# table's space and the arch fields they set; other names are field paths.
SHORTHANDS = {
    "stem": "stem.kind",
    "block": "stages[*].block",
    "kernel": "stages[*].kernel",
    "depth": "stages[*].depth",
    "attention": "stages[*].attention.kind",
    "width_mult": "width_mult",
    "depth_mult": "depth_mult",
    "norm": "norm",
    "activation": "activation",
}


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def set_path(arch, path, choice):
    """Sets an arch field path such as stages[*].block or stages[1].attention.kind."""
    nodes = [arch]
    parts = path.split(".")
    for i, part in enumerate(parts):
        key, index = part, None
        if part.endswith("]"):
            key, index = part[:-1].split("[")
        last = i == len(parts) - 1
        following = []
        for node in nodes:
            if index is None:
                if last:
                    node[key] = choice
                else:
                    following.append(node.setdefault(key, {}))
            else:
                items = node[key] if index == "*" else [node[key][int(index)]]
                if last:
                    raise SystemExit(f"{path}: a list element cannot be a choice here")
                following.extend(items)
        nodes = following


def rebased_space(space, base):
    """The space with `base`'s choices written into the baseline's arch and listed first."""
    out = copy.deepcopy(space)
    arch = out["baseline"]["arch"]
    dims = {}
    for name, choices in space["space"].items():
        path = SHORTHANDS.get(name, name)
        if path.startswith("arch."):
            path = path[len("arch."):]
        if path.startswith(("runtime.", "task.")):
            raise SystemExit(f"dimension {name}: only arch dimensions are rebased")
        set_path(arch, path, base[name])
        b = choices.index(base[name])
        if all(is_number(c) for c in choices):
            # Numeric: kept monotonic (ordinal), reversed when B is the last choice.
            listed = list(reversed(choices)) if b == len(choices) - 1 else list(choices)
        else:
            listed = [choices[b]] + [c for i, c in enumerate(choices) if i != b]
        dims[name] = listed
    out["space"] = dims
    return out


def pick_baseline(space, means, complete, front, feasible, order):
    dims = list(space["space"])
    front_configs = [json.loads(k) for k in front]
    best, best_score = None, None
    for key in order:
        if key == "{}" or key not in complete or key not in feasible:
            continue
        c = json.loads(key)
        if any(all(is_number(x) for x in space["space"][d]) and space["space"][d].index(c[d]) not in
               (0, len(space["space"][d]) - 1) for d in dims):
            continue  # a numeric choice in the middle of its list could not be listed first
        distances = [sum(c[d] != f[d] for d in dims) for f in front_configs]
        score = (min(distances), sum(distances))
        if best_score is None or score > best_score:  # ties keep the earlier key
            best, best_score = key, score
    return best, best_score


def specs(replay, space_text, folder):
    path = os.path.join(folder, "space.yaml")
    with open(path, "w") as f:
        f.write(space_text)
    out = os.path.join(folder, "specs")
    os.makedirs(out)
    subprocess.run([replay, "specs", path, out], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "index.json")) as f:
        index = json.load(f)
    result = {}
    for e in index:
        with open(os.path.join(out, e["file"])) as f:
            spec = json.load(f)
        spec.pop("trial_id", None)
        result[(e["config"], e["seed"])] = spec
    return result


def check_specs(replay, old_text, new_text, base_key):
    """Every trial the derived space runs has the spec the table's trial of that configuration ran."""
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        old, new = specs(replay, old_text, a), specs(replay, new_text, b)
    for (config, seed), spec in new.items():
        source = base_key if config == "{}" else config
        if old.get((source, seed)) != spec:
            raise SystemExit(f"the derived space's trial {config} seed {seed} is not the recorded {source}'s")
    missing = {k for k in old if k[0] not in ("{}", base_key)} - set(new)
    if missing:
        raise SystemExit(f"the derived space lacks {len(missing)} recorded trials, e.g. {sorted(missing)[0]}")
    return len(new)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", default=os.path.join(HERE, "tables", "fmnist_backbones.json.gz"))
    parser.add_argument("--out", default=os.path.join(HERE, "tables", "fmnist_backbones_far.json.gz"))
    parser.add_argument("--baseline", help="the new baseline's configuration key (default: the rule above)")
    parser.add_argument("--replay", help="strategy_replay, to check every trial spec against the table's")
    parser.add_argument("--original-order", help="write the original grid order as a --sequences file here")
    args = parser.parse_args()

    with open(args.table, "rb") as f:
        raw = f.read()
    doc = json.loads(gzip.decompress(raw))
    space = yaml.safe_load(doc["space"])
    means, complete = means_of(doc, space)
    front, feasible = front_of(means, space)
    order = list(dict.fromkeys(t["config"] for t in doc["trials"]))
    if args.baseline:
        base_key, score = args.baseline, None
        if base_key not in complete or base_key not in feasible:
            raise SystemExit(f"{base_key}: not a feasible configuration with every seed completed")
    else:
        base_key, score = pick_baseline(space, means, complete, front, feasible, order)
    base = json.loads(base_key)
    new_space = rebased_space(space, base)
    rule = ("the feasible, fully completed configuration farthest from the front (Hamming distance to the "
            "nearest front configuration, then summed over the front; numeric choices at an end of their list; "
            "ties to the earlier in grid order)") if not args.baseline else "named with --baseline"
    header = (
        "# The tabular benchmark rebased (tests/bench/tabular_rebase.py): the trials of\n"
        f"# {os.path.basename(args.table)} with the baseline moved to a recorded configuration\n"
        "# far from the front, " + base_key + ",\n"
        "# its choices written into the baseline's arch and listed first in each dimension.\n"
        "# Every other configuration's trial spec is the recorded one's.\n")
    new_text = header + yaml.safe_dump(new_space, sort_keys=False, default_flow_style=None, width=100)
    if yaml.safe_load(new_text) != new_space:
        raise SystemExit("the derived space does not read back as written")
    checked = check_specs(args.replay, doc["space"], new_text, base_key) if args.replay else None

    trials = []
    for t in doc["trials"]:
        if t["config"] == "{}":
            continue
        trials.append(dict(t, config="{}") if t["config"] == base_key else t)
    trials.sort(key=lambda t: t["config"] != "{}")  # the baseline first, as the table's grid order has it
    derived = {k: v for k, v in doc.items() if k not in ("space", "trials")}
    derived["space"] = new_text
    derived["baseline_config"] = base_key
    derived["derived_from"] = {
        "table": os.path.basename(args.table),
        "sha256": hashlib.sha256(raw).hexdigest(),
        "baseline": base_key,
        "rule": rule,
        # What decides the output (not --out, --replay or --original-order), so that it does not
        # depend on where it is written.
        "command": " ".join(["tests/bench/tabular_rebase.py"] + (["--baseline", base_key] if args.baseline else [])),
    }
    derived["trials"] = trials
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as f:
        f.write(json.dumps(derived, separators=(",", ":")).encode())
    with open(args.out, "wb") as f:
        f.write(buffer.getvalue())

    if args.original_order:
        with open(args.original_order, "w") as f:
            json.dump({"name": "grid (the original listing's order)",
                       "sequences": [[k for k in order if k not in ("{}", base_key)]]}, f)

    fb = means[base_key]
    print(f"front of {len(front)} in {os.path.basename(args.table)}; new baseline {base_key}"
          + (f" (distance {score[0]} to the nearest front configuration, {score[1]} summed)" if score else "")
          + ", means " + ", ".join(f"{m} {v:.4g}" for m, v in fb.items()))
    print("choices listed: " + "; ".join(f"{n}: {c}" for n, c in new_space["space"].items()))
    if checked is not None:
        print(f"{checked} trial specs of the derived space equal the recorded ones")
    print(f"{len(trials)} trials, {len(set(t['config'] for t in trials))} configurations"
          f" -> {os.path.relpath(args.out)}")
    return 0


if __name__ == "__main__":
    bench_main.run(main)
