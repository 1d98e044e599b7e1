"""frontier-llm-kernels (proposers/llm/kernel_drafter.py) against the stand-in
chat-completions server (llm_standin.py): candidates are taken from fenced
blocks in prose after a <think> prefix and written under names of the
drafter's own; blocks without FRONTIER_PLUGIN, beyond K or over the size cap
are left out with an error; the prompt holds the context and fits its cap;
401/404/unreachable/persistent 5xx exit 3 with a reason; a 500 is retried;
missing flags exit 2. Standard library only (no gRPC stubs needed).

Run: /usr/bin/python3 tests/proposers/kernel_drafter_test.py
"""

import contextlib
import email.utils
import io
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path[:0] = [HERE, os.path.join(ROOT, "proposers", "llm")]

import kernel_drafter as kd  # noqa: E402
from llm_standin import StandIn  # noqa: E402

KEY = "sk-test-kernels-0123456789-secret"
ANSWERS = os.path.join(HERE, "kernel_answers")
PROGRAM = os.path.join(ROOT, "proposers", "llm", "frontier-llm-kernels")
STANDIN = os.path.join(HERE, "llm_standin.py")

CONTRACT = ("torch::Tensor Fn(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v): "
            "softmax(q k^T / sqrt(d)) v for q (B, h, L, d), k and v (B, h, S, d); "
            "frontier::plugin::RegisterAttentionKernelVariant(\"NAME\", Fn) in the function named by "
            "FRONTIER_PLUGIN(...)")
REFERENCE = ("Tensor NaiveAttention(const Tensor& q, const Tensor& k, const Tensor& v) {\n"
             "  const Tensor scores = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(q.size(3)));\n"
             "  return torch::matmul(torch::softmax(scores, -1), v);\n}\n")
EXAMPLE = ('#include "worker/trial/plugin.h"\n'
           "torch::Tensor Mine(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {\n"
           "  return frontier::attention::NaiveAttention(q, k, v);\n}\n"
           'void Register() { frontier::plugin::RegisterAttentionKernelVariant("mine", Mine); }\n'
           "FRONTIER_PLUGIN(Register)\n")
SHAPES = "q (128, 4, 49, 16) fp32, k (128, 4, 49, 16) fp32, v (128, 4, 49, 16) fp32"


def context(**over):
    ctx = {"op": "attention_kernel", "round": 2, "rounds": 3, "count": 2, "target_speedup": 1.5,
           "contract": CONTRACT, "reference_source": REFERENCE, "example_candidate": EXAMPLE,
           "shapes": SHAPES, "dtype": "fp32", "device": "cpu", "threads": 2,
           "compiler": "g++ -std=c++17 -O3 -fPIC -shared -fopenmp -I/frontier X.cc -o X.so",
           "profile": {"bottleneck": "compute-bound", "top_ops": [{"name": "aten::bmm", "share": 0.41}]},
           "gate_rules": ["fresh random draws", "structured inputs: sequence length 1, 65 keys, logits x20"],
           "attempts": [{"candidate": "llm-r1-c1", "round": 1, "outcome": "incorrect",
                         "reason": "differs from the reference: gradient of k too large",
                         "where": "draw 2, gradient of k at [0, 1, 3, 2]", "worst_rel_error": 0.012,
                         "speedup": None, "compile_log": ""},
                        {"candidate": "llm-r1-c2", "round": 1, "outcome": "compile_error",
                         "reason": "g++ failed", "compile_log": "x.cc:12:5: error: 'flash' was not declared"},
                        {"candidate": "fused.cc", "round": 0, "outcome": "timed", "speedup": 1.31,
                         "speedup_interval": [1.2, 1.4]}]}
    ctx.update(over)
    return ctx


