#!/usr/bin/python3
"""frontier-llm-proposer over the tabular benchmark's table, beside Frontier's strategies.

The LLM proposer's own code (proposers/llm/llm_proposer.py: LlmProposer.propose,
proposal_prompt.py's prompt, schema and parse_answer, chat_client.py's HTTP
client) runs in this process against a local fake OpenAI-compatible
chat-completions server whose "model" is a script: a heuristic that reads only
the messages it is sent over HTTP (never the table) and follows the prompt's
instructions. It parses the dimensions and their choices, the objectives, the
constraints and the table of measured configurations out of the prompt,
takes as the front either the feasible non-dominated rows on the named
objectives that it finds itself (--front own; the baseline's row too when the
prompt lists one) or the rows the prompt marks front (--front marked; both by
default, two sequences), and proposes untried configurations that change one
dimension of a front row (chosen at random among the front rows and their
neighbours, seeded); when no such neighbour is left, two dimensions; then any
untried combination of the listed choices. It answers in the JSON the prompt
asks for.
So this measures the prompt, the schema, the HTTP call and the answer parsing
end to end, and what a model that does exactly what the prompt says would
find; it is not a language model, and says nothing of how a real one would do.

The coordinator is simulated as frontier's `external` strategy drives a
proposer (server/search/external.cc, the requests as
server/proposer/proposer_conversion.cc builds them): --batch proposals in
flight (default 4, the strategy's), --workers simulated workers (default 2, as
strategy_replay's) running the trials of the baseline and of each accepted
proposal (each configuration at both of the table's seeds, its step time from
the table) in order; a configuration is told once its seeds ended, with the
mean over its completed seeds of val_accuracy, throughput (samples/s) and
peak_memory_mb (MB), its status, violation, seeds and failure reason; the
first call comes before the baseline has ended; max_configs (the strategy's
`trials`) is the budget: --share of the grid's configurations, the baseline
counted, as tabular_optuna.py stops. The order of the accepted proposals is
written as a `--sequences` file and scored by `strategy_replay table` beside
Frontier's strategies, at the same seeds.

Also reported: the prompt's size per model call (characters of the messages
sent, and tokens as the fake server counts them: an ESTIMATE, ceil(chars / 4),
no tokenizer), and how it grows with the rows of the prompt's table.

    /usr/bin/python3 tests/bench/tabular_llm.py --replay build/tests/bench/strategy_replay --seeds 20
"""
import argparse
import gzip
import itertools
import json
import math
import multiprocessing
import os
import random
import re
import shlex
import statistics
import subprocess
import sys
from collections import deque

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "proposers"))
from llm_standin import StandIn  # noqa: E402  (the tests' stand-in chat server)
from tabular_optuna import config_key  # noqa: E402  (the table's configuration keys, one rule)
import bench_main  # noqa: E402  (tests/bench/bench_main.py: the tool's error exit)
NAMES = {"own": "llm proposer + scripted model (its own front)",
         "marked": "llm proposer + scripted model (the prompt's front marks)"}


def load(table_path):
    """The table's space (the YAML as a mapping) and its trials: {config key: {seed: result}}."""
    with gzip.open(table_path, "rt") as f:
        doc = json.load(f)
    space = yaml.safe_load(doc["space"])
    trials = {}
    for t in doc["trials"]:
        trials.setdefault(t["config"], {})[t["seed"]] = t["result"]
    return space, trials


# --- the scripted model: reads the prompt, nothing else --------------------------------------------------------

def _choices(text):
    """The choices of a dimension line's "Choices: ..." part: each a JSON value, maybe ' = note' and
    ' [baseline]' after it, '; '-separated (a piece that is no choice belongs to the note before it)."""
    decoder, out = json.JSONDecoder(), []
    for piece in text.split("; "):
        try:
            value, end = decoder.raw_decode(piece)
        except json.JSONDecodeError:
            continue
        rest = piece[end:]
        if rest == "" or rest.startswith(" = ") or rest.startswith(" [baseline]"):
            out.append(value)
    return out


def _number(text):
    try:
        return float(text)
    except ValueError:
        return None


