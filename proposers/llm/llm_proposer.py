"""frontier-llm-proposer: serves the Proposer API by asking a language model.

It speaks the OpenAI-compatible chat-completions HTTP API (POST
<endpoint>/chat/completions), which llama.cpp's server, vLLM, Ollama and
hosted services offer; --endpoint and --model are required. The prompt
(proposal_prompt.py) holds the task and the remaining budget, every
dimension with what each choice does and costs, the objectives and
constraints with units, every configuration measured or running with its
metrics, and the proposals the coordinator rejected; the model answers N
configurations as JSON (the API's JSON-schema mode when the server takes it;
the first JSON object anywhere in the answer, reasoning skipped, either way).
Invalid or duplicate answers are asked again with the errors given back to
the model, at most --retries times. A model that cannot be used (401/403,
404, unreachable, persistent 5xx or timeouts, nothing valid after the
retries) is reported to the coordinator, which pauses the search with the
reason; only with --fallback random are seeded random configurations
proposed instead, each labelled a fallback. The whole answer fits in the
coordinator's deadline: no model call runs past it, none is made once the
coordinator has given up. Token usage and latency go back with every answer.
The API key (--api-key-file or FRONTIER_LLM_API_KEY) is sent only in the
Authorization header and never logged. docs/proposers.md.

Tested against a local stand-in server (tests/proposers/llm_standin.py);
no real model has been run with it.
"""

import os
import random
import sys
import time

import frontier_proposer as fp
from chat_client import (AnswerTooLong, Cancelled, ChatClient, KeyFileError, ModelUnusable, OutOfTime, check_endpoint,
                         read_key)
from proposal_prompt import parse_answer, prompt, schema

log = fp.log

SYSTEM = ("You propose neural-network configurations for an architecture search: each one is trained and "
          "measured, and the best trade-offs between the objectives are kept. Answer with JSON only.")


def reserve_s(remaining):
    """Seconds of the coordinator's deadline kept for the answer to reach it: 5% of it, 0.2 to 2 s."""
    return min(2.0, max(0.2, 0.05 * remaining))


class LlmProposer:
    def __init__(self, endpoint, model, key, timeout_s=60.0, retries=3, schema_mode="auto", temperature=0.7,
                 max_tokens=2000, fallback="none"):
        self.endpoint = endpoint
        self.url = endpoint.rstrip("/") + "/chat/completions"
        self.model = model
        self._key = key
        self.timeout_s = timeout_s
        self.retries = retries
        self.schema_mode = schema_mode  # auto: try JSON-schema mode, drop it if the server refuses it
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.fallback = fallback        # "none": a failing model is reported; "random": seeded random instead
        self.last_prompt_bytes = 0

    def __repr__(self):  # never the key
        return f"LlmProposer({self.url}, model={self.model})"

    def _client(self, context):
        client = ChatClient(self.endpoint, self.model, self._key, self.timeout_s, self.retries, self.temperature,
                            self.max_tokens)
        client.on_retry = lambda n, why: log.warning("model call %d failed: %s", n, why)
        if context is not None:
            remaining = context.time_remaining()
            if remaining is not None:
                client.deadline = time.monotonic() + remaining - reserve_s(remaining)
            client.cancelled = lambda: not context.is_active()
            context.add_callback(client.abort)  # the coordinator cancelled (or the call ended): stop the request
        return client

    def _ask(self, client, messages, space, budget):
        """The model's text, with at most `budget` requests counted by the client in all; ModelUnusable (or a
        subclass) when it gives none. A server that refuses JSON-schema mode is asked without it."""
        while True:
            extra = None
            if self.schema_mode != "off":
                extra = {"response_format": {"type": "json_schema", "json_schema": {
                    "name": "proposals", "strict": True, "schema": schema(space)}}}
            try:
                content, _ = client.ask(messages, extra=extra, tries=budget - client.calls)
                return content
            except ModelUnusable as e:
                refused = e.status == 400 and self.schema_mode == "auto" and "response_format" in e.detail
                if not refused or client.calls >= budget:
                    raise
                log.info("%s refuses response_format: parsing plain answers from now on", self.url)
                self.schema_mode = "off"

    def propose(self, request, context=None):
        space = fp.Space(request)
        count = max(1, request.count)
        seen = fp.seen_configs(space, request)
        seen |= {space.indices(r.config) for r in request.rejections}
        response = fp.proposer_pb2.ProposeResponse(proposer=f"llm:{self.model}")
        if len({s for s in seen if space.contains(s)}) >= space.size():
            response.finished = True  # nothing untried is left
            return response
        client = self._client(context)
        text = prompt(space, request, count)
        self.last_prompt_bytes = len(SYSTEM.encode()) + len(text.encode())
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]
        chosen, failure, budget = [], "", 1 + self.retries
        while len(chosen) < count and client.calls < budget:
            try:
                content = self._ask(client, messages, space, budget)
            except (Cancelled, OutOfTime) as e:
                failure = str(e) if isinstance(e, Cancelled) else \
                    f"{client.redact(str(e))}: the answer must come within the coordinator's deadline " \
                    "(the strategy's deadline_s); raise it, or use a faster model or a lower --max-tokens"
                break
            except ModelUnusable as e:
                failure = client.redact(str(e))
                break
            except AnswerTooLong as e:  # an answer that cannot be read: another try
                failure = client.redact(str(e))
                continue
            valid, errors = parse_answer(space, content, seen | {c for c, _ in chosen}, count - len(chosen))
            chosen += valid
            log.info("model call %d: %d valid, %d invalid (prompt %d bytes)", client.calls, len(valid), len(errors),
                     self.last_prompt_bytes)
            if errors:
                failure = f"{client.calls} model call(s) without enough valid configurations (last: " \
                          f"{client.redact(errors[-1])[:300]})"
                messages += [{"role": "assistant", "content": content[:4000]},
                             {"role": "user", "content": "These were invalid:\n- " + "\n- ".join(errors[:20]) +
                              f"\nPropose {count - len(chosen)} more new configuration(s), as JSON only."}]
        for indices, rationale in chosen:
            response.configs.append(fp.proposed(space, indices, rationale or "(no rationale given)"))
        if len(chosen) < count and failure:
            if context is not None and not context.is_active():
                log.warning("the coordinator gave up on this call: no more model calls for it (%s)", failure)
            elif not chosen:
                response.error = failure[:2000]
            if self.fallback == "random":
                self._fallback(space, request, seen | {c for c, _ in chosen}, count, response, failure)
        response.usage.prompt_tokens = client.prompt_tokens
        response.usage.completion_tokens = client.completion_tokens
        response.usage.model_calls = client.calls
        response.usage.model_latency_ms = client.latency_ms
        log.info("answered %d configuration(s), %d from the model%s; %d model call(s), %d prompt + %d completion "
                 "tokens, %d ms", len(response.configs), len(chosen),
                 f"; error: {response.error}" if response.error else "", client.calls, client.prompt_tokens,
                 client.completion_tokens, client.latency_ms)
        return response

    def _fallback(self, space, request, taken, count, response, failure):
        """Seeded random configurations for the rest (--fallback random), each labelled a fallback."""
        rng = random.Random(request.seed * 1_000_003 + len(request.outcomes) + len(request.pending))
        taken, size = set(taken), space.size()
        for _ in range(min(100 * size, 100000)):
            if len(response.configs) >= count or len(taken) >= size:
                break
            indices = tuple(rng.randrange(len(c)) for c in space.choices)
            if indices in taken:
                continue
            taken.add(indices)
            config = fp.proposed(space, indices, f"fallback: seeded random because the model failed: {failure[:300]}")
            config.fallback = "random"
            response.configs.append(config)


