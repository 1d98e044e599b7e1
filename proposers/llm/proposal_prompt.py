"""What frontier-llm-proposer tells the model and how it reads the answer
(docs/proposers.md).

The prompt: the task and the remaining budget; every dimension described from
docs/trial-spec.md and docs/search-space.md (what it sets, what each choice
does and what it costs); the objectives and constraints with their units;
one table of every configuration measured or running, the baseline first,
each with its metrics and units (the front marked), the failures with their
reasons; the proposals the coordinator rejected last time; how to choose;
the answer's format. The JSON schema for structured output is strict-valid
(every object closed, every property required). The answer is read the way
models write it: reasoning blocks skipped, then the first JSON object (or
list) anywhere in the message, fenced or not, prose around it allowed.
"""

import json
import math
import re

from chat_client import fenced_blocks, strip_reasoning

MAX_ROWS = 300          # configurations listed in the table (the front and the newest when there are more)
MAX_REJECTIONS = 20     # rejections of the last answer listed
ANSWER_CAP = 256 * 1024  # characters of an answer searched for JSON
MAX_STARTS = 400        # places an answer's JSON may start at that are tried


def _where(name):
    """Which stages a dimension sets, for its description."""
    m = re.match(r"^(?:arch\.)?stages\[([^\]]*)\]\.", name)
    if m:
        return "every stage" if m.group(1) == "*" else f"stage {m.group(1)}"
    return "every stage" if name in ("block", "kernel", "depth", "attention") else "the network"


# Shorthands of docs/search-space.md, as the path they write.
SHORTHANDS = {"attention": "attention.kind", "block": "block", "kernel": "kernel", "depth": "depth",
              "stem": "stem.kind", "precision": "runtime.precision", "memory_format": "runtime.memory_format"}

