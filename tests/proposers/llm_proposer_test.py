"""frontier-llm-proposer against the stand-in chat-completions server
(llm_standin.py): answers that are malformed JSON, wrong choices, duplicates,
timeouts and HTTP 429/500 are retried with the errors given back to the
model; a model that cannot be used (401, 404, down, persistent 5xx, nothing
valid) is reported in the answer's error, never hidden behind random
configurations, which come only with --fallback random and are labelled so;
answers are read the way models write them (prose, fences, reasoning); the
coordinator's deadline and cancellation bound the model calls, and the usage
of an answer it gave up on goes with the next one; a taken port is refused;
--endpoint and --model are required; the prompt describes every choice, the
metrics with units and the budget, and its schema is strict-valid; tokens and
latency are reported; the key is sent but never logged; a server that
refuses JSON-schema mode is asked without it.

Run: FRONTIER_PROTO_PYTHON=<build>/python /usr/bin/python3 llm_proposer_test.py
"""

import contextlib
import io
import json
import logging
import os
import subprocess
import sys
import threading
import time
import unittest
from concurrent import futures

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path[:0] = [HERE, os.path.join(ROOT, "proposers"), os.path.join(ROOT, "proposers", "llm")]

import frontier_proposer as fp  # noqa: E402
import grpc  # noqa: E402
import llm_proposer  # noqa: E402
import proposal_prompt  # noqa: E402
from llm_standin import StandIn, prompt_table  # noqa: E402

pb = fp.proposer_pb2
KEY = "sk-test-0123456789abcdef-secret"


def request(count=2, outcomes=(), pending=(), max_configs=0):
    r = pb.ProposeRequest(experiment_id="exp-1", experiment_name="tiny", count=count, repeats=1, steps=20, seed=3,
                          max_configs=max_configs, space_size=5)
    r.dimensions.add(name="block", choices_json=['"basic"', '"mbconv"', '"convnext"'], ordinal=False,
                     baseline_index=0)
    r.dimensions.add(name="stem.width", choices_json=["8", "16"], ordinal=True, baseline_index=1)
    r.objectives.add(metric="val_accuracy", maximize=True)
    r.objectives.add(metric="throughput", maximize=True, unit="samples/s")
    r.constraints.add(metric="peak_memory_mb", has_max=True, max=512, unit="MB")
    for n, (block, width, status) in enumerate(outcomes):
        o = r.outcomes.add(status=status, seeds=1, seeds_completed=1 if status == "completed" else 0)
        o.config.choices["block"] = block
        o.config.choices["stem.width"] = width
        if status == "completed":
            o.metrics["val_accuracy"] = 0.5 - 0.1 * n  # each later one worse and slower: only the first on the front
            o.metrics["throughput"] = 1000 - 100 * n
            o.metrics["peak_memory_mb"] = 80
        else:
            o.reason = "failed: out of memory"
            o.violation = float("inf")
    for block, width in pending:
        p = r.pending.add()
        p.choices["block"] = block
        p.choices["stem.width"] = width
    return r


def answer(*configs):
    return json.dumps({"configs": [{"config": c, "rationale": f"try {c}"} for c in configs]})


def configs_of(response):
    return [(c.config.choices["block"], c.config.choices["stem.width"]) for c in response.configs]


class FakeContext:
    """The part of a grpc.ServicerContext the proposer reads: the deadline left, activity, callbacks."""

    def __init__(self, remaining=None):
        self.remaining, self.active, self.callbacks, self.started = remaining, True, [], time.monotonic()

    def time_remaining(self):
        return None if self.remaining is None else max(0.0, self.remaining - (time.monotonic() - self.started))

    def is_active(self):
        return self.active

    def add_callback(self, callback):
        self.callbacks.append(callback)
        return True

    def cancel(self):
        self.active = False
        for callback in self.callbacks:
            callback()


