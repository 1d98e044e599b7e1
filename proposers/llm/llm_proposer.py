"""frontier-llm-proposer: serves the Proposer API by asking a language model.

It speaks the OpenAI-compatible chat-completions HTTP API (POST
<endpoint>/chat/completions), which llama.cpp's server, vLLM, Ollama and
hosted services offer. The prompt holds the space (dimensions, choices and
a one-line meaning of each), the objectives and constraints, the baseline's
figures, the front so far, recent failures with their reasons and the
proposals the coordinator rejected; the model answers N configurations as
JSON (the API's JSON-schema mode when the server takes it, else parsed and
validated here). Invalid or duplicate answers are retried with the errors
given back to the model, at most --retries times; then the rest is a seeded
random proposal whose rationale says so. Token usage and latency go back to
the coordinator with every answer. The API key (--api-key-file or
FRONTIER_LLM_API_KEY) is sent only in the Authorization header and never
logged. docs/proposers.md.

Tested against a local stand-in server (tests/proposers/llm_standin.py);
no real model has been run with it.
"""

import json
import math
import os
import random
import re
import time
import urllib.error
import urllib.request

import frontier_proposer as fp

log = fp.log

# One line per dimension Frontier's spaces commonly vary (docs/search-space.md).
MEANINGS = {
    "block": "the block family of every stage (basic residual, mbconv inverted bottleneck, convnext, ...)",
    "stages[*].block": "the block family of every stage",
    "stem.kind": "how the input is first downsampled (conv3x3, patchify, ...)",
    "stem.stride": "the stem's stride: larger is cheaper and coarser",
    "stem.width": "channels after the stem",
    "width": "channels of the stages",
    "depth": "blocks per stage",
    "attention": "the attention kind added to stages (none, window, global)",
    "runtime.precision": "numeric precision of training (fp32, bf16, fp16)",
    "runtime.channels_last": "memory layout of activations",
    "task.batch_size": "samples per step",
    "task.lr": "learning rate",
}


def meaning(name):
    if name in MEANINGS:
        return MEANINGS[name]
    tail = re.sub(r"^stages\[[^\]]*\]\.", "", name)
    return MEANINGS.get(tail, MEANINGS.get(tail.split(".")[-1], "a field of the trial spec (docs/trial-spec.md)"))


class ModelError(Exception):
    """A call that did not give an answer to read (HTTP error, timeout, no content)."""


def read_key(path):
    if path:
        with open(path) as f:
            key = f.read().strip()
        if not key:
            raise SystemExit(f"--api-key-file {path} is empty")
        return key
    return os.environ.get("FRONTIER_LLM_API_KEY", "")


def describe_outcome(space, outcome):
    config = space.values(space.indices(outcome.config))
    metrics = {k: round(v, 6) for k, v in sorted(outcome.metrics.items())}
    text = f"{json.dumps(config, sort_keys=True)}: {outcome.status}"
    if metrics:
        text += f", {json.dumps(metrics)}"
    if outcome.violation > 0:
        text += f", constraint violation {outcome.violation:.3g}" if math.isfinite(outcome.violation) \
            else ", constraints not measured"
    if outcome.reason:
        text += f", reason: {outcome.reason[:200]}"
    return text


def front(space, outcomes):
    """The feasible completed outcomes no other one dominates on the objectives."""
    points = []
    for o in outcomes:
        if o.status != "completed" or o.violation > 0:
            continue
        values = [o.metrics.get(m) for m, _ in space.objectives]
        if any(v is None for v in values):
            continue
        points.append((o, [v if maximize else -v for v, (_, maximize) in zip(values, space.objectives)]))
    out = []
    for o, p in points:
        dominated = any(all(a >= b for a, b in zip(q, p)) and any(a > b for a, b in zip(q, p)) for _, q in points)
        if not dominated:
            out.append(o)
    return out


def schema(space, count):
    properties = {name: {"enum": choices} for name, choices in zip(space.names, space.choices)}
    return {
        "type": "object",
        "properties": {
            "configs": {
                "type": "array", "minItems": 1, "maxItems": count,
                "items": {
                    "type": "object",
                    "properties": {
                        "config": {"type": "object", "properties": properties, "required": space.names,
                                   "additionalProperties": False},
                        "rationale": {"type": "string"},
                    },
                    "required": ["config", "rationale"],
                },
            }
        },
        "required": ["configs"],
    }