# Each field a space commonly varies: (what it sets, {choice: what it does and what it costs}).
# From docs/trial-spec.md, docs/search-space.md, docs/bev.md and docs/plugins.md.
FIELDS = {
    "block": ("the block family of {where}", {
        "basic": "two 3x3 convs with a residual (ResNet basic): dense compute, moderate FLOPs",
        "bottleneck": "1x1 reduce, 3x3, 1x1 expand (ResNet bottleneck): fewer FLOPs at large widths, deeper",
        "convnext": "7x7 depthwise conv and an inverted MLP (ConvNeXt): wide context, more memory traffic",
        "mbconv": "inverted bottleneck with a depthwise conv (MobileNetV2/EfficientNet): few FLOPs, memory-bound",
        "fused_mbconv": "mbconv with its expansion and depthwise convs fused into one 3x3 conv: more FLOPs, "
                        "fewer memory passes, often faster than mbconv",
        "moe": "a mixture-of-experts MLP (top-k routing): more parameters at similar FLOPs, routing overhead"}),
    "stem.kind": ("how the input is first downsampled (the stem)", {
        "conv3x3": "3x3 convs, the first strided: best detail, costly at full resolution",
        "patchify": "one k x k conv of stride k (k = the stem's stride): cheapest, coarse",
        "resnet": "7x7 strided conv then a 3x3/2 max-pool: downsamples 4x more at once"}),
    "stem.width": ("channels after the stem: the first layers' cost grows with it", {}),
    "stem.stride": ("the stem's downsampling: larger is cheaper (fewer positions) and coarser (1-2 for 28x28 "
                    "inputs)", {}),
    "stem.depth": ("3x3 convs in a conv3x3 stem", {}),
    "width": ("channels of {where}: FLOPs and memory grow about quadratically", {}),
    "width_mult": ("scales every stage's width (round(width x m); not the stem): FLOPs about x m^2, more "
                   "capacity", {}),
    "depth": ("blocks in {where}: FLOPs, memory and step time grow about linearly", {}),
    "depth_mult": ("scales every stage's depth (ceil(depth x m))", {}),
    "kernel": ("the conv kernel size of {where} (odd): more context, FLOPs about x k^2", {}),
    "stride": ("the downsampling of {where} at its first block", {}),
    "expansion": ("the inner-width ratio of {where}'s bottleneck, convnext, mbconv and fused_mbconv blocks: more "
                  "capacity and FLOPs", {}),
    "se": ("squeeze-and-excitation in {where}'s mbconv and fused_mbconv blocks: small cost, often more accurate",
           {}),
    "attention.kind": ("the token mixer added after {where}'s blocks", {
        "none": "no attention: cheapest",
        "mhsa": "full multi-head self-attention: cost grows with the square of the positions, global context",
        "window": "attention within windows: cost grows with positions x window^2",
        "gqa": "grouped-query attention (fewer key/value heads): less memory than mhsa, similar quality",
        "linear": "linear attention: cost grows linearly with positions, usually weaker than mhsa"}),
    "attention.heads": ("attention heads in {where}", {}),
    "attention.window": ("the attention window of {where} (must divide the map)", {}),
    "attention.kv_heads": ("key/value heads of {where}'s gqa attention (must divide heads)", {}),
    "norm": ("the normalization layers", {
        "batch": "batch norm: the usual choice for convnets",
        "group": "group norm: independent of the batch, a little slower",
        "layer": "layer norm over channels",
        "none": "no normalization (convs get biases): cheapest, less stable"}),
    "activation": ("the activation function", {
        "relu": "cheapest", "gelu": "smooth, a little costlier", "silu": "smooth (swish), a little costlier"}),
    "dropout": ("dropout before the classifier: regularizes, costs nothing at inference", {}),
    "moe.experts": ("experts of {where}'s moe blocks: parameters grow linearly", {}),
    "moe.top_k": ("experts each token is routed to in {where}'s moe blocks: FLOPs grow linearly", {}),
    "runtime.precision": ("the numeric precision of training", {
        "fp32": "full precision: the default, always supported",
        "bf16": "bfloat16 autocast: faster where the hardware has bf16 units, much slower on CPUs without them",
        "fp16": "float16 autocast with loss scaling: CUDA only"}),
    "runtime.memory_format": ("the memory layout of activations and weights", {
        "contiguous": "NCHW, the default",
        "channels_last": "NHWC: often faster convolutions on GPUs and with oneDNN"}),
    "runtime.threads": ("CPU threads of the trial: more is faster until the cores run out", {}),
    "runtime.ranks": ("data-parallel ranks of one trial: more throughput, communication overhead", {}),
    "task.batch_size": ("samples per optimizer step: more throughput per step, fewer updates per sample", {}),
    "task.optimizer.lr": ("the learning rate", {}),
    "task.optimizer.name": ("the optimizer", {"sgd": "SGD with momentum", "adamw": "AdamW"}),
    "task.optimizer.weight_decay": ("weight decay (regularization)", {}),
    "task.optimizer.momentum": ("SGD's momentum", {}),
    "task.schedule.name": ("the learning-rate schedule", {"cosine": "cosine decay to min_lr",
                                                          "constant": "constant after the warm-up"}),
    "ops.attention_kernel": ("the kernel of the softmax attention kinds (mhsa, window, gqa)", {
        "naive": "the reference: materializes the score matrix (memory grows with positions^2)",
        "chunked": "blocked online softmax, never the full score matrix: less memory, same result"}),
    "bev.pooling": ("how the lifted camera features are pooled into the BEV grid", {
        "naive": "materializes the frustum then index_add: the reference, memory-heavy",
        "fused": "interval pooling of the materialized frustum: faster",
        "depth_fused": "BEVPoolv2-style pooling without the frustum (lss only): least memory"}),
    "bev.view_transform": ("how camera features become the bird's-eye view", {
        "lss": "lift-splat with a depth distribution: most accurate, most compute",
        "ipm": "inverse perspective mapping onto the ground: cheap, flat-world",
        "mean_lift": "features averaged along each ray: cheap"}),
    "bev.neck": ("the multi-scale neck between backbone and view transform", {
        "none": "no neck: cheapest", "fpn": "a feature pyramid", "bifpn": "a bidirectional pyramid: costliest"}),
}
FIELDS["ops.bev_pool"] = FIELDS["bev.pooling"]

# What each metric of the catalog measures (search_spaces/metric_catalog.cc); the unit comes in the request.
METRICS = {
    "val_accuracy": "accuracy on the validation split, a fraction 0..1",
    "val_loss": "loss on the validation split",
    "val_iou": "BEV occupancy IoU on the validation split, 0..1",
    "throughput": "training samples per second",
    "step_time_ms": "median training step time",
    "mfu": "model FLOP utilization, a fraction of the device's peak",
    "peak_memory_mb": "peak memory of the trial",
    "params": "parameters of the model",
    "flops": "training FLOPs per sample",
    "time_to_target_s": "training time until the quality target was reached",
    "latency_ms": "inference latency at the measured batch",
    "latency_b1_ms": "inference latency at batch 1",
}


def field_of(name):
    """A dimension's name as the key of FIELDS ("stages[1].attention.kind" -> "attention.kind")."""
    path = re.sub(r"^stages\[[^\]]*\]\.", "", re.sub(r"^arch\.", "", SHORTHANDS.get(name, name)))
    parts = path.split(".")
    for i in range(len(parts)):  # the longest known tail: "stem.kind", then "kind"
        if ".".join(parts[i:]) in FIELDS:
            return ".".join(parts[i:])
    return path