def read_prompt(text):
    """What the prompt tells: how many to propose, the dimensions and their choices, the objectives, the
    constraints and the table's rows [(label, values (None for '?'), {metric: value}, outcome text)]."""
    m = re.search(r"propose (\d+) new configuration", text)
    count = int(m.group(1)) if m else 1
    names, choices, objectives, constraints, rows, metrics = [], [], [], [], [], []
    section = None
    for line in text.split("\n"):
        if line.startswith("Dimensions ("):
            section = "dims"
            continue
        if line.startswith("Objectives: "):
            objectives = [(metric, goal == "maximize")
                          for goal, metric in re.findall(r"(maximize|minimize) (\S+) \(", line)]
            section = None
        elif line.startswith("Constraints ("):
            for part in line.split("): ", 1)[1].split(", "):
                c = re.match(r"(\S+)(?: >= (\S+))?(?: <= (\S+))?", part)
                constraints.append((c.group(1), _number(c.group(2) or "nan"), _number(c.group(3) or "nan")))
        elif line.startswith("Measured so far:") and "Columns: " in line:
            dims, _, rest = line.split("Columns: ", 1)[1].partition(" || ")
            metrics = [c.split(" (")[0] for c in rest.split(" | ")[:-1]]
            section = "table"
        elif section == "dims" and line.startswith("- ") and ". Choices: " in line:
            names.append(line[2:].split(": ", 1)[0])
            choices.append(_choices(line.split(". Choices: ", 1)[1]))
        elif section == "table" and line.startswith("- ") and " || " in line:
            label, _, rest = line[2:].partition(": ")
            left, _, right = rest.partition(" || ")
            cells = right.split(" | ")
            values = [None if v == "?" else json.loads(v) for v in left.split(" | ")]
            figures = {m: _number(v) for m, v in zip(metrics, cells)}
            rows.append((label, values, figures, " | ".join(cells[len(metrics):])))
        elif not line.strip():
            section = None if section == "dims" else section
    return count, names, choices, objectives, constraints, rows


def non_dominated(rows, objectives, constraints):
    """The rows measured, completed and feasible (the prompt's constraints) that no other such row dominates."""
    points = []
    for row in rows:
        _, _, figures, outcome = row
        if not outcome.startswith("completed") or "infeasible" in outcome:
            continue
        if any(figures.get(m) is None for m, _ in objectives):
            continue
        feasible = True
        for m, low, high in constraints:
            v = figures.get(m)
            feasible = feasible and v is not None and not (low == low and v < low) and not (high == high and v > high)
        if feasible:
            points.append((row, [figures[m] if up else -figures[m] for m, up in objectives]))
    return [r for r, p in points
            if not any(all(a >= b for a, b in zip(q, p)) and any(a > b for a, b in zip(q, p)) for _, q in points)]