def prompt(space, request, count):
    lines = [f"Experiment '{request.experiment_name}': propose {count} new configuration(s) of a neural network "
             f"to train and measure. Every configuration runs {request.repeats} seed(s) of {request.steps} steps.",
             "", "Dimensions (set each to one of its choices):"]
    for name, choices in zip(space.names, space.choices):
        lines.append(f"- {name}: {json.dumps(choices)} ({meaning(name)})")
    lines.append("")
    lines.append("Objectives: " + ", ".join(f"{'maximize' if mx else 'minimize'} {m}" for m, mx in space.objectives))
    if space.constraints:
        parts = []
        for m, low, high in space.constraints:
            parts.append(m + (f" >= {low}" if low is not None else "") + (f" <= {high}" if high is not None else ""))
        lines.append("Constraints: " + ", ".join(parts))
    if request.HasField("baseline"):
        lines.append("Baseline (already measured): " + describe_outcome(space, request.baseline))
    best = front(space, request.outcomes)
    if best:
        lines.append("Best so far (the Pareto front):")
        lines += [f"- {describe_outcome(space, o)}" for o in best[-20:]]
    failures = [o for o in request.outcomes if o.status != "completed"]
    if failures:
        lines.append("Recent failures:")
        lines += [f"- {describe_outcome(space, o)}" for o in failures[-10:]]
    tried = [space.values(space.baseline())] if space.baseline() is not None else []
    tried += [space.values(space.indices(o.config)) for o in request.outcomes]
    tried += [space.values(space.indices(p)) for p in request.pending]
    if tried:
        lines.append("The baseline, already tried or running (do not propose again): " +
                     json.dumps(tried[-200:], sort_keys=True))
    if request.rejections:
        lines.append("Rejected last time:")
        lines += [f"- {json.dumps(space.values(space.indices(r.config)))}: {r.reason}" for r in request.rejections]
    lines += ["", f'Answer only JSON: {{"configs": [{{"config": {{dimension: choice, ...}}, "rationale": '
                  f'"one short sentence"}}, ...]}} with {count} new configuration(s).']
    return "\n".join(lines)


def parse_answer(space, text, seen, count):
    """(valid [(indices, rationale)], errors [str]) of the model's text."""
    text = text.strip()
    fence = re.match(r"^```(?:json)?\s*(.*?)\s*```$", text, re.S)
    if fence:
        text = fence.group(1)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        return [], [f"the answer is not valid JSON ({e.msg} at line {e.lineno} column {e.colno})"]
    if isinstance(data, list):
        data = {"configs": data}
    if not isinstance(data, dict) or not isinstance(data.get("configs"), list):
        return [], ['expected an object {"configs": [...]}']
    valid, errors = [], []
    taken = set(seen)
    for n, item in enumerate(data["configs"]):
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