def values_text(space, indices):
    """The choices of a configuration's indices as JSON values ("?" where unset or out of range)."""
    out = []
    for d, i in enumerate(indices):
        ok = i is not None and 0 <= i < len(space.choices[d])
        out.append(json.dumps(space.choices[d][i]) if ok else "?")
    return out


def describe_dimension(name, choices, baseline_index):
    """One line: the dimension, what it sets, each choice with what it does and costs."""
    key = field_of(name)
    if name.startswith("params."):
        what, notes = f"the parameter {name[len('params.'):]} of the trial's own training program", {}
    elif key in FIELDS:
        what, notes = FIELDS[key]
        what = what.format(where=_where(name))
    else:
        what, notes = f"the trial-spec field {name} (docs/trial-spec.md)", {}
    parts = []
    for i, c in enumerate(choices):
        text = json.dumps(c)
        note = notes.get(c) if isinstance(c, str) else None
        if note is None and isinstance(c, dict) and isinstance(c.get("kind"), str):
            note = notes.get(c["kind"])
        if note is None and isinstance(c, str) and c.startswith("lab:"):
            note = "a variant the kernel lab kept (docs/kernel-lab.md)"
        text += f" = {note}" if note else ""
        parts.append(text + (" [baseline]" if i == baseline_index else ""))
    return f"- {name}: {what}. Choices: " + "; ".join(parts)


def unit_of(space, metric):
    return space.units.get(metric, "")


def fmt_value(value, unit):
    if value is None or not math.isfinite(value):
        return "-"
    text = f"{value:.4g}"
    return f"{text} {unit}" if unit else text


def front(space, outcomes):
    """The positions in `outcomes` of the feasible completed ones no other one dominates on the
    objectives. Positions, not the messages: a protobuf message's repeated field hands out a new
    Python wrapper at each access (the C++ implementation), so neither identity nor id() is stable."""
    points = []
    for i, o in enumerate(outcomes):
        if o.status != "completed" or o.violation > 0:
            continue
        values = [o.metrics.get(m) for m, _ in space.objectives]
        if any(v is None for v in values):
            continue
        points.append((i, [v if maximize else -v for v, (_, maximize) in zip(values, space.objectives)]))
    return {i for i, p in points
            if not any(all(a >= b for a, b in zip(q, p)) and any(a > b for a, b in zip(q, p)) for _, q in points)}


def _outcome_text(outcome, on_front):
    text = outcome.status
    if outcome.seeds and outcome.seeds_completed != outcome.seeds:
        text += f" ({outcome.seeds_completed} of {outcome.seeds} seeds completed)"
    if outcome.status == "completed" and outcome.violation > 0:
        text += ", infeasible" + (f" (constraint violation {outcome.violation:.3g})" if math.isfinite(outcome.violation)
                                  else " (constraints not measured)")
    if on_front:
        text += ", front"
    if outcome.reason:
        text += f": {' '.join(outcome.reason.split())[:200]}"
    return text


def metric_columns(space):
    names = [m for m, _ in space.objectives] + [m for m, _, _ in space.constraints
                                                if m not in [o for o, _ in space.objectives]]
    return names