class LlmProposerTest(unittest.TestCase):
    def setUp(self):
        self.log = io.StringIO()
        self.handler = logging.StreamHandler(self.log)
        fp.log.addHandler(self.handler)
        fp.log.setLevel(logging.DEBUG)

    def tearDown(self):
        fp.log.removeHandler(self.handler)
        self.assertNotIn(KEY, self.log.getvalue(), "the key was logged")

    def proposer(self, standin, **kw):
        kw.setdefault("timeout_s", 2.0)
        return llm_proposer.LlmProposer(standin.url, "stand-in-model", KEY, **kw)

    def test_valid_answer_with_usage_key_and_a_strict_schema(self):
        with StandIn([{"content": answer({"block": "mbconv", "stem.width": 8}, {"block": "convnext"})}]) as s:
            r = self.proposer(s).propose(request())
        self.assertEqual(configs_of(r), [(1, 0), (2, 1)])  # a missing dimension keeps the baseline's value
        self.assertEqual(r.configs[0].rationale, "try {'block': 'mbconv', 'stem.width': 8}")
        self.assertEqual((r.proposer, r.error, r.configs[0].fallback), ("llm:stand-in-model", "", ""))
        self.assertEqual((r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.model_calls), (100, 20, 1))
        sent = s.requests[0]
        self.assertEqual(sent["authorization"], "Bearer " + KEY)
        self.assertEqual(sent["body"]["model"], "stand-in-model")
        self.assertTrue(sent["body"]["response_format"]["json_schema"]["strict"])
        schema = sent["body"]["response_format"]["json_schema"]["schema"]
        objects = []

        def walk(node):
            if isinstance(node, dict):
                if node.get("type") == "object":
                    objects.append(node)
                for v in node.values():
                    walk(v)
        walk(schema)
        self.assertEqual(len(objects), 3)  # the answer, each proposal, its config: every one closed, all required
        for o in objects:
            self.assertIs(o["additionalProperties"], False)
            self.assertEqual(sorted(o["required"]), sorted(o["properties"]))
        config = schema["properties"]["configs"]["items"]["properties"]["config"]["properties"]
        self.assertEqual(config["block"], {"type": "string", "enum": ["basic", "mbconv", "convnext"]})
        self.assertEqual(config["stem.width"], {"type": "integer", "enum": [8, 16]})

    def test_the_prompt_describes_choices_metrics_with_units_and_the_budget(self):
        outcomes = [(1, 1, "completed"), (2, 1, "completed"), (2, 0, "failed")]
        text = proposal_prompt.prompt(fp.Space(request(outcomes=outcomes, pending=[(0, 0)], max_configs=6)),
                                      request(outcomes=outcomes, pending=[(0, 0)], max_configs=6), 2)
        self.assertIn('"mbconv" = inverted bottleneck with a depthwise conv', text)  # each choice: what and cost
        self.assertIn("- stem.width: channels after the stem", text)
        self.assertIn("maximize throughput (training samples per second, in samples/s)", text)
        self.assertIn("peak_memory_mb <= 512 MB", text)
        self.assertIn("Budget: 4 configuration(s) proposed so far of at most 6: 2 left, 0 after this answer", text)
        self.assertIn("val_accuracy | throughput (samples/s) | peak_memory_mb (MB) | outcome", text)
        self.assertIn('- #1: "mbconv" | 16 || 0.5 | 1000 | 80 | completed, front', text)
        self.assertIn('- #2: "convnext" | 16 || 0.4 | 900 | 80 | completed', text)  # off the front, with metrics
        self.assertIn("failed (0 of 1 seeds completed): failed: out of memory", text)
        self.assertIn('- running: "basic" | 8 || - | - | - | not measured yet', text)
        rows, names, metrics = prompt_table(text)  # the stand-in reads the same table
        self.assertEqual((names, metrics), (["block", "stem.width"], ["val_accuracy", "throughput", "peak_memory_mb"]))
        self.assertEqual([r[0] for r in rows], ["baseline", "#1", "#2", "#3", "running"])

    def test_the_front_marks_are_the_non_dominated_rows_the_baseline_included(self):
        # #2 is dominated by #1 and #3, #4 only by the baseline; marks by message identity (id() of a
        # protobuf wrapper, new at each access) marked rows at random.
        r = request(outcomes=[(1, 1, "completed"), (2, 1, "completed"), (0, 0, "completed"), (1, 0, "completed")])
        for o, (accuracy, throughput) in zip(r.outcomes, [(0.6, 900), (0.5, 800), (0.4, 1200), (0.55, 950)]):
            o.metrics["val_accuracy"], o.metrics["throughput"] = accuracy, throughput
        r.baseline.status, r.baseline.seeds, r.baseline.seeds_completed = "completed", 1, 1
        r.baseline.metrics.update({"val_accuracy": 0.58, "throughput": 1000, "peak_memory_mb": 80})
        r.dimensions[0].baseline_index = -1  # the baseline's block is none of the choices
        for _ in range(20):  # identities would differ from call to call; positions do not
            header, rows, _ = proposal_prompt.table(fp.Space(r), r)
            marked = [row.split(":")[0][2:] for row in rows if row.endswith(", front")]
            self.assertEqual(marked, ["baseline", "#1", "#3"], rows)
        self.assertTrue(rows[0].startswith('- baseline: ? | 16 || 0.58 | 1000 | 80 | completed'), rows[0])
        self.assertIn('a "?" in the baseline\'s row', proposal_prompt.prompt(fp.Space(r), r, 2))

    def test_answers_are_read_the_way_models_write_them(self):
        space = fp.Space(request())
        good = '{"configs": [{"config": {"block": "mbconv", "stem.width": 8}, "rationale": "r"}]}'
        cases = {
            "bare": good,
            "fenced with prose around": f"Here you go:\n```json\n{good}\n```\nThese should be faster.",
            "an unlabelled fence": f"```\n{good}\n```",
            "after a reasoning block": '<think>maybe {"configs": [{"config": {"block": "convnext"}}]}?</think>\n' + good,
            "after a closing tag only": "the template opened it</think>" + good,
            "inside a sentence": f"I propose {good} because depthwise convs are cheap.",
            "a list of proposals": 'Answer: [{"config": {"block": "mbconv", "stem.width": 8}, "rationale": "r"}]',
            "a broken draft before": 'Draft: {"configs": [oops\nFinal: ' + good,
        }
        for name, text in cases.items():
            with self.subTest(name):
                valid, errors = proposal_prompt.parse_answer(space, text, set(), 2)
                self.assertEqual((valid, errors), ([((1, 0), "r")], []))
        bad = {
            "<think>never closed": "the answer is only reasoning",
            "```json\n{\"configs\": [1,\n```": "the ```json block is not valid JSON",
            "{configs: [oops": "the answer is not valid JSON",
            '{"configs": ' + "[" * 5000 + "]" * 5000 + "}": "the answer is nested too deeply to read",
            "```json\n" + "[" * 5000 + "\n```": "the ```json block is nested too deeply to read",
            "I cannot do that.": "the answer holds no JSON object",
            '{"answer": 42}': 'expected an object {"configs": [...]}',
            "  ": "the answer is empty",
        }
        for text, error in bad.items():
            with self.subTest(text):
                valid, errors = proposal_prompt.parse_answer(space, text, set(), 2)
                self.assertEqual(valid, [])
                self.assertTrue(errors[0].startswith(error), errors)

    def test_malformed_json_is_retried_with_the_error(self):
        with StandIn([{"content": "{configs: [oops"},
                      {"content": "```json\n" + answer({"block": "mbconv", "stem.width": 16}) + "\n```"}]) as s:
            r = self.proposer(s).propose(request(count=1))
        self.assertEqual(configs_of(r), [(1, 1)])
        self.assertEqual((r.usage.model_calls, r.usage.prompt_tokens, r.error), (2, 200, ""))
        retry = s.requests[1]["body"]["messages"]
        self.assertEqual(retry[2]["role"], "assistant")
        self.assertIn("not valid JSON", retry[3]["content"])

    def test_wrong_choices_and_duplicates_are_told_back(self):
        outcomes = [(1, 1, "completed"), (2, 0, "failed")]
        with StandIn([{"content": answer({"block": "resnet", "stem.width": 8},      # no such choice
                                         {"block": "mbconv", "stem.width": 16},    # told before
                                         {"block": "convnext", "stem.width": 32})},  # no such width
                      {"content": answer({"block": "mbconv", "stem.width": 8},
                                         {"block": "mbconv", "stem.width": 8})},    # a duplicate within
                      {"content": answer({"block": "convnext", "stem.width": 16})}]) as s:
            r = self.proposer(s).propose(request(count=2, outcomes=outcomes, pending=[(0, 0)]))
        self.assertEqual(configs_of(r), [(1, 0), (2, 1)])
        told = s.requests[1]["body"]["messages"][-1]["content"]
        self.assertIn('block="resnet" is not a choice', told)
        self.assertIn("was proposed before", told)
        self.assertIn('stem.width=32 is not a choice', told)

    def test_http_errors_and_timeouts_are_retried(self):
        with StandIn([{"status": 429, "body": "slow down", "retry_after": 0},
                      {"status": 500, "body": "boom"},
                      {"sleep": 1.5, "content": answer({"block": "mbconv"})},
                      {"content": answer({"block": "convnext"})}]) as s:
            r = self.proposer(s, timeout_s=0.5).propose(request(count=1))
        self.assertEqual(configs_of(r), [(2, 1)])
        self.assertEqual(r.usage.model_calls, 4)
        self.assertIn("answered 429 Too Many Requests", self.log.getvalue())
        self.assertIn("answered 500 Internal Server Error", self.log.getvalue())

    def test_a_model_that_cannot_be_used_is_reported_not_hidden(self):
        with StandIn([{"content": ""}]) as dead:
            dead_url = dead.url
        cases = [
            ([{"status": 401, "body": "bad key"}], "the model server answered 401 Unauthorized: check --api-key-file"),
            ([{"status": 404, "body": "no model"}], "the model server answered 404 Not Found at http"),
            ([{"status": 503, "body": "overloaded"}], "the model server answered 503 Service Unavailable"),
            ([{"content": "I cannot do that."}], "3 model call(s) without enough valid configurations (last: the "
                                                 "answer holds no JSON object)"),
            (None, f"could not reach the model server at {dead_url}"),
        ]
        for script, error in cases:
            with self.subTest(error), contextlib.ExitStack() as stack:
                url = stack.enter_context(StandIn(script)).url if script else dead_url
                p = llm_proposer.LlmProposer(url, "m", KEY, timeout_s=1.0, retries=2)
                r = p.propose(request(count=2))
                self.assertEqual(list(r.configs), [], "no random configurations behind the user's back")
                self.assertTrue(r.error.startswith(error), r.error)
                self.assertGreaterEqual(r.usage.model_calls, 1)

    def test_fallback_random_only_when_asked_and_labelled(self):
        with StandIn([{"status": 401, "body": "bad key"}]) as s:
            first = self.proposer(s, retries=0, fallback="random").propose(request(count=2))
            again = self.proposer(s, retries=0, fallback="random").propose(request(count=2))
        self.assertEqual(len(first.configs), 2)
        self.assertEqual(configs_of(first), configs_of(again), "the fallback is seeded")
        self.assertTrue(first.error.startswith("the model server answered 401"), first.error)
        for c in first.configs:
            self.assertEqual(c.fallback, "random")
            self.assertTrue(c.rationale.startswith("fallback: seeded random because the model failed: the model "
                                                   "server answered 401"), c.rationale)
        self.assertNotIn((0, 1), configs_of(first), "never the baseline")
        self.assertEqual(len(set(configs_of(first))), 2)

    def test_a_server_without_schema_mode_is_asked_without_it(self):
        with StandIn([{"status": 400, "body": '{"error": "unknown field response_format"}'},
                      {"content": answer({"block": "mbconv"})}]) as s:
            p = self.proposer(s)
            r = p.propose(request(count=1))
        self.assertEqual(configs_of(r), [(1, 1)])
        self.assertIn("response_format", s.requests[0]["body"])
        self.assertNotIn("response_format", s.requests[1]["body"])
        self.assertEqual(p.schema_mode, "off")

    def test_the_coordinators_deadline_bounds_the_model_calls(self):
        with StandIn([{"sleep": 3.0, "content": answer({"block": "mbconv"})}]) as s:
            started = time.monotonic()
            r = self.proposer(s, timeout_s=60.0).propose(request(count=1), FakeContext(remaining=1.0))
            took = time.monotonic() - started
        self.assertLess(took, 2.5, "it waited for the model past the coordinator's deadline")
        self.assertEqual((len(s.requests), r.usage.model_calls, list(r.configs)), (1, 1, []))
        self.assertIn("left of the deadline", r.error)
        self.assertIn("the answer must come within the coordinator's deadline (the strategy's deadline_s)", r.error)

    def test_a_cancelled_call_stops_calling_the_model(self):
        context = FakeContext()
        with StandIn([{"sleep": 3.0, "content": answer({"block": "mbconv"})}]) as s:
            threading.Timer(0.3, context.cancel).start()
            started = time.monotonic()
            r = self.proposer(s, timeout_s=10.0, retries=3).propose(request(count=1), context)
            took = time.monotonic() - started
        self.assertLess(took, 2.5, "the request in flight was not closed")
        self.assertEqual((len(s.requests), list(r.configs)), (1, []), "no model call after the coordinator gave up")
        self.assertIn("the coordinator gave up on this call", self.log.getvalue())

    def test_the_usage_of_an_answer_the_coordinator_gave_up_on_goes_with_the_next(self):
        def propose(request, context):
            return pb.ProposeResponse(usage=pb.ProposerUsage(prompt_tokens=100, completion_tokens=20, model_calls=2))
        servicer = fp._Servicer(propose)
        late = FakeContext()
        late.active = False
        servicer.Propose(request(), late)
        r = servicer.Propose(request(), FakeContext())
        self.assertEqual((r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.model_calls), (200, 40, 4))
        self.assertIn("answer 1 came after the coordinator gave up", self.log.getvalue())
        r = servicer.Propose(request(), FakeContext())
        self.assertEqual(r.usage.model_calls, 2, "counted once")


