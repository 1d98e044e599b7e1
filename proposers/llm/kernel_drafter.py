"""frontier-llm-kernels: drafts candidate kernels for the kernel lab by
asking a language model (docs/proposers.md, "Drafting kernels").

The kernel lab (`frontier ops optimize`) runs this program once per round:

    frontier-llm-kernels --endpoint URL --model NAME [--api-key-file PATH]
        [--timeout-s 60] [--retries 3] [--temperature 0.7]
        --context CONTEXT.json --out DIR --count K

It reads the lab's context (the op, its contract, the reference source, an
example candidate, the shapes, the compiler, the profile, the gate's rules and
every earlier attempt's outcome), builds one prompt of at most PROMPT_CAP bytes,
asks the OpenAI-compatible chat-completions API (POST <endpoint>/chat/completions)
for exactly K candidates, each a complete C++ file in its own fenced block, and
writes the usable ones as DIR/llm-r{round}-c{i}.cc. When the answer has fewer
than K usable blocks it asks once more for the missing ones. It prints one JSON
line (the files, calls, tokens, prompt bytes, errors) and exits 0 (drafted, even
nothing), 2 (usage: flags or context) or 3 (the model cannot be used; one line
on stderr says why).

It never executes what the model wrote, never takes a file name from the model,
and never falls back to anything else. The API key (--api-key-file or
FRONTIER_LLM_API_KEY) is sent only in the Authorization header, never printed.
Standard library only (no gRPC): tests/proposers/kernel_drafter_test.py runs it
against tests/proposers/llm_standin.py; no real model has been run with it.
"""

import argparse
import json
import os
import sys

from chat_client import (AnswerTooLong, ChatClient, KeyFileError, ModelUnusable,  # noqa: F401 (kd._retry_after)
                         _retry_after, check_endpoint, fenced_blocks, strip_reasoning)
from chat_client import read_key as _read_key

PROG = "frontier-llm-kernels"

PROMPT_CAP = 24 * 1024          # bytes of the system + user messages
REFERENCE_CAP = 12 * 1024       # bytes of the reference source in the prompt
EXAMPLE_CAP = 6 * 1024          # bytes of the example candidate
CONTRACT_CAP = 4 * 1024         # bytes of the contract
COMPILE_LOG_CAP = 1024          # bytes of each attempt's compile log
# An attempt's (compile log, reason, where) caps in bytes, level 0 first; the oldest ones go down a
# level while the prompt is over PROMPT_CAP.
ATTEMPT_CAPS = [(COMPILE_LOG_CAP, 600, 300), (256, 600, 300), (128, 200, 150)]
MAX_ATTEMPTS = 20               # most recent attempts shown
BLOCK_CAP = 256 * 1024          # bytes of one candidate
ANSWER_CAP = 1 << 20            # bytes of one answer's text read
FOLLOW_UP_ANSWER_CAP = 32 * 1024  # bytes of the first answer repeated in the follow-up call

CPP_LANGUAGES = {"", "cpp", "c++", "cc", "cxx", "c"}


class UsageError(Exception):
    """Bad flags or context: exit 2."""