def table(space, request):
    """The lines of the measured-so-far table: its header and one row per configuration."""
    metrics = metric_columns(space)
    header = " | ".join(space.names) + " || " + " | ".join(
        f"{m}" + (f" ({unit_of(space, m)})" if unit_of(space, m) else "") for m in metrics) + " | outcome"
    outcomes = list(request.outcomes)
    measured = outcomes + ([request.baseline] if request.HasField("baseline") else [])
    best = front(space, measured)  # the baseline competes too: a config it dominates is not on the front

    def row(label, indices, outcome=None, on_front=False):
        values = " | ".join(values_text(space, indices))
        if outcome is None:
            return f"- {label}: {values} || " + " | ".join("-" for _ in metrics) + " | not measured yet"
        figures = " | ".join(fmt_value(outcome.metrics.get(m), "") for m in metrics)
        return f"- {label}: {values} || {figures} | {_outcome_text(outcome, on_front)}"

    rows = []
    if space.baseline() is not None or request.HasField("baseline"):
        # A dimension whose baseline value is none of its choices (a block's default kernel, say) shows "?".
        indices = [i if i >= 0 else None for i in space.baseline_index]
        rows.append(row("baseline", indices, request.baseline if request.HasField("baseline") else None,
                        request.HasField("baseline") and len(outcomes) in best))
    told = [(n + 1, o) for n, o in enumerate(outcomes)]  # row #n is outcomes[n - 1]
    left_out = 0
    if len(told) + len(request.pending) > MAX_ROWS:
        keep = MAX_ROWS - min(len(request.pending), MAX_ROWS // 3)
        on_front = [t for t in told if t[0] - 1 in best]
        newest = [t for t in told if t[0] - 1 not in best][-max(0, keep - len(on_front)):]
        kept = {n for n, _ in on_front + newest}
        left_out = len(told) - len(kept)
        told = [t for t in told if t[0] in kept]
    rows += [row(f"#{n}", space.indices(o.config), o, n - 1 in best) for n, o in told]
    pending = list(request.pending)[-(MAX_ROWS // 3):]
    left_out += len(request.pending) - len(pending)
    rows += [row("running", space.indices(p)) for p in pending]
    return header, rows, left_out


def prompt(space, request, count):
    """The user message asking for `count` configurations."""
    proposed = len(request.outcomes) + len(request.pending)
    lines = [f"Experiment '{request.experiment_name}': propose {count} new configuration(s) of a neural network "
             f"to train and measure. Each runs {request.repeats} seed(s) of {request.steps} steps, as the baseline "
             "does; its figures are the means over the completed seeds."]
    budget = f"Budget: {proposed} configuration(s) proposed so far"
    if request.max_configs > 0:
        left = max(0, request.max_configs - proposed)
        budget += f" of at most {request.max_configs}: {left} left, {max(0, left - count)} after this answer"
    else:
        budget += " (no fixed limit)"
    if request.space_size > 0:
        budget += f"; the space has {request.space_size} besides the baseline, {max(0, request.space_size - proposed)}" \
                  " not proposed yet"
    lines += [budget + ".", "", "Dimensions (set each to one of its choices; one left out keeps the baseline's):"]
    lines += [describe_dimension(n, c, b) for n, c, b in zip(space.names, space.choices, space.baseline_index)]
    lines.append("")
    goals = []
    for m, maximize in space.objectives:
        unit = unit_of(space, m)
        what = METRICS.get(m, "a metric of the catalog (docs/report.md)")
        goals.append(f"{'maximize' if maximize else 'minimize'} {m} ({what}" + (f", in {unit}" if unit else "") + ")")
    lines.append("Objectives: " + ", ".join(goals))
    if space.constraints:
        parts = []
        for m, low, high in space.constraints:
            unit = unit_of(space, m)
            bound = (f" >= {low:g}" if low is not None else "") + (f" <= {high:g}" if high is not None else "")
            parts.append(m + bound + (f" {unit}" if unit else ""))
        lines.append("Constraints (a configuration outside them is infeasible and never on the front): " +
                     ", ".join(parts))
    header, rows, left_out = table(space, request)
    lines += ["", "Measured so far: every configuration already tried or running, the baseline first (do not "
                  "propose any of these again" +
              ("; a \"?\" in the baseline's row: its value is none of that dimension's choices"
               if min(space.baseline_index, default=0) < 0 else "") + "). Columns: " + header]
    lines += rows
    if left_out:
        lines.append(f"({left_out} older configuration(s) off the front are not listed; they were tried too.)")
    if request.rejections:
        lines.append("")
        lines.append("Rejected by the coordinator last time (not run):")
        for r in list(request.rejections)[:MAX_REJECTIONS]:
            values = ", ".join(f"{n}: {v}" for n, v in zip(space.names, values_text(space, space.indices(r.config))))
            lines.append(f"- {{{values}}}: {' '.join(r.reason.split())[:300]}")
    lines += ["", "How to choose: the rows marked front are the best trade-offs found so far. Propose "
                  "configurations likely to join or move the front: change one or two dimensions of a front "
                  "configuration in the direction the measurements favour, and spend some proposals on choices "
                  "not tried yet. Avoid what failed or broke a constraint unless another change removes the cause.",
              f'Answer only JSON: {{"configs": [{{"config": {{dimension: choice, ...}}, "rationale": '
              f'"one short sentence"}}, ...]}} with {count} new configuration(s), every dimension set.']
    return "\n".join(lines)


def _json_types(choices):
    names = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null",
             dict: "object", list: "array"}
    types = sorted({names[type(c)] for c in choices})
    if "integer" in types and "number" in types:
        types.remove("integer")
    return types[0] if len(types) == 1 else types


def schema(space):
    """The answer's JSON schema: strict-valid (every object closed, every property required)."""
    properties = {name: {"type": _json_types(choices), "enum": choices}
                  for name, choices in zip(space.names, space.choices)}
    config = {"type": "object", "properties": properties, "required": list(space.names),
              "additionalProperties": False}
    item = {"type": "object", "properties": {"config": config, "rationale": {"type": "string"}},
            "required": ["config", "rationale"], "additionalProperties": False}
    return {"type": "object", "properties": {"configs": {"type": "array", "items": item}},
            "required": ["configs"], "additionalProperties": False}


def _configs_of(value):
    """The list of proposals a decoded JSON value holds, or None."""
    if isinstance(value, dict) and isinstance(value.get("configs"), list):
        return value["configs"]
    if isinstance(value, dict) and isinstance(value.get("config"), dict):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, dict) and "config" in v for v in value):
        return value
    return None