def run_main(*argv, env_drop=("FRONTIER_LLM_ENDPOINT", "FRONTIER_LLM_MODEL")):
    """(exit status, stderr) of llm_proposer.main in this process."""
    saved = {k: os.environ.pop(k) for k in env_drop if k in os.environ}
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            llm_proposer.main(list(argv))
    except SystemExit as e:
        return e.code, err.getvalue()
    finally:
        os.environ.update(saved)
    return 0, err.getvalue()


class LlmProposerStartTest(unittest.TestCase):
    def test_endpoint_and_model_are_required_and_checked(self):
        code, err = run_main("--model", "m")
        self.assertEqual(code, 2)
        self.assertIn("--endpoint is required", err)
        code, err = run_main("--endpoint", "http://127.0.0.1:9/v1")
        self.assertEqual(code, 2)
        self.assertIn("--model is required", err)
        code, err = run_main("--endpoint", "127.0.0.1:8080", "--model", "m")
        self.assertIn("must be an http:// or https:// URL", err)
        code, err = run_main("--endpoint", "http://h/v1", "--model", "m", "--api-key-file", "/nonexistent/key")
        self.assertEqual(code, 2)
        self.assertIn("cannot read --api-key-file /nonexistent/key", err)

    def test_a_taken_port_is_refused(self):
        # A stale proposer that shares its port (gRPC's SO_REUSEPORT, as proposers before this one did).
        stale = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
        port = stale.add_insecure_port("127.0.0.1:0")
        stale.start()
        try:
            env = dict(os.environ, PYTHONWARNINGS="ignore")
            done = subprocess.run([sys.executable, os.path.join(ROOT, "proposers", "llm", "frontier-llm-proposer"),
                                   "--endpoint", "http://127.0.0.1:9/v1", "--model", "m",
                                   "--listen", f"127.0.0.1:{port}"],
                                  env=env, capture_output=True, text=True, timeout=30)
        finally:
            stale.stop(0)
        self.assertEqual(done.returncode, 1, done.stderr)
        self.assertIn(f"cannot listen on 127.0.0.1:{port}: port {port} is taken", done.stderr)


if __name__ == "__main__":
    unittest.main()
