"""frontier-llm-proposer against the stand-in chat-completions server
(llm_standin.py): answers that are malformed JSON, wrong choices, duplicates,
timeouts and HTTP 429/500 are retried with the errors given back to the
model; after the retries the rest is a seeded random proposal that says so;
tokens and latency are reported; the key is sent but never logged; a server
that refuses JSON-schema mode is asked without it.

Run: FRONTIER_PROTO_PYTHON=<build>/python /usr/bin/python3 llm_proposer_test.py
"""

import io
import json
import logging
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path[:0] = [HERE, os.path.join(ROOT, "proposers"), os.path.join(ROOT, "proposers", "llm")]

import frontier_proposer as fp  # noqa: E402
import llm_proposer  # noqa: E402
from llm_standin import StandIn  # noqa: E402

pb = fp.proposer_pb2
KEY = "sk-test-0123456789abcdef-secret"


def request(count=2, outcomes=(), pending=()):
    r = pb.ProposeRequest(experiment_id="exp-1", experiment_name="tiny", count=count, repeats=1, steps=20, seed=3)
    r.dimensions.add(name="block", choices_json=['"basic"', '"mbconv"', '"convnext"'], ordinal=False,
                     baseline_index=0)
    r.dimensions.add(name="stem.width", choices_json=["8", "16"], ordinal=True, baseline_index=1)
    r.objectives.add(metric="val_accuracy", maximize=True)
    r.objectives.add(metric="params", maximize=False)
    r.constraints.add(metric="params", has_max=True, max=50000)
    for block, width, status in outcomes:
        o = r.outcomes.add(status=status, seeds=1, seeds_completed=1 if status == "completed" else 0)
        o.config.choices["block"] = block
        o.config.choices["stem.width"] = width
        if status == "completed":
            o.metrics["val_accuracy"] = 0.5
            o.metrics["params"] = 1000
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

    def test_valid_answer_with_usage_key_and_schema(self):
        with StandIn([{"content": answer({"block": "mbconv", "stem.width": 8}, {"block": "convnext"})}]) as s:
            r = self.proposer(s).propose(request())
        self.assertEqual(configs_of(r), [(1, 0), (2, 1)])  # a missing dimension keeps the baseline's value
        self.assertEqual(r.configs[0].rationale, "try {'block': 'mbconv', 'stem.width': 8}")
        self.assertEqual(r.proposer, "llm:stand-in-model")
        self.assertEqual((r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.model_calls), (100, 20, 1))
        self.assertGreaterEqual(r.usage.model_latency_ms, 0)
        sent = s.requests[0]
        self.assertEqual(sent["authorization"], "Bearer " + KEY)
        self.assertEqual(sent["body"]["model"], "stand-in-model")
        enum = sent["body"]["response_format"]["json_schema"]["schema"]["properties"]["configs"]["items"][
            "properties"]["config"]["properties"]["block"]["enum"]
        self.assertEqual(enum, ["basic", "mbconv", "convnext"])
        text = sent["body"]["messages"][1]["content"]
        self.assertIn("maximize val_accuracy, minimize params", text)
        self.assertIn("params <= 50000", text)
        self.assertIn("block: [\"basic\", \"mbconv\", \"convnext\"] (the block family", text)

    def test_malformed_json_is_retried_with_the_error(self):
        with StandIn([{"content": "{configs: [oops"},
                      {"content": "```json\n" + answer({"block": "mbconv", "stem.width": 16}) + "\n```"}]) as s:
            r = self.proposer(s).propose(request(count=1))
        self.assertEqual(configs_of(r), [(1, 1)])
        self.assertEqual(r.usage.model_calls, 2)
        self.assertEqual(r.usage.prompt_tokens, 200)
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
        prompt = s.requests[0]["body"]["messages"][1]["content"]
        self.assertIn("Recent failures:", prompt)
        self.assertIn("out of memory", prompt)
        self.assertIn("do not propose again", prompt)

    def test_http_errors_and_timeouts_are_retried(self):
        with StandIn([{"status": 429, "body": "slow down", "retry_after": 0},
                      {"status": 500, "body": "boom"},
                      {"sleep": 1.5, "content": answer({"block": "mbconv"})},
                      {"content": answer({"block": "convnext"})}]) as s:
            r = self.proposer(s, timeout_s=0.5).propose(request(count=1))
        self.assertEqual(configs_of(r), [(2, 1)])
        self.assertEqual(r.usage.model_calls, 4)
        self.assertIn("HTTP 429", self.log.getvalue())
        self.assertIn("HTTP 500", self.log.getvalue())

    def test_falls_back_to_seeded_random_and_says_so(self):
        with StandIn([{"content": "I cannot do that."}]) as s:
            first = self.proposer(s, retries=2).propose(request(count=2))
            again = self.proposer(s, retries=2).propose(request(count=2))
        self.assertEqual(len(s.requests), 6)
        self.assertEqual(len(first.configs), 2)
        self.assertEqual(configs_of(first), configs_of(again), "the fallback is seeded")
        for c in first.configs:
            self.assertTrue(c.rationale.startswith("fallback: seeded random after 3 model calls"), c.rationale)
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

    def test_a_dead_server_gives_the_fallback_not_an_exception(self):
        with StandIn([{"content": ""}]) as s:
            url = s.url
        p = llm_proposer.LlmProposer(url, "m", KEY, timeout_s=0.5, retries=1)
        r = p.propose(request(count=1))
        self.assertEqual(len(r.configs), 1)
        self.assertIn("no answer from", r.configs[0].rationale)


if __name__ == "__main__":
    unittest.main()