class ScriptedModel:
    """Answers a chat-completions body by the prompt's "How to choose", with `seed` for its tie-breaks."""

    def __init__(self, seed, front="own"):
        self.rng = random.Random(seed)
        self.front = front  # own: the non-dominated rows it finds; marked: the rows the prompt marks front
        self.stats = {"one_change": 0, "two_changes": 0, "untried": 0, "front_differs_from_marked": 0,
                      "answers": 0, "unreadable_prompts": 0}

    def answer(self, body):
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        count, names, choices, objectives, constraints, rows = read_prompt(users[0])
        if not names or not all(choices) or not objectives:
            self.stats["unreadable_prompts"] += 1
            return "I cannot read the dimensions or the objectives of this prompt."
        if len(users) > 1:  # asked again after invalid answers: "Propose N more new configuration(s)"
            m = re.search(r"Propose (\d+) more", users[-1])
            count = int(m.group(1)) if m else count
        tried = {tuple(json.dumps(v) for v in values) for _, values, _, _ in rows}
        for m in body["messages"]:  # what it answered before in this conversation
            if m["role"] == "assistant":
                try:
                    for item in json.loads(m["content"])["configs"]:
                        tried.add(tuple(json.dumps(item["config"][n]) for n in names))
                except (ValueError, KeyError, TypeError):
                    pass
        front = non_dominated(rows, objectives, constraints)
        marked = [r for r in rows if ", front" in r[3]]
        if {r[0] for r in front} != {r[0] for r in marked}:
            self.stats["front_differs_from_marked"] += 1
        if self.front == "marked":
            front = marked
        if not front:  # nothing measured yet: start from the baseline's row (or any row)
            front = [r for r in rows if r[0] == "baseline"] or rows[:1]
        chosen = []

        def untried(values):
            return tuple(json.dumps(v) for v in values) not in tried | {tuple(json.dumps(v) for v in c)
                                                                         for c, _ in chosen}

        def neighbours(values, changes):
            """Complete configurations at most `changes` known dimensions away ('?' dimensions are free)."""
            free = [d for d, v in enumerate(values) if v is None]
            out = []
            for dims in itertools.combinations([d for d in range(len(names)) if d not in free], changes):
                options = [[c for c in choices[d] if c != values[d]] if d in dims else
                           (choices[d] if d in free else [values[d]]) for d in range(len(names))]
                out += [list(v) for v in itertools.product(*options)]
            if free and changes == 1:
                out += [list(v) for v in itertools.product(*[choices[d] if d in free else [values[d]]
                                                             for d in range(len(names))])]
            return out

        for changes, kind in ((1, "one_change"), (2, "two_changes")):
            order = front[:]
            self.rng.shuffle(order)
            progress = True
            while len(chosen) < count and progress:
                progress = False
                for label, values, _, _ in order:
                    options = [c for c in neighbours(values, changes) if untried(c)]
                    if options:
                        pick = self.rng.choice(options)
                        moved = [f"{n} {json.dumps(values[d]) if values[d] is not None else '?'} -> "
                                 f"{json.dumps(pick[d])}" for d, n in enumerate(names) if pick[d] != values[d]]
                        chosen.append((pick, f"{'; '.join(moved)} from front row {label}"))
                        self.stats[kind] += 1
                        progress = True
                    if len(chosen) >= count:
                        break
        while len(chosen) < count:  # choices not tried yet: any untried combination of the listed choices
            options = [list(v) for v in itertools.product(*choices) if untried(list(v))]
            if not options:
                break
            chosen.append((self.rng.choice(options), "an untried combination"))
            self.stats["untried"] += 1
        self.stats["answers"] += 1
        return json.dumps({"configs": [{"config": dict(zip(names, values)), "rationale": why}
                                       for values, why in chosen]})


class FakeChatServer(StandIn):
    """The stand-in chat server (tests/proposers/llm_standin.py) answering from a ScriptedModel; counts each
    request's prompt (characters of its messages, tokens estimated as ceil(chars / 4), which it reports as
    the usage) and the rows of the prompt's table."""

    def __init__(self, model):
        self.model = model
        self.calls = []
        super().__init__([{"call": self._answer}])

    def _answer(self, body):
        content = self.model.answer(body)
        chars = sum(len(m["content"]) for m in body["messages"])
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        self.calls.append({"chars": chars, "est_tokens": math.ceil(chars / 4),
                           "schema_chars": len(json.dumps(body.get("response_format", {}))),
                           "rows": len(read_prompt(users[0])[5]), "messages": len(body["messages"]),
                           "answer_chars": len(content)})
        tokens = {"prompt_tokens": math.ceil(chars / 4), "completion_tokens": math.ceil(len(content) / 4)}
        return {"content": content, "usage": {**tokens, "total_tokens": sum(tokens.values())}}


# --- the coordinator's side, simulated ---------------------------------------------------------------------------

def baseline_values(space):
    """The baseline's value of each dimension of this table's space, None where it is none of the choices
    (as server/search/external.cc's BaselineIndex finds it: the baseline's kernel is 0, the block family's
    default, so no kernel choice is the baseline's)."""
    arch = space["baseline"]["arch"]
    stages = arch["stages"]

    def every(field, default):
        values = [s.get(field, default) for s in stages]
        return values[0] if all(v == values[0] for v in values) else None
    known = {"stem": arch.get("stem", {}).get("kind", "conv3x3"), "block": every("block", "basic"),
             "width_mult": arch.get("width_mult", 1.0), "depth": every("depth", 1), "kernel": every("kernel", 0),
             "stages[1].attention.kind": stages[1].get("attention", {}).get("kind", "none")}
    out = {}
    for name, choices in space["space"].items():
        if name not in known:
            raise SystemExit(f"tabular_llm.py does not know the baseline's value of dimension {name}")
        out[name] = known[name] if known[name] in choices else None
    return out