def kernel(name, extra=""):
    return ('#include "worker/trial/plugin.h"\n' + extra +
            f"torch::Tensor {name}_fn(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) "
            "{\n  return torch::matmul(torch::softmax(torch::matmul(q, k.transpose(-2, -1)) / 4.0, -1), v);\n}\n"
            f'void Register() {{ frontier::plugin::RegisterAttentionKernelVariant("{name}", {name}_fn); }}\n'
            "FRONTIER_PLUGIN(Register)")


def fenced(code, language="cpp"):
    return f"```{language}\n{code}\n```\n"


class KernelDrafterTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.out = os.path.join(self.dir, "round2")
        os.mkdir(self.out)
        self.key_file = os.path.join(self.dir, "key")
        with open(self.key_file, "w") as f:
            f.write(KEY + "\n")

    def tearDown(self):
        self.tmp.cleanup()

    def run_drafter(self, url, ctx=None, count=2, extra=(), drop=()):
        """(exit status, the JSON line or None, stderr) of kernel_drafter.main in this process."""
        path = os.path.join(self.dir, "context.json")
        with open(path, "w") as f:
            json.dump(context() if ctx is None else ctx, f)
        argv = ["--endpoint", url, "--model", "stand-in-model", "--api-key-file", self.key_file,
                "--timeout-s", "5", "--retries", "2", "--context", path, "--out", self.out,
                "--count", str(count), *extra]
        for flag in drop:
            i = argv.index(flag)
            del argv[i:i + 2]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = kd.main(argv)
            except SystemExit as e:
                code = e.code
        lines = out.getvalue().splitlines()
        self.assertLessEqual(len(lines), 1, out.getvalue())
        self.assertNotIn(KEY, out.getvalue() + err.getvalue(), "the key was printed")
        return code, (json.loads(lines[0]) if lines else None), err.getvalue()

    def files(self):
        return sorted(os.listdir(self.out))

    def read(self, name):
        with open(os.path.join(self.out, name)) as f:
            return f.read()

    def test_candidates_from_prose_after_reasoning(self):
        answer = ("<think>I could try ```cpp\n" + kernel("in_thought") + "\n``` but no.</think>\n"
                  "Here are two faster variants.\n\n1. Folding the scale:\n\n" + fenced(kernel("one")) +
                  "\n\nThe second uses a plain fence:\n" + fenced(kernel("two"), "") +
                  "\n\nBoth should pass the gate.")
        with StandIn([{"content": answer}]) as s:
            code, report, err = self.run_drafter(s.url)
        self.assertEqual(code, 0, err)
        self.assertEqual(self.files(), ["llm-r2-c1.cc", "llm-r2-c2.cc"])
        self.assertEqual(self.read("llm-r2-c1.cc"), kernel("one") + "\n")
        self.assertEqual(self.read("llm-r2-c2.cc"), kernel("two") + "\n")
        self.assertEqual(report["candidates"], [
            {"file": os.path.join(os.path.abspath(self.out), "llm-r2-c1.cc"), "name": "llm-r2-c1"},
            {"file": os.path.join(os.path.abspath(self.out), "llm-r2-c2.cc"), "name": "llm-r2-c2"}])
        self.assertEqual((report["calls"], report["prompt_tokens"], report["completion_tokens"]), (1, 100, 20))
        self.assertEqual(report["errors"], [])
        self.assertEqual(len(s.requests), 1)
        sent = s.requests[0]
        self.assertEqual(sent["authorization"], "Bearer " + KEY)
        self.assertEqual(sent["body"]["model"], "stand-in-model")
        self.assertEqual(sent["body"]["temperature"], 0.7)
        self.assertEqual([m["role"] for m in sent["body"]["messages"]], ["system", "user"])

    def test_the_prompt_holds_the_context(self):
        with StandIn([{"content": fenced(kernel("a")) + fenced(kernel("b"), "c++")}]) as s:
            code, report, err = self.run_drafter(s.url)
        self.assertEqual(code, 0, err)
        messages = s.requests[0]["body"]["messages"]
        system, user = messages[0]["content"], messages[1]["content"]
        self.assertIn("exactly 2 candidate(s), each a complete C++ source file in its own ```cpp fenced block",
                      system)
        for text in (CONTRACT, REFERENCE.rstrip(), EXAMPLE.rstrip(), SHAPES, "Dtype: fp32", "Device: cpu",
                     "Threads: 2", "g++ -std=c++17 -O3", "compute-bound", "aten::bmm: 41% of the time",
                     "fresh random draws", "logits x20", "computed in float64", "caching results",
                     "returning (views of) the inputs",
                     "- llm-r1-c1 (round 1): incorrect", "gradient of k too large",
                     "where: draw 2, gradient of k at [0, 1, 3, 2]", "worst relative error: 0.012",
                     "- llm-r1-c2 (round 1): compile_error", "error: 'flash' was not declared",
                     "- fused.cc (round 0): timed, speed-up 1.31x", "1.2-1.4x", "The best so far is fused.cc at 1.31x",
                     "round 2 of 3: 1 more round(s) after this one", "speed-up of 1.5x",
                     "Exactly 2 candidate(s)"):
            self.assertIn(text, user)
        self.assertEqual(report["prompt_bytes"], len(system.encode()) + len(user.encode()))
        self.assertLess(report["prompt_bytes"], kd.PROMPT_CAP)

    def test_the_last_round_says_so(self):
        with StandIn([{"content": fenced(kernel("a"))}]) as s:
            code, _, err = self.run_drafter(s.url, context(round=3, attempts=[], profile=None), count=1)
        self.assertEqual(code, 0, err)
        user = s.requests[0]["body"]["messages"][1]["content"]
        self.assertIn("round 3 of 3: the last round", user)
        self.assertIn("Earlier attempts\nNone yet.", user)
        self.assertNotIn("Profile", user)

    def test_the_prompt_fits_its_cap_with_100_long_attempts(self):
        attempts = [{"candidate": f"llm-r{1 + i // 10}-c{i}", "round": 1 + i // 10, "outcome": "compile_error",
                     "reason": "failed " * 200, "where": "draw 1 " * 100, "worst_rel_error": None,
                     "speedup": None, "compile_log": f"attempt {i}: error: " + "x" * 5000} for i in range(100)]
        ctx = context(attempts=attempts, reference_source="// reference\n" + "int x;\n" * 4000,
                      rounds=12, round=11)
        with StandIn([{"content": fenced(kernel("a")) + fenced(kernel("b"))}]) as s:
            code, report, err = self.run_drafter(s.url, ctx)
        self.assertEqual(code, 0, err)
        messages = s.requests[0]["body"]["messages"]
        size = sum(len(m["content"].encode()) for m in messages)
        self.assertEqual(report["prompt_bytes"], size)
        self.assertLessEqual(size, kd.PROMPT_CAP)
        user = messages[1]["content"]
        self.assertIn("attempt 99: error", user, "the newest attempt is shown")
        self.assertNotIn("attempt 79: error", user, "at most the 20 newest")
        self.assertRegex(user, r"\(\d+ older attempt\(s\) left out\.\)")
        self.assertIn("more bytes left out]", user, "the reference and logs are cut, saying so")
        self.assertIn(CONTRACT, user)
        self.assertIn(SHAPES, user)
        self.assertIn("round 11 of 12", user)

    def test_blocks_without_frontier_plugin_other_languages_and_more_than_k(self):
        answer = ("Notes.\n" + fenced("int helper() { return 1; }") + "\nBuild with:\n" +
                  fenced("g++ -shared x.cc", "bash") + "\n" + fenced(kernel("a"), "cc") + fenced(kernel("b")) +
                  fenced(kernel("c")) + "\n```cpp\n" + kernel("cut_off"))
        with StandIn([{"content": answer}]) as s:
            code, report, err = self.run_drafter(s.url)
        self.assertEqual(code, 0, err)
        self.assertEqual(self.files(), ["llm-r2-c1.cc", "llm-r2-c2.cc"])
        self.assertIn('"a"', self.read("llm-r2-c1.cc"))
        self.assertIn('"b"', self.read("llm-r2-c2.cc"))
        self.assertEqual(report["errors"], [
            "answer 1: block 1 has no FRONTIER_PLUGIN(...): skipped",
            "answer 1: block 2 is ```bash, not C++: skipped",
            "answer 1: block 6 is not closed (the answer was cut off?): skipped",
            "answer 1: 1 more usable block(s) than the 2 asked for: not used"])
        self.assertEqual(report["calls"], 1)

    def test_an_oversized_block_is_dropped_and_the_missing_one_asked_for(self):
        big = kernel("big", "// " + "y" * (300 * 1024) + "\n")
        with StandIn([{"content": fenced(big) + fenced(kernel("small"))},
                      {"content": "One more:\n" + fenced(kernel("small")) + fenced(kernel("third"))}]) as s:
            code, report, err = self.run_drafter(s.url)
        self.assertEqual(code, 0, err)
        self.assertEqual(self.files(), ["llm-r2-c1.cc", "llm-r2-c2.cc"])
        self.assertIn('"small"', self.read("llm-r2-c1.cc"))
        self.assertIn('"third"', self.read("llm-r2-c2.cc"))
        self.assertEqual(report["errors"][0], "answer 1: block 1 is 300 KiB, over the 256 KiB limit: dropped")
        self.assertIn("answer 2: block 1 repeats an earlier candidate: skipped", report["errors"])
        self.assertEqual((report["calls"], report["prompt_tokens"], report["completion_tokens"]), (2, 200, 40))
        follow_up = s.requests[1]["body"]["messages"]
        self.assertEqual([m["role"] for m in follow_up], ["system", "user", "assistant", "user"])
        self.assertIn("gave 1 usable candidate(s) of the 2 asked for", follow_up[3]["content"])
        self.assertIn("over the 256 KiB limit", follow_up[3]["content"])
        self.assertIn("Write 1 more", follow_up[3]["content"])
        self.assertLess(len(follow_up[2]["content"]), 40 * 1024, "the repeated answer is cut")

    def test_a_response_over_2_mib_is_not_read(self):
        with StandIn([{"content": "x" * (3 << 20)}, {"content": fenced(kernel("a"))}]) as s:
            code, report, err = self.run_drafter(s.url, count=1)
        self.assertEqual(code, 0, err)
        self.assertEqual(report["errors"], ["answer 1: the response is longer than 2 MiB: not read"])
        self.assertEqual(self.files(), ["llm-r2-c1.cc"])
        self.assertEqual(len(s.requests[1]["body"]["messages"]), 2, "asked again as at first")

    def test_at_most_one_more_call_and_zero_candidates_is_still_drafted(self):
        with StandIn([{"content": "I would rather describe the idea: tile the keys."}]) as s:
            code, report, err = self.run_drafter(s.url)
        self.assertEqual(code, 0, err)
        self.assertEqual(self.files(), [])
        self.assertEqual(len(s.requests), 2)
        self.assertEqual(report["candidates"], [])
        self.assertEqual(report["errors"], ["answer 1: no fenced code block", "answer 2: no fenced code block"])

    def test_the_model_cannot_choose_file_names(self):
        outside = os.path.join(self.dir, "x.cc")
        answer = ("Save the first as ../../etc/x.cc and the second as /tmp/evil.cc.\n"
                  "```cpp title=\"../x.cc\"\n// file: ../x.cc\n" + kernel("a") + "\n```\n"
                  "```cpp\n// file: /tmp/evil.cc\n" + kernel("b") + "\n```\n")
        with StandIn([{"content": answer}]) as s:
            code, report, err = self.run_drafter(s.url)
        self.assertEqual(code, 0, err)
        self.assertEqual(self.files(), ["llm-r2-c1.cc", "llm-r2-c2.cc"])
        self.assertEqual(sorted(os.listdir(self.dir)), ["context.json", "key", "round2"])
        self.assertFalse(os.path.exists(outside))
        self.assertTrue(self.read("llm-r2-c1.cc").startswith("// file: ../x.cc\n"))
        self.assertEqual([c["name"] for c in report["candidates"]], ["llm-r2-c1", "llm-r2-c2"])

    def test_a_link_in_the_folder_is_replaced_not_followed(self):
        target = os.path.join(self.dir, "target.cc")
        with open(target, "w") as f:
            f.write("untouched\n")
        os.symlink(target, os.path.join(self.out, "llm-r2-c1.cc"))
        with StandIn([{"content": fenced(kernel("a"))}]) as s:
            code, _, err = self.run_drafter(s.url, count=1)
        self.assertEqual(code, 0, err)
        with open(target) as f:
            self.assertEqual(f.read(), "untouched\n")
        self.assertFalse(os.path.islink(os.path.join(self.out, "llm-r2-c1.cc")))

    def test_401_exits_3_naming_it(self):
        with StandIn([{"status": 401, "body": '{"error": "invalid api key"}'}]) as s:
            code, report, err = self.run_drafter(s.url)
        self.assertEqual(code, 3)
        self.assertEqual(len(s.requests), 1, "auth errors are not retried")
        self.assertEqual(err.strip().splitlines(), [
            "frontier-llm-kernels: the model server answered 401 Unauthorized: check --api-key-file "
            "(or FRONTIER_LLM_API_KEY)"])
        self.assertEqual(report["candidates"], [])
        self.assertEqual(report["calls"], 1)
        self.assertIn("401", report["errors"][-1])

    def test_404_exits_3(self):
        with StandIn([{"content": fenced(kernel("a"))}]) as s:
            code, report, err = self.run_drafter(s.url.replace("/v1", "/v2"))
        self.assertEqual(code, 3)
        self.assertIn("the model server answered 404 Not Found at ", err)
        self.assertIn("check --endpoint", err)
        self.assertIn("--model 'stand-in-model'", err)
        self.assertEqual(report["calls"], 1)

    def test_nothing_listening_exits_3_quickly(self):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        started = time.monotonic()
        code, report, err = self.run_drafter(f"http://127.0.0.1:{port}/v1", extra=["--timeout-s", "3",
                                                                                   "--retries", "3"])
        elapsed = time.monotonic() - started
        self.assertEqual(code, 3)
        self.assertLess(elapsed, 3.0, "well under --timeout-s x --retries")
        self.assertIn("could not reach the model server at", err)
        self.assertIn("(4 tries)", err)
        self.assertEqual(report["calls"], 4)

    def test_500_then_200_is_drafted_after_a_retry(self):
        with StandIn([{"status": 500, "body": "boom"},
                      {"content": fenced(kernel("a")) + fenced(kernel("b"))}]) as s:
            code, report, err = self.run_drafter(s.url)
        self.assertEqual(code, 0, err)
        self.assertEqual(len(report["candidates"]), 2)
        self.assertEqual(report["calls"], 2)
        self.assertEqual(report["prompt_tokens"], 100, "the 500 reported no usage")

    def test_persistent_503_exits_3_after_the_retries_honouring_retry_after(self):
        with StandIn([{"status": 503, "body": "overloaded", "retry_after": 0}]) as s:
            code, report, err = self.run_drafter(s.url)
        self.assertEqual(code, 3)
        self.assertEqual(len(s.requests), 3)
        self.assertIn("the model server answered 503 Service Unavailable: overloaded (3 tries)", err)

    def test_a_long_retry_after_is_not_waited_for(self):
        started = time.monotonic()
        with StandIn([{"status": 429, "body": "quota", "retry_after": 3600}]) as s:
            code, _, err = self.run_drafter(s.url)
        self.assertEqual(code, 3)
        self.assertLess(time.monotonic() - started, 2.0)
        self.assertIn("asks to wait 3600 s (Retry-After)", err)

    def test_a_short_retry_after_is_honoured(self):
        with StandIn([{"status": 429, "body": "slow down", "retry_after": 1},
                      {"content": fenced(kernel("a"))}]) as s:
            started = time.monotonic()
            code, report, err = self.run_drafter(s.url, count=1)
        self.assertEqual(code, 0, err)
        self.assertGreaterEqual(time.monotonic() - started, 0.9)
        self.assertEqual(report["calls"], 2)

    def test_a_timeout_is_a_try(self):
        with StandIn([{"sleep": 1.0, "content": "late"}, {"content": fenced(kernel("a"))}]) as s:
            code, report, err = self.run_drafter(s.url, count=1, extra=["--timeout-s", "0.4"])
        self.assertEqual(code, 0, err)
        self.assertEqual(report["calls"], 2)
        with StandIn([{"sleep": 0.6, "content": "late"}]) as s:
            code, report, err = self.run_drafter(s.url, count=1, extra=["--timeout-s", "0.3", "--retries", "1"])
        self.assertEqual(code, 3)
        self.assertIn("within --timeout-s 0.3 (2 tries)", err)

    def test_reasoning_and_retry_after_forms(self):
        self.assertEqual(kd.strip_reasoning("  <think>a ```cpp``` b</think>rest"), "rest")
        self.assertIsNone(kd.strip_reasoning("<think>never closed"))
        self.assertEqual(kd.strip_reasoning("template put the tag in the prompt</think>\nanswer"), "\nanswer")
        self.assertEqual(kd.strip_reasoning("no reasoning"), "no reasoning")
        self.assertEqual(kd._retry_after({"Retry-After": "2.5"}), 2.5)
        self.assertIsNone(kd._retry_after({}))
        date = email.utils.formatdate(time.time() + 20, usegmt=True)
        self.assertAlmostEqual(kd._retry_after({"Retry-After": date}), 20, delta=2)
        blocks = kd.fenced_blocks("~~~\nA\n~~~\n  ```C++ {x}\n  B\n  ```\n````\n```\n````")
        self.assertEqual(blocks, [("", "A", True), ("c++", "B", True), ("", "```", True)])

    def test_every_answer_empty_exits_3(self):
        with StandIn([{"content": ""}, {"content": "<think>tiling the keys would"}]) as s:
            code, report, err = self.run_drafter(s.url)
        self.assertEqual(code, 3)
        self.assertEqual(len(s.requests), 2)
        self.assertIn("the model answered nothing usable: 2 empty answer(s)", err)
        self.assertEqual(report["calls"], 2)
        self.assertEqual(report["prompt_tokens"], 200, "tokens of every call are counted")

    def test_a_failing_follow_up_keeps_what_the_first_answer_gave(self):
        with StandIn([{"content": fenced(kernel("a"))}, {"status": 401}]) as s:
            code, report, err = self.run_drafter(s.url)
        self.assertEqual(code, 0, err)
        self.assertEqual(self.files(), ["llm-r2-c1.cc"])
        self.assertIn("answer 2: the model server answered 401", report["errors"][-1])

    def test_usage_errors_exit_2(self):
        with StandIn([{"content": fenced(kernel("a"))}]) as s:
            code, report, err = self.run_drafter(s.url, drop=["--model"])
            self.assertEqual((code, report), (2, None))
            self.assertIn("--model", err)
            code, _, err = self.run_drafter(s.url, drop=["--endpoint"])
            self.assertEqual(code, 2)
            self.assertIn("--endpoint", err)
            code, _, err = self.run_drafter(s.url, context(attempts=[{"speedup": "fast"}]))
            self.assertEqual(code, 2)
            self.assertIn("'attempts[0].speedup' must be a number or null", err)
            code, _, err = self.run_drafter(s.url, {"op": "attention_kernel"})
            self.assertEqual(code, 2)
            self.assertIn("'round' is missing", err)
            os.rmdir(self.out)
            code, _, err = self.run_drafter(s.url)
            self.assertEqual(code, 2)
            self.assertIn("is not an existing folder", err)
        self.assertEqual(s.requests, [], "no call on a usage error")

    def test_a_file_that_cannot_be_written_exits_2(self):
        def refuse(out_dir, name, code):
            raise PermissionError(13, "Permission denied")
        saved, kd.write_candidate = kd.write_candidate, refuse
        try:
            with StandIn([{"content": fenced(kernel("a"))}]) as s:
                code, report, err = self.run_drafter(s.url, count=1)
        finally:
            kd.write_candidate = saved
        self.assertEqual(code, 2)
        self.assertIn("cannot write ", err)
        self.assertIn("llm-r2-c1.cc: Permission denied", report["errors"][-1])
        self.assertEqual((report["candidates"], report["calls"]), ([], 1))

    def test_end_to_end_as_processes_with_the_canned_attention_answers(self):
        """The stand-in as a process (--script, --port-file, --record), the executable as the lab runs it."""
        port_file = os.path.join(self.dir, "port")
        record = os.path.join(self.dir, "requests.jsonl")
        standin = subprocess.Popen([sys.executable, STANDIN, "--script", os.path.join(ANSWERS,
                                    "attention_round1.json"), "--port-file", port_file, "--record", record])
        try:
            deadline = time.monotonic() + 10
            while not os.path.exists(port_file) and time.monotonic() < deadline:
                time.sleep(0.05)
            with open(port_file) as f:
                port = int(f.read())
            ctx_path = os.path.join(self.dir, "context.json")
            with open(ctx_path, "w") as f:
                json.dump(context(round=1, attempts=[]), f)
            env = dict(os.environ, FRONTIER_LLM_API_KEY=KEY)
            done = subprocess.run([PROGRAM, "--endpoint", f"http://127.0.0.1:{port}/v1", "--model", "m",
                                   "--context", ctx_path, "--out", self.out, "--count", "2", "--timeout-s", "10"],
                                  capture_output=True, text=True, env=env, timeout=30)
        finally:
            standin.terminate()
            standin.wait(10)
        self.assertEqual(done.returncode, 0, done.stderr)
        report = json.loads(done.stdout)
        self.assertEqual([c["name"] for c in report["candidates"]], ["llm-r1-c1", "llm-r1-c2"])
        self.assertIn('RegisterAttentionKernelVariant("lab_llm_baddbmm"', self.read("llm-r1-c1.cc"))
        self.assertEqual(report["errors"], [])
        with open(record) as f:
            recorded = [json.loads(line) for line in f]
        self.assertEqual(len(recorded), 1)
        self.assertEqual(recorded[0]["authorization"], "Bearer " + KEY)
        self.assertNotIn(KEY, done.stdout + done.stderr)

    def test_the_canned_answers_are_two_candidates_each(self):
        expect = {"attention_round1.json": ["lab_llm_baddbmm", "lab_llm_prescaled"],
                  "attention_round2.json": ["lab_llm_prescaled_bmm", "lab_llm_sharpened"]}
        for name, variants in expect.items():
            with open(os.path.join(ANSWERS, name)) as f:
                script = json.load(f)
            codes, errors = kd.candidates_of(script[0]["content"], 2, 1, set())
            self.assertEqual(errors, [], name)
            self.assertEqual(len(codes), 2, name)
            for code, variant in zip(codes, variants):
                self.assertIn(f'RegisterAttentionKernelVariant("{variant}"', code)
                self.assertIn('#include "worker/trial/plugin.h"', code)


if __name__ == "__main__":
    unittest.main()