class LlmProposer:
    def __init__(self, endpoint, model, key, timeout_s=60.0, retries=3, schema_mode="auto", temperature=0.7,
                 max_tokens=2000):
        self.url = endpoint.rstrip("/") + "/chat/completions"
        self.model = model
        self._key = key
        self.timeout_s = timeout_s
        self.retries = retries
        self.schema_mode = schema_mode  # auto: try JSON-schema mode, drop it if the server refuses it
        self.temperature = temperature
        self.max_tokens = max_tokens

    def __repr__(self):  # never the key
        return f"LlmProposer({self.url}, model={self.model})"

    def _post(self, messages, count, space, usage):
        body = {"model": self.model, "messages": messages, "temperature": self.temperature,
                "max_tokens": self.max_tokens}
        if self.schema_mode != "off":
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "proposals", "strict": True,
                                                       "schema": schema(space, count)}}
        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = "Bearer " + self._key
        req = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers, method="POST")
        started = time.monotonic()
        usage.model_calls += 1
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as response:
                payload = response.read(8 << 20)
        except urllib.error.HTTPError as e:
            detail = e.read(2000).decode("utf-8", "replace")
            if e.code == 400 and self.schema_mode == "auto" and "response_format" in detail:
                log.info("%s refuses response_format: parsing plain answers from now on", self.url)
                self.schema_mode = "off"
                raise ModelError("the server refused JSON-schema mode") from None
            retry_after = e.headers.get("Retry-After", "") if e.headers else ""
            if e.code == 429 and retry_after.replace(".", "", 1).isdigit():
                time.sleep(min(float(retry_after), 10.0))
            raise ModelError(f"HTTP {e.code} from the model server: {detail[:200]}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as e:
            raise ModelError(f"no answer from {self.url}: {getattr(e, 'reason', e)}") from None
        finally:
            usage.model_latency_ms += int((time.monotonic() - started) * 1000)
        try:
            data = json.loads(payload)
            u = data.get("usage") or {}
            usage.prompt_tokens += int(u.get("prompt_tokens") or 0)
            usage.completion_tokens += int(u.get("completion_tokens") or 0)
            content = data["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise ModelError(f"unreadable chat-completions response ({type(e).__name__})") from None
        if not isinstance(content, str):
            raise ModelError("the response has no text content")
        return content

    def propose(self, request):
        space = fp.Space(request)
        count = max(1, request.count)
        seen = fp.seen_configs(space, request)
        seen |= {space.indices(r.config) for r in request.rejections}
        usage = fp.proposer_pb2.ProposerUsage()
        messages = [{"role": "system", "content": "You propose neural-network configurations for an architecture "
                                                  "search. Answer with JSON only."},
                    {"role": "user", "content": prompt(space, request, count)}]
        chosen, last_error = [], ""
        for attempt in range(1 + self.retries):
            wanted = count - len(chosen)
            if wanted <= 0:
                break
            try:
                content = self._post(messages, wanted, space, usage)
            except ModelError as e:
                last_error = str(e)
                log.warning("model call %d failed: %s", attempt + 1, last_error)
                time.sleep(min(0.2 * 2 ** attempt, 2.0))
                continue
            valid, errors = parse_answer(space, content, seen | {c for c, _ in chosen}, wanted)
            chosen += valid
            log.info("model call %d: %d valid, %d invalid", attempt + 1, len(valid), len(errors))
            if errors:
                last_error = errors[-1]
                messages += [{"role": "assistant", "content": content[:4000]},
                             {"role": "user", "content": "These were invalid:\n- " + "\n- ".join(errors[:20]) +
                              f"\nPropose {count - len(chosen)} more new configuration(s), as JSON only."}]
        response = fp.proposer_pb2.ProposeResponse(proposer=f"llm:{self.model}")
        for indices, rationale in chosen:
            response.configs.append(fp.proposed(space, indices, rationale or "(no rationale given)"))
        if len(chosen) < count:
            rng = random.Random(request.seed * 1_000_003 + len(request.outcomes) + len(request.pending))
            taken = seen | {c for c, _ in chosen}
            size = space.size()
            for _ in range(min(100 * size, 100000)):
                if len(response.configs) >= count or len(taken) >= size:
                    break
                indices = tuple(rng.randrange(len(c)) for c in space.choices)
                if indices in taken:
                    continue
                taken.add(indices)
                response.configs.append(fp.proposed(
                    space, indices, f"fallback: seeded random after {1 + self.retries} model calls without "
                                    f"enough valid answers (last: {last_error[:300]})"))
        response.usage.CopyFrom(usage)
        log.info("answered %d configuration(s): %d from the model; %d prompt + %d completion tokens, %d ms",
                 len(response.configs), len(chosen), usage.prompt_tokens, usage.completion_tokens,
                 usage.model_latency_ms)
        return response


def main(argv=None):
    parser = fp.common_flags("Serve Frontier's Proposer API by asking a language model "
                             "(OpenAI-compatible chat completions).")
    parser.add_argument("--endpoint", default=os.environ.get("FRONTIER_LLM_ENDPOINT", "http://127.0.0.1:8080/v1"),
                        help="base URL of the API (…/v1); env FRONTIER_LLM_ENDPOINT")
    parser.add_argument("--model", default=os.environ.get("FRONTIER_LLM_MODEL", "default"),
                        help="model name; env FRONTIER_LLM_MODEL")
    parser.add_argument("--api-key-file", default="", help="file holding the API key (else env FRONTIER_LLM_API_KEY)")
    parser.add_argument("--timeout-s", type=float, default=60.0, help="per model call")
    parser.add_argument("--retries", type=int, default=3, help="model calls after the first when answers are invalid")
    parser.add_argument("--json-schema", choices=["auto", "on", "off"], default="auto",
                        help="ask for JSON-schema structured output (auto: drop it when the server refuses)")
    parser.add_argument("--temperature", type=float, default=0.7)
    args = parser.parse_args(argv)
    proposer = LlmProposer(args.endpoint, args.model, read_key(args.api_key_file), args.timeout_s, args.retries,
                           args.json_schema, args.temperature)
    log.info("asking %s (model %s, key %s)", proposer.url, args.model, "set" if proposer._key else "none")
    fp.serve(proposer.propose, args)


if __name__ == "__main__":
    main()