def main(argv=None):
    parser = fp.common_flags("Serve Frontier's Proposer API by asking a language model (OpenAI-compatible chat "
                             "completions). --endpoint and --model are required; a model that cannot be used "
                             "pauses the experiment with the reason (docs/proposers.md).")
    parser.add_argument("--endpoint", default=os.environ.get("FRONTIER_LLM_ENDPOINT", ""),
                        help="base URL of the API, ending in /v1, e.g. http://127.0.0.1:8080/v1 (required; or env "
                             "FRONTIER_LLM_ENDPOINT; no default)")
    parser.add_argument("--model", default=os.environ.get("FRONTIER_LLM_MODEL", ""),
                        help="the model's name as the server knows it (required; or env FRONTIER_LLM_MODEL; no "
                             "default)")
    parser.add_argument("--api-key-file", default="", help="file holding the API key (else env FRONTIER_LLM_API_KEY)")
    parser.add_argument("--timeout-s", type=float, default=60.0,
                        help="per model call (default 60), within the coordinator's deadline_s")
    parser.add_argument("--retries", type=int, default=3,
                        help="model calls after the first on invalid answers, 429, 5xx and timeouts (default 3)")
    parser.add_argument("--fallback", choices=["none", "random"], default="none",
                        help="none (default): a model that cannot be used is reported and the search pauses; "
                             "random: seeded random configurations instead, each labelled a fallback")
    parser.add_argument("--json-schema", choices=["auto", "on", "off"], default="auto",
                        help="ask for JSON-schema structured output (auto: drop it when the server refuses)")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--max-tokens", type=int, default=2000, help="max_tokens of each call (default 2000)")
    args = parser.parse_args(argv)
    if not args.endpoint.strip():
        parser.error("--endpoint is required: the base URL of an OpenAI-compatible API, e.g. "
                     "http://127.0.0.1:8080/v1 (or set FRONTIER_LLM_ENDPOINT)")
    if check_endpoint(args.endpoint):
        parser.error(check_endpoint(args.endpoint))
    if not args.model.strip():
        parser.error("--model is required: the model's name as the server knows it (or set FRONTIER_LLM_MODEL)")
    if not args.timeout_s > 0:
        parser.error("--timeout-s must be positive")
    if not 0 <= args.retries <= 20:
        parser.error("--retries must be 0..20")
    if args.max_tokens < 1:
        parser.error("--max-tokens must be at least 1")
    try:
        key = read_key(args.api_key_file)
    except KeyFileError as e:
        parser.error(str(e))
    proposer = LlmProposer(args.endpoint, args.model, key, args.timeout_s, args.retries, args.json_schema,
                           args.temperature, args.max_tokens, args.fallback)
    log.info("asking %s (model %s, key %s, fallback %s); each answer within the coordinator's deadline, at most %d "
             "model call(s) of %g s", proposer.url, args.model, "set" if key else "none", args.fallback,
             1 + args.retries, args.timeout_s)
    fp.serve(proposer.propose, args)


if __name__ == "__main__":
    sys.exit(main())