def cut(text, limit, what="bytes"):
    """text in at most `limit` UTF-8 bytes (on a character boundary), saying how much was left out."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    kept = data[:limit].decode("utf-8", "ignore")
    return kept + f"\n[... {len(data) - len(kept.encode('utf-8'))} more {what} left out]"


def nbytes(text):
    return len(text.encode("utf-8"))


# ----------------------------------------------------------------------------------------------
# The context the lab writes.

def _type_name(kind):
    return {str: "a string", int: "an integer", float: "a number", list: "a list", dict: "an object"}[kind]


def _check(value, where, kinds, nullable=False):
    if value is None and nullable:
        return None
    ok = False
    for kind in kinds:
        if kind is float:
            ok = ok or (isinstance(value, (int, float)) and not isinstance(value, bool))
        elif kind is int:
            ok = ok or (isinstance(value, int) and not isinstance(value, bool))
        else:
            ok = ok or isinstance(value, kind)
    if not ok:
        expected = " or ".join(_type_name(k) for k in kinds) + (" or null" if nullable else "")
        raise UsageError(f"{where} must be {expected}, not {json.dumps(value)[:80]}")
    return value


REQUIRED = {"op": str, "round": int, "rounds": int, "contract": str, "reference_source": str,
            "example_candidate": str}
OPTIONAL = {"count": int, "target_speedup": float, "shapes": str, "dtype": str, "device": str, "threads": int,
            "compiler": str}
ATTEMPT_FIELDS = {"candidate": str, "round": int, "outcome": str, "reason": str, "where": str,
                  "worst_rel_error": float, "speedup": float, "compile_log": str}


def read_context(path):
    """The lab's CONTEXT.json as a dict with every field checked (UsageError naming the first bad one)."""
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read(16 << 20).decode("utf-8"))
    except OSError as e:
        raise UsageError(f"cannot read --context {path}: {e.strerror or e}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise UsageError(f"--context {path} is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise UsageError(f"--context {path} must hold a JSON object")
    ctx = {}
    for name, kind in REQUIRED.items():
        if name not in data:
            raise UsageError(f"--context {path}: '{name}' is missing")
        ctx[name] = _check(data[name], f"context '{name}'", [kind])
    if not ctx["op"].strip():
        raise UsageError("context 'op' is empty")
    for name, kind in OPTIONAL.items():
        ctx[name] = _check(data.get(name), f"context '{name}'", [kind], nullable=True)
    profile = _check(data.get("profile"), "context 'profile'", [dict], nullable=True)
    if profile is not None:
        _check(profile.get("bottleneck"), "context 'profile.bottleneck'", [str], nullable=True)
        top = _check(profile.get("top_ops"), "context 'profile.top_ops'", [list], nullable=True) or []
        for i, op in enumerate(top):
            _check(op, f"context 'profile.top_ops[{i}]'", [dict])
            _check(op.get("name"), f"context 'profile.top_ops[{i}].name'", [str], nullable=True)
            _check(op.get("share"), f"context 'profile.top_ops[{i}].share'", [float], nullable=True)
    ctx["profile"] = profile
    rules = _check(data.get("gate_rules"), "context 'gate_rules'", [list], nullable=True) or []
    for i, rule in enumerate(rules):
        _check(rule, f"context 'gate_rules[{i}]'", [str])
    ctx["gate_rules"] = rules
    attempts = _check(data.get("attempts"), "context 'attempts'", [list], nullable=True) or []
    for i, attempt in enumerate(attempts):
        _check(attempt, f"context 'attempts[{i}]'", [dict])
        for name, kind in ATTEMPT_FIELDS.items():
            _check(attempt.get(name), f"context 'attempts[{i}].{name}'", [kind], nullable=True)
        interval = _check(attempt.get("speedup_interval"), f"context 'attempts[{i}].speedup_interval'", [list],
                          nullable=True)
        if interval is not None:
            if len(interval) != 2:
                raise UsageError(f"context 'attempts[{i}].speedup_interval' must be [low, high]")
            for j, x in enumerate(interval):
                _check(x, f"context 'attempts[{i}].speedup_interval[{j}]'", [float])
    # oldest first: by round (stable, so the lab's order within a round stays)
    ctx["attempts"] = sorted(attempts, key=lambda a: a.get("round") if a.get("round") is not None else -1)
    return ctx


# ----------------------------------------------------------------------------------------------
# The prompt.

def _num(x):
    return f"{x:.3g}"


def describe_attempt(a, level):
    log_cap, reason_cap, where_cap = ATTEMPT_CAPS[level]
    name = cut(a.get("candidate") or "(unnamed)", 120)
    head = f"- {name}"
    if a.get("round") is not None:
        head += f" (round {a['round']})"
    head += f": {a.get('outcome') or 'unknown outcome'}"
    if a.get("speedup") is not None:
        head += f", speed-up {_num(a['speedup'])}x over the reference"
        if a.get("speedup_interval"):
            low, high = a["speedup_interval"]
            head += f" (95% interval {_num(low)}-{_num(high)}x)"
    lines = [head]
    if a.get("reason"):
        lines.append("  reason: " + cut(" ".join(a["reason"].split()), reason_cap))
    if a.get("where"):
        lines.append("  where: " + cut(" ".join(a["where"].split()), where_cap))
    if a.get("worst_rel_error") is not None:
        lines.append(f"  worst relative error: {_num(a['worst_rel_error'])}")
    if a.get("compile_log"):
        lines.append("  compiler output:\n    " + cut(a["compile_log"].strip(), log_cap).replace("\n", "\n    "))
    return "\n".join(lines)


def system_message(ctx, count):
    return (f"You write C++ kernels for Frontier's kernel lab: faster variants of the op '{ctx['op']}', each an "
            "exactly-correct replacement for the op's reference, built as a plugin (a shared library) that "
            "frontier-trial loads, checks against the reference and times. Answer with exactly "
            f"{count} candidate(s), each a complete C++ source file in its own ```cpp fenced block. Text outside "
            "the blocks is allowed but not needed. The lab names the files; do not name them.")


def user_message(ctx, count, attempts_shown, levels, reference_cap, example_cap, contract_cap):
    """The user message; attempts_shown: the attempts to list (oldest first); levels: an ATTEMPT_CAPS level each."""
    rounds_left = ctx["rounds"] - ctx["round"]
    parts = []
    task = (f"Write {count} new variant(s) of the op '{ctx['op']}' that compute exactly what the reference "
            "computes (the same outputs and gradients, to the gate's tolerance) and run faster than it.")
    if ctx.get("target_speedup") is not None:
        task += f" The target is a speed-up of {_num(ctx['target_speedup'])}x over the reference."
    best = [a for a in ctx["attempts"] if a.get("speedup") is not None and a.get("outcome") == "timed"]
    if best:
        top = max(best, key=lambda a: a["speedup"])
        task += f" The best so far is {cut(top.get('candidate') or '(unnamed)', 120)} at {_num(top['speedup'])}x."
    task += (f"\nThis is round {ctx['round']} of {ctx['rounds']}: "
             + (f"{rounds_left} more round(s) after this one." if rounds_left > 0 else "the last round."))
    parts.append("## Task\n" + task)
    parts.append("## The op's contract\n" + cut(ctx["contract"].strip(), contract_cap))
    parts.append("## The reference (match its results, beat its time)\n```cpp\n" +
                 cut(ctx["reference_source"].rstrip(), reference_cap) + "\n```")
    parts.append("## A complete minimal candidate file (includes, registration, FRONTIER_PLUGIN)\n```cpp\n" +
                 cut(ctx["example_candidate"].rstrip(), example_cap) + "\n```")
    where = []
    for key, label in (("shapes", "Shapes"), ("dtype", "Dtype"), ("device", "Device"), ("threads", "Threads")):
        if ctx.get(key) is not None:
            where.append(f"{label}: {cut(str(ctx[key]), 1024)}")
    if ctx.get("compiler"):
        where.append("Each candidate is compiled alone with: " + cut(ctx["compiler"], 1024))
    if where:
        parts.append("## Where it runs\n" + "\n".join(where))
    profile = ctx.get("profile")
    if profile:
        lines = []
        if profile.get("bottleneck"):
            lines.append("Bottleneck: " + cut(profile["bottleneck"], 200))
        for op in (profile.get("top_ops") or [])[:10]:
            share = op.get("share")
            lines.append(f"- {cut(op.get('name') or '?', 120)}" +
                         (f": {share * 100:.0f}% of the time" if share is not None else ""))
        rest = {k: v for k, v in profile.items() if k not in ("bottleneck", "top_ops")}
        if rest:
            lines.append("Also: " + cut(json.dumps(rest, sort_keys=True), 1024))
        parts.append("## Profile of the reference\n" + "\n".join(lines))
    gate = ("Every candidate goes through a strict correctness gate before it is timed. Its output and the "
            "gradient of every input are compared with the reference computed in float64, on inputs the gate "
            "chooses: fresh random draws every time and structured edge cases, at the shapes above and others. "
            "So special-casing inputs or shapes, caching results between calls, or returning (views of) the "
            "inputs fails; the output must be differentiable like the reference's. Anything the gate rejects "
            "is never timed.")
    rules = [f"- {cut(r, 300)}" for r in ctx["gate_rules"][:20]]
    parts.append("## The correctness gate\n" + gate + ("\nIts rules:\n" + "\n".join(rules) if rules else ""))
    if ctx["attempts"]:
        left_out = len(ctx["attempts"]) - len(attempts_shown)
        text = "## Earlier attempts, oldest first (do not repeat their mistakes)\n"
        text += "\n".join(describe_attempt(a, level) for a, level in zip(attempts_shown, levels))
        if left_out:
            text += f"\n({left_out} older attempt(s) left out.)"
        parts.append(text)
    else:
        parts.append("## Earlier attempts\nNone yet.")
    parts.append(f"## Your answer\nExactly {count} candidate(s), each a complete C++ file in its own ```cpp fenced "
                 "block: one file per block, everything it needs inside it, registering one variant under a name "
                 "of its own and ending with FRONTIER_PLUGIN(...) as the example does. Each candidate should try a "
                 "different idea. Nothing else is required.")
    return "\n\n".join(parts) + "\n"


def build_prompt(ctx, count):
    """(messages, prompt_bytes): system + user, shrunk until they fit PROMPT_CAP."""
    system = system_message(ctx, count)
    shown = ctx["attempts"][-MAX_ATTEMPTS:]
    levels = [0] * len(shown)
    reference_cap, example_cap, contract_cap = REFERENCE_CAP, EXAMPLE_CAP, CONTRACT_CAP

    def render():
        return user_message(ctx, count, shown, levels, reference_cap, example_cap, contract_cap)

    user = render()
    while nbytes(system) + nbytes(user) > PROMPT_CAP:
        lower = [i for i, level in enumerate(levels) if level < len(ATTEMPT_CAPS) - 1]
        if lower:                          # 1. shorter logs and reasons, the oldest attempts first
            at = min(lower, key=lambda i: (levels[i], i))
            levels[at] += 1
        elif len(shown) > 10:              # 2. fewer attempts, the oldest first
            shown, levels = shown[1:], levels[1:]
        elif reference_cap > 8192:         # 3. less of the reference
            reference_cap = 8192
        elif len(shown) > 3:               # 4. fewer attempts (the 3 newest stay)
            shown, levels = shown[1:], levels[1:]
        elif reference_cap > 4096:         # 5. less of the reference, the example, the contract
            reference_cap //= 2
        elif example_cap > 2048:
            example_cap //= 2
        elif contract_cap > 2048:
            contract_cap //= 2
        elif shown:
            shown, levels = shown[1:], levels[1:]
        else:                              # 6. cut the message itself
            user = cut(user, PROMPT_CAP - nbytes(system) - 64)
            break
        user = render()
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    return messages, nbytes(system) + nbytes(user)


# ----------------------------------------------------------------------------------------------
# The answer.

def candidates_of(text, wanted, answer_no, taken_codes):
    """(codes, errors): at most `wanted` usable C++ blocks of one answer's text."""
    errors = []
    where = f"answer {answer_no}"
    if nbytes(text) > ANSWER_CAP:
        errors.append(f"{where}: longer than {ANSWER_CAP >> 20} MiB; only the first {ANSWER_CAP >> 20} MiB read")
        text = cut(text, ANSWER_CAP)
    body = strip_reasoning(text)
    if body is None:
        return [], [f"{where}: only reasoning (<think> never closed; cut off at the token limit?)"]
    codes, extra = [], 0
    blocks = fenced_blocks(body)
    if not blocks:
        errors.append(f"{where}: no fenced code block")
    for n, (language, code, closed) in enumerate(blocks, 1):
        block = f"{where}: block {n}"
        if language not in CPP_LANGUAGES:
            errors.append(f"{block} is ```{language[:20]}, not C++: skipped")
            continue
        if not closed:
            errors.append(f"{block} is not closed (the answer was cut off?): skipped")
            continue
        size = nbytes(code)
        if size > BLOCK_CAP:
            errors.append(f"{block} is {size // 1024} KiB, over the {BLOCK_CAP // 1024} KiB limit: dropped")
            continue
        if "FRONTIER_PLUGIN(" not in code:
            errors.append(f"{block} has no FRONTIER_PLUGIN(...): skipped")
            continue
        key = code.strip()
        if key in taken_codes:
            errors.append(f"{block} repeats an earlier candidate: skipped")
            continue
        if len(codes) >= wanted:
            extra += 1
            continue
        taken_codes.add(key)
        codes.append(code.strip("\n") + "\n")
    if extra:
        errors.append(f"{where}: {extra} more usable block(s) than the {wanted} asked for: not used")
    if len(errors) > 40:
        errors = errors[:39] + [f"{where}: {len(errors) - 39} more problem(s) not listed"]
    return codes, errors


# ----------------------------------------------------------------------------------------------
# The program.

def read_key(path):
    try:
        return _read_key(path)
    except KeyFileError as e:
        raise UsageError(str(e)) from None


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(2, f"{PROG}: {message}\n")


def parse_args(argv):
    p = _Parser(prog=PROG, description="Draft candidate kernels for Frontier's kernel lab by asking a language "
                                       "model (OpenAI-compatible chat completions). docs/proposers.md.")
    p.add_argument("--endpoint", required=True, help="base URL of the API (…/v1)")
    p.add_argument("--model", required=True, help="model name")
    p.add_argument("--api-key-file", default="", help="file holding the API key (else env FRONTIER_LLM_API_KEY)")
    p.add_argument("--timeout-s", type=float, default=60.0, help="per HTTP request (default 60)")
    p.add_argument("--retries", type=int, default=3, help="HTTP requests after the first on 429/5xx/timeouts/"
                                                          "unreachable (default 3)")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--max-tokens", type=int, default=0, help="max_tokens of each call (default: not sent)")
    p.add_argument("--context", required=True, help="the lab's CONTEXT.json")
    p.add_argument("--out", required=True, help="an existing folder for the candidates")
    p.add_argument("--count", type=int, required=True, help="candidates to draft")
    args = p.parse_args(argv)
    if check_endpoint(args.endpoint):
        p.error(check_endpoint(args.endpoint))
    if not args.model.strip():
        p.error("--model is empty")
    if not 1 <= args.count <= 64:
        p.error("--count must be 1..64")
    if not args.timeout_s > 0:
        p.error("--timeout-s must be positive")
    if not 0 <= args.retries <= 20:
        p.error("--retries must be 0..20")
    if args.max_tokens < 0:
        p.error("--max-tokens must be >= 0")
    return args


def write_candidate(out_dir, name, code):
    """DIR/name.cc, written through a temporary file and renamed (never through a link already there)."""
    path = os.path.join(out_dir, name + ".cc")
    tmp = os.path.join(out_dir, f".{name}.cc.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(code)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def draft(client, ctx, count, out_dir):
    """(report, exit status, reason or None): asks once, once more for the missing ones, writes the files.
    Status 3: the model cannot be used (reason: why); 2: a file could not be written under out_dir."""
    messages, prompt_bytes = build_prompt(ctx, count)
    report = {"candidates": [], "calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
              "prompt_bytes": prompt_bytes, "errors": []}
    taken, fatal, answered, empty = set(), None, 0, 0
    last_text, answer_errors, unwritable = "", [], None
    for answer_no in (1, 2):
        wanted = count - len(report["candidates"])
        if wanted <= 0:
            break
        ask = messages
        if answer_no == 2 and answered and last_text.strip():
            got = len(report["candidates"])
            problems = "; ".join(e.split(": ", 1)[-1] for e in answer_errors[:8]) or "no usable block"
            ask = messages + [
                {"role": "assistant", "content": cut(last_text, FOLLOW_UP_ANSWER_CAP)},
                {"role": "user", "content": f"That answer gave {got} usable candidate(s) of the {count} asked for "
                                            f"({cut(problems, 2000)}). Write {wanted} more: each a complete C++ "
                                            "file in its own ```cpp fenced block, containing FRONTIER_PLUGIN(...), "
                                            "different from the ones above."}]
        try:
            content, finish = client.ask(ask)
        except ModelUnusable as e:
            fatal = client.redact(str(e))
            report["errors"].append(f"answer {answer_no}: {fatal}")
            break
        except AnswerTooLong as e:
            answered += 1
            last_text, answer_errors = "", [f"answer {answer_no}: {e}"]
            report["errors"] += answer_errors
            continue
        answered += 1
        last_text = content
        codes, answer_errors = candidates_of(content, wanted, answer_no, taken)
        if strip_reasoning(content) is None or not (strip_reasoning(content) or "").strip():
            empty += 1
            answer_errors = [f"answer {answer_no}: empty" +
                             (" (only reasoning, never closed)" if strip_reasoning(content) is None and content.strip()
                              else "")]
        if finish == "length":
            answer_errors.append(f"answer {answer_no}: cut off at the token limit (finish_reason length)")
        report["errors"] += [client.redact(e) for e in answer_errors]
        for code in codes:
            name = f"llm-r{ctx['round']}-c{len(report['candidates']) + 1}"
            try:
                path = write_candidate(out_dir, name, code)
            except OSError as e:
                unwritable = f"cannot write {os.path.join(out_dir, name)}.cc: {e.strerror or e}"
                report["errors"].append(unwritable)
                break
            report["candidates"].append({"file": os.path.abspath(path), "name": name})
        if unwritable:
            break
    report["calls"], report["prompt_tokens"], report["completion_tokens"] = \
        client.calls, client.prompt_tokens, client.completion_tokens
    if unwritable:
        return report, 2, unwritable
    if fatal and report["candidates"]:
        fatal = None  # the first answer was drafted; the follow-up's failure is in errors
    if fatal is None and answered and empty == answered:
        fatal = f"the model answered nothing usable: {answered} empty answer(s) from model '{client.model}'"
        report["errors"].append(fatal)
    return report, (3 if fatal else 0), fatal


def main(argv=None):
    """The exit status: 0 drafted, 2 usage, 3 the model cannot be used."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        ctx = read_context(args.context)
        if not os.path.isdir(args.out):
            raise UsageError(f"--out {args.out} is not an existing folder")
        if not os.access(args.out, os.W_OK | os.X_OK):
            raise UsageError(f"--out {args.out} is not writable")
        key = read_key(args.api_key_file)
    except UsageError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    client = ChatClient(args.endpoint, args.model, key, args.timeout_s, args.retries, args.temperature,
                        args.max_tokens)
    report, status, reason = draft(client, ctx, args.count, args.out)
    print(json.dumps(report), flush=True)
    if reason:
        print(f"{PROG}: {reason}", file=sys.stderr, flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