def outcome_of(pb, space_dims, base, key, results, constraints):
    """A configuration's ProposerOutcome as proposer_conversion.cc's ToProposerOutcome builds it."""
    o = pb.ProposerOutcome()
    config = json.loads(key)
    names = list(space_dims)
    for name in names:
        value = config.get(name, base[name])
        if value is not None:
            o.config.choices[name] = space_dims[name].index(value)
    done = [r for r in results.values() if r.get("status", "completed") == "completed"]
    statuses = [r.get("status", "completed") for r in results.values()]
    o.status = "completed" if done else max(set(statuses), key=statuses.count)
    reasons = sorted({(r.get("status") + (": " + r["error"][:500] if r.get("error") else ""))
                      for r in results.values() if r.get("status", "completed") != "completed"})
    o.reason = "; ".join(reasons)
    o.seeds, o.seeds_completed = len(results), len(done)
    if done:
        o.metrics["val_accuracy"] = sum(r["val_accuracy"] for r in done) / len(done)
        o.metrics["throughput"] = sum(r["throughput"]["samples_per_s"] for r in done) / len(done)
        o.metrics["peak_memory_mb"] = sum(r["peak_memory_mb"] for r in done) / len(done)
        violation = 0.0
        for c in constraints:
            v, scale = o.metrics[c["metric"]], lambda b: abs(b) if b else 1.0
            if "max" in c and v > c["max"]:
                violation += (v - c["max"]) / scale(c["max"])
            if "min" in c and v < c["min"]:
                violation += (c["min"] - v) / scale(c["min"])
        o.violation = violation
    else:
        o.violation = math.inf
    return o


def run(job):
    seed, table_path, share, batch, workers, proto, mode = job
    os.environ["FRONTIER_PROTO_PYTHON"] = proto
    for path in (os.path.join(ROOT, "proposers", "llm"), os.path.join(ROOT, "proposers")):
        if path not in sys.path:
            sys.path.insert(0, path)
    import frontier_proposer as fp
    import llm_proposer
    pb = fp.proposer_pb2
    space, trials = load(table_path)
    dims = space["space"]
    names = list(dims)
    base = baseline_values(space)
    constraints = space.get("constraints", [])
    target = math.ceil(share * len(trials))  # configurations, the baseline counted (strategy_replay's budgets)
    max_configs = target - 1
    units = {"val_accuracy": "", "throughput": "samples/s", "peak_memory_mb": "MB"}  # the metric catalog's

    def request_template():
        r = pb.ProposeRequest(experiment_id=f"tabular-llm-{seed}", experiment_name=space["name"],
                              repeats=space["repeats"], steps=space["task"]["steps"], seed=seed,
                              max_configs=max_configs)
        size = 1
        for name, choices in dims.items():
            size *= len(choices)
            numbers = all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in choices)
            ordinal = numbers and len(choices) > 1 and (all(a < b for a, b in zip(choices, choices[1:])) or
                                                        all(a > b for a, b in zip(choices, choices[1:])))
            value = base[name]
            r.dimensions.add(name=name, choices_json=[json.dumps(c) for c in choices], ordinal=ordinal,
                             baseline_index=-1 if value is None else choices.index(value))
        in_grid = all(v is not None for v in base.values())
        r.space_size = size - (1 if in_grid else 0)
        for o in space["objectives"]:
            r.objectives.add(metric=o["metric"], maximize=o["goal"] == "maximize", unit=units.get(o["metric"], ""))
        for c in constraints:
            r.constraints.add(metric=c["metric"], has_min="min" in c, min=c.get("min", 0), has_max="max" in c,
                              max=c.get("max", 0), unit=units.get(c["metric"], ""))
        return r

    template = request_template()
    model = ScriptedModel(seed, mode)
    proposals = []  # [key, rationale, outcome or None]
    index = {}
    rejections, baseline_outcome = [], None
    results = {}  # key -> {seed: result} ended so far
    queue, running, now = deque(), [], 0.0
    seeds_of = {k: sorted(v) for k, v in trials.items()}
    for s in seeds_of["{}"]:
        queue.append(("{}", s))
    calls, failures = [], 0

    with FakeChatServer(model) as server:
        proposer = llm_proposer.LlmProposer(server.url, "scripted-heuristic", "", timeout_s=30.0, retries=3)

        def maybe_call():
            nonlocal rejections, failures
            while len(proposals) < max_configs:
                outstanding = sum(1 for p in proposals if p[2] is None)
                wanted = min(batch - outstanding, max_configs - len(proposals))
                if wanted <= 0:
                    return
                r = pb.ProposeRequest()
                r.CopyFrom(template)
                r.count = wanted
                if baseline_outcome is not None:
                    r.baseline.CopyFrom(baseline_outcome)
                for key, rationale, outcome in proposals:
                    if outcome is not None:
                        o = r.outcomes.add()
                        o.CopyFrom(outcome)
                        o.proposer, o.rationale = "llm:scripted-heuristic", rationale
                    else:
                        p = r.pending.add()
                        for name, value in json.loads(key).items():
                            p.choices[name] = dims[name].index(value)
                for config, reason in rejections:
                    r.rejections.add(config=config, reason=reason)
                before = len(server.calls)
                response = proposer.propose(r)
                calls.append({"told": len(r.outcomes), "pending": len(r.pending), "count": wanted,
                              "model_calls": response.usage.model_calls,
                              "prompt_tokens": response.usage.prompt_tokens,
                              "prompt_bytes": proposer.last_prompt_bytes,
                              "http": server.calls[before:]})
                rejections = []
                accepted = 0
                for c in response.configs:  # the coordinator's CheckProposal, for this space
                    config = {}
                    for d, name in enumerate(names):
                        if name in c.config.choices:
                            config[name] = dims[name][c.config.choices[name]]
                        elif base[name] is not None:
                            config[name] = base[name]
                    key = config_key(config)
                    if len(config) < len(names):
                        rejections.append((c.config, "a dimension not set (the baseline's value is none of its "
                                                     "choices)"))
                    elif key in index or accepted >= wanted:
                        rejections.append((c.config, "proposed before" if key in index else "beyond the count"))
                    elif key not in trials:
                        raise SystemExit(f"the table has no configuration {key}")
                    else:
                        index[key] = len(proposals)
                        proposals.append([key, c.rationale, None])
                        queue.extend((key, s) for s in seeds_of[key])
                        accepted += 1
                if not accepted:
                    failures += 1
                    if failures > 5 or response.finished:
                        raise SystemExit(f"seed {seed}: the proposer answered nothing usable "
                                         f"({response.error or 'finished' if response.finished else ''})")

        while len(proposals) < max_configs:
            maybe_call()
            while len(running) < workers and queue:
                key, s = queue.popleft()
                running.append((now + trials[key][s].get("train_time_s", 0.0), key, s))
            if not running or len(proposals) >= max_configs:
                break
            running.sort()
            now, key, s = running.pop(0)
            results.setdefault(key, {})[s] = trials[key][s]
            if len(results[key]) == len(seeds_of[key]):
                outcome = outcome_of(pb, dims, base, key, results[key], constraints)
                if key == "{}":
                    baseline_outcome = outcome
                else:
                    proposals[index[key]][2] = outcome
    return seed, [p[0] for p in proposals], calls, model.stats