def extract_configs(text):
    """(proposals, None) from a model's answer, or (None, what is wrong): reasoning (<think>...</think>)
    skipped, then the first JSON value holding proposals anywhere in the message (a fenced block or
    bare, prose around it allowed)."""
    body = strip_reasoning(text[:ANSWER_CAP])
    if body is None:
        return None, "the answer is only reasoning (<think> never closed; cut off at the token limit?)"
    if not body.strip():
        return None, "the answer is empty"
    decoder = json.JSONDecoder()
    first_error = None
    # Fenced blocks first: a block that is JSON but broken is the best thing to tell the model about.
    for language, code, closed in fenced_blocks(body):
        if language not in ("", "json", "jsonc", "javascript"):
            continue
        try:
            value = json.loads(code)
        except json.JSONDecodeError as e:
            first_error = first_error or f"the ```{language or 'json'} block is not valid JSON ({e.msg} at line " \
                                         f"{e.lineno} column {e.colno})"
            continue
        except RecursionError:  # Python's decoder recurses per bracket
            first_error = first_error or f"the ```{language or 'json'} block is nested too deeply to read"
            continue
        if _configs_of(value) is not None:
            return _configs_of(value), None
    starts = [m.start() for m in re.finditer(r"[\[{]", body)][:MAX_STARTS]
    found_json = False
    for start in starts:
        try:
            value, _ = decoder.raw_decode(body, start)
        except json.JSONDecodeError as e:
            if first_error is None and body[start] == "{":
                line = body.count("\n", 0, e.pos) + 1
                first_error = f"the answer is not valid JSON ({e.msg} at line {line} column " \
                              f"{e.pos - body.rfind(chr(10), 0, e.pos)})"
            continue
        except RecursionError:
            first_error = first_error or "the answer is nested too deeply to read"
            continue
        found_json = found_json or isinstance(value, dict)
        if _configs_of(value) is not None:
            return _configs_of(value), None
    if found_json:
        return None, 'expected an object {"configs": [...]}'
    return None, first_error or "the answer holds no JSON object"


def parse_answer(space, text, seen, count):
    """(valid [(indices, rationale)], errors [str]) of the model's text."""
    items, problem = extract_configs(text)
    if problem:
        return [], [problem]
    valid, errors = [], []
    taken = set(seen)
    for n, item in enumerate(items):
        where = f"configs[{n}]"
        if not isinstance(item, dict) or not isinstance(item.get("config"), dict):
            errors.append(f'{where}: expected {{"config": {{...}}, "rationale": "..."}}')
            continue
        config = item["config"]
        unknown = [k for k in config if k not in space.names]
        if unknown:
            errors.append(f"{where}: unknown dimension(s) {unknown}; the dimensions are {space.names}")
            continue
        indices, problem = [], None
        for d, name in enumerate(space.names):
            if name not in config:
                if space.baseline_index[d] < 0:
                    problem = f"{where}: dimension '{name}' missing"
                    break
                indices.append(space.baseline_index[d])
                continue
            value = config[name]
            matches = [i for i, c in enumerate(space.choices[d]) if c == value and type(c) is type(value)]
            matches = matches or [i for i, c in enumerate(space.choices[d]) if c == value]
            if not matches:
                problem = f"{where}: {name}={json.dumps(value)} is not a choice; choose one of " \
                          f"{json.dumps(space.choices[d])}"
                break
            indices.append(matches[0])
        if problem:
            errors.append(problem)
            continue
        indices = tuple(indices)
        if indices in taken:
            errors.append(f"{where}: {json.dumps(space.values(indices), sort_keys=True)} was proposed before "
                          "(or is the baseline)")
            continue
        if len(valid) >= count:
            errors.append(f"{where}: more than the {count} asked for")
            continue
        taken.add(indices)
        rationale = item.get("rationale", "")
        valid.append((indices, rationale if isinstance(rationale, str) else json.dumps(rationale)))
    return valid, errors