def quantiles(values):
    values = sorted(values)
    return values[0], statistics.median(values), values[-1]


def summarize(runs):
    """The prompt's size per model call (characters; tokens estimated) and how it grows with the table's rows."""
    http = [h for _, _, calls, _ in runs for c in calls for h in c["http"]]
    first = [h for h in http if h["messages"] == 2]  # the first ask of a call (retries carry more messages)
    lines = [f"model calls: {len(http)} over {len(runs)} runs ({len(http) - len(first)} asked again after "
             f"invalid answers); proposer calls: {sum(len(c) for _, _, c, _ in runs)}"]
    for label, field in (("prompt characters (system + user messages)", "chars"),
                         ("prompt tokens, ESTIMATED as ceil(chars / 4), no tokenizer", "est_tokens"),
                         ("JSON schema sent as response_format, characters", "schema_chars"),
                         ("answer characters", "answer_chars")):
        lo, med, hi = quantiles([h[field] for h in http])
        lines.append(f"{label}: min {lo:.0f}, median {med:.0f}, max {hi:.0f} per call")
    xs, ys = [h["rows"] for h in first], [h["chars"] for h in first]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    lines.append(f"growth: chars ~= {my - slope * mx:.0f} + {slope:.1f} x rows of the table (least squares over "
                 f"the first asks; rows: those the prompt's table lists, configurations told or running and the "
                 f"baseline's when it is listed)")
    by_rows = {}
    for h in first:
        by_rows.setdefault(h["rows"], []).append(h["chars"])
    marks = [r for r in (1, 5, 25, 50, 100, 150) if r in by_rows] + [max(by_rows)]
    lines.append("chars at rows: " + ", ".join(f"{r}: {statistics.median(by_rows[r]):.0f} "
                                               f"(~{math.ceil(statistics.median(by_rows[r]) / 4)} est. tokens)"
                                               for r in sorted(set(marks))))
    per_run = [sum(h["est_tokens"] for c in calls for h in c["http"]) for _, _, calls, _ in runs]
    lines.append(f"estimated prompt tokens per run (all calls): mean {statistics.mean(per_run):.0f}, "
                 f"min {min(per_run)}, max {max(per_run)}")
    stats = {k: sum(r[3][k] for r in runs) for k in runs[0][3]}
    lines.append("scripted model: " + ", ".join(f"{k} {v}" for k, v in stats.items()))
    return lines, {"model_calls": len(http), "per_call": http, "per_run_est_tokens": per_run, "model": stats,
                   "growth_chars_per_row": slope, "growth_intercept_chars": my - slope * mx}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replay", default="build/tests/bench/strategy_replay")
    parser.add_argument("--no-replay", action="store_true", help="write the sequences and the prompt sizes only")
    parser.add_argument("--table", default=os.path.join(HERE, "tables", "fmnist_backbones.json.gz"))
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--share", type=float, default=0.5, help="stop after this share of the grid's configurations")
    parser.add_argument("--batch", type=int, default=4, help="proposals in flight (the external strategy's batch)")
    parser.add_argument("--workers", type=int, default=2, help="simulated workers")
    parser.add_argument("--front", choices=["own", "marked", "both"], default="both",
                        help="what the scripted model takes as the front: the non-dominated rows it finds "
                             "(own), the rows the prompt marks front (marked), or a run of each (both)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--proto-python", default=os.environ.get("FRONTIER_PROTO_PYTHON", ""),
                        help="folder holding frontier/v1/proposer_pb2.py (default: build/python or "
                             "build-unity/python)")
    parser.add_argument("--out", default="runs/tabular-llm", help="where the sequences are written")
    parser.add_argument("--strategies", default="{name: random};{name: tpe, trials: 170}",
                        help="Frontier's strategies replayed beside it, at the same seeds")
    parser.add_argument("--json", default="", help="also write the prompt sizes and the sequences here")
    parser.add_argument("--replay-args", default="", help="more arguments for strategy_replay table")
    args = parser.parse_args()
    proto = args.proto_python or next(
        (p for p in (os.path.join(ROOT, "build", "python"), os.path.join(ROOT, "build-unity", "python"))
         if os.path.exists(os.path.join(p, "frontier", "v1", "proposer_pb2.py"))), "")
    if not proto:
        raise SystemExit("no generated stubs: build the frontier_proposer_python target and pass --proto-python")
    os.environ["no_proxy"] = os.environ["NO_PROXY"] = "127.0.0.1,localhost"
    os.makedirs(args.out, exist_ok=True)
    modes = ["own", "marked"] if args.front == "both" else [args.front]
    jobs = [(seed, args.table, args.share, args.batch, args.workers, os.path.abspath(proto), mode)
            for mode in modes for seed in range(args.seeds)]
    with multiprocessing.Pool(args.jobs) as pool:
        results = pool.map(run, jobs)
    files, report = [], {"seeds": args.seeds, "share": args.share, "batch": args.batch, "workers": args.workers}
    for n, mode in enumerate(modes):
        runs = results[n * args.seeds:(n + 1) * args.seeds]
        name = NAMES[mode]
        path = os.path.join(args.out, f"llm-scripted-{mode}.json")
        with open(path, "w") as f:
            json.dump({"name": name, "sequences": [seq for _, seq, _, _ in runs]}, f)
        files.append(path)
        lines, figures = summarize(runs)
        print(f"{name}: {args.seeds} seeds, {len(runs[0][1])} configurations proposed each (+ the baseline), "
              f"batch {args.batch}, {args.workers} simulated workers; sequences in {path}")
        for line in lines:
            print("  " + line)
        print(flush=True)
        report[mode] = {"name": name, "sequences_file": path, **figures,
                        "sequences": [seq for _, seq, _, _ in runs]}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f)
    if args.no_replay:
        return 0
    command = [args.replay, "table", args.table, "--strategies", args.strategies, "--seeds", str(args.seeds)]
    command += shlex.split(args.replay_args)
    for path in files:
        command += ["--sequences", path]
    print("$ " + " ".join(shlex.quote(c) for c in command), flush=True)
    return subprocess.run(command).returncode


if __name__ == "__main__":
    bench_main.run(main)
