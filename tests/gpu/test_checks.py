"""tests/gpu/checks.py on canned frontier-trial outputs: each check passes on a
good output and fails, with a FAIL line naming the problem, on each way it can
be broken. No GPU needed (ctest gpu.checks)."""
import copy
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import checks  # noqa: E402


def result(**fields):
    r = {"event": "result", "schema": 1, "status": "completed", "device": "cuda:0", "device_name": "NVIDIA H200",
         "precision": "fp32", "memory_format": "contiguous", "mfu": 0.31, "tf32": {"cublas": False, "cudnn": False},
         "peak_flops": {"flops_per_s": 6.7e13, "dtype": "fp32", "source": "table:NVIDIA H200"},
         "step_time_ms": {"median": 4.0}, "peak_memory_mb": 812.5, "peak_memory_kind": "cuda-max-allocated",
         "profile": {"tool": "libtorch", "cuda": True,
                     "top_operators": [{"name": "aten::mm", "self_cuda_ms": 1.5}, {"name": "aten::add_"}]},
         "bottleneck": {"verdict": "compute-bound", "basis": "profile"}}
    r.update(fields)
    return r


def progress(*losses):
    return [{"event": "progress", "step": 10 * (i + 1), "loss": x} for i, x in enumerate(losses)]


class Checks(unittest.TestCase):
    def outputs(self, **runs):
        """{name: (events, result)} as checks.py reads them."""
        return {name: (events, r) for name, (events, r) in runs.items()}

    def expect(self, check, runs, problem=None):
        got = check(runs)
        if problem is None:
            self.assertIsNone(got)
        else:
            self.assertIsNotNone(got, f"{check.__name__} passed a broken output")
            self.assertIn(problem, got)

    def test_mfu(self):
        self.expect(checks.check_mfu, {"a": ([], result()), "b": ([], result(mfu=1.0))})
        self.expect(checks.check_mfu, {"a": ([], result(mfu=1.5))}, "not in (0, 1]")
        self.expect(checks.check_mfu, {"a": ([], result(mfu=0.0))}, "not in (0, 1]")
        self.expect(checks.check_mfu, {"a": ([], result(mfu=None))}, "not in (0, 1]")
        self.expect(checks.check_mfu, {"a": ([], result(status="failed", error="CUDA error"))}, "status failed")
        self.expect(checks.check_mfu, {"a": ([], result(tf32={"cublas": False, "cudnn": True}))}, "TF32 is not off")
        self.expect(checks.check_mfu, {"a": ([], result(tf32=None))}, "TF32 is not off")

    def test_bf16_faster(self):
        fp32, bf16 = result(), result(precision="bf16", step_time_ms={"median": 1.5})
        self.expect(checks.check_bf16_faster, {"fp32": ([], fp32), "bf16": ([], bf16)})
        slow = result(precision="bf16", step_time_ms={"median": 4.5})
        self.expect(checks.check_bf16_faster, {"fp32": ([], fp32), "bf16": ([], slow)}, "is not below")
        self.expect(checks.check_bf16_faster, {"fp32": ([], fp32), "bf16": ([], result(device="cpu",
                                                                                      precision="bf16"))},
                    "not on CUDA")
        self.expect(checks.check_bf16_faster, {"fp32": ([], fp32), "bf16": ([], result())}, "not fp32 and bf16")

    def test_peak_memory(self):
        self.expect(checks.check_peak_memory, {"a": ([], result())})
        self.expect(checks.check_peak_memory, {"a": ([], result(peak_memory_mb=0.0))}, "peak memory 0.0 MB")
        self.expect(checks.check_peak_memory, {"a": ([], result(peak_memory_kind="cpu-rss-growth"))},
                    "not cuda-max-allocated")

    def test_profile_cuda(self):
        self.expect(checks.check_profile_cuda, {"a": ([], result())})
        no_cuda = result()
        no_cuda["profile"]["cuda"] = False
        self.expect(checks.check_profile_cuda, {"a": ([], no_cuda)}, "no CUDA times")
        no_times = result()
        no_times["profile"]["top_operators"] = [{"name": "aten::mm", "self_cuda_ms": 0.0}]
        self.expect(checks.check_profile_cuda, {"a": ([], no_times)}, "carry no CUDA time")
        r = result()
        del r["profile"]
        self.expect(checks.check_profile_cuda, {"a": ([], r)}, "no libtorch profile")
        self.expect(checks.check_profile_cuda, {"a": ([], result(bottleneck={"verdict": "unknown",
                                                                              "basis": "none"}))},
                    "rests on none")

    def test_loss_scaler(self):
        fp16 = result(precision="fp16")
        self.expect(checks.check_loss_scaler, {"f": (progress(2.3, 1.1, 0.7), fp16)})
        self.expect(checks.check_loss_scaler, {"f": (progress(2.3, 1.1, 0.7), result(precision="fp16",
                                                                                     loss_scale=32768.0))})
        self.expect(checks.check_loss_scaler, {"f": (progress(2.3, 2.4), fp16)}, "did not fall")
        self.expect(checks.check_loss_scaler, {"f": (progress(2.3, float("nan")), fp16)}, "not finite")
        self.expect(checks.check_loss_scaler, {"f": (progress(2.3, 1.0), result(precision="fp16",
                                                                                loss_scale=3.0))},
                    "power of two")
        self.expect(checks.check_loss_scaler, {"f": (progress(2.3, 1.0), result())}, "not fp16")
        self.expect(checks.check_loss_scaler, {"f": ([], result(precision="fp16", status="diverged",
                                                                error="loss became nan"))}, "diverged")

    def test_op_gated(self):
        def bev(variant, **op):
            return result(bev={"pooling": variant}, phases={"gate_s": 0.8},
                          op=dict({"op": "bev_pool", "variant": variant, "reference": "naive", "speedup": 3.2,
                                   "forward_backward_ms": 0.4, "reference_forward_backward_ms": 1.3}, **op))
        ok = {"fused": ([], bev("fused")), "depth_fused": ([], bev("depth_fused"))}
        self.expect(checks.check_op_gated, ok)
        self.expect(checks.check_op_gated, dict(ok, depth_fused=([], bev("depth_fused", speedup=None))),
                    "no timing")
        self.expect(checks.check_op_gated, dict(ok, fused=([], bev("naive"))), "ran variant naive")
        ungated = result(bev={"pooling": "fused"}, phases={"gate_s": 0.0}, op=bev("fused")["op"])
        self.expect(checks.check_op_gated, dict(ok, fused=([], ungated)), "no gate")

    def test_pooling_equal(self):
        naive = result(bev={"pooling": "naive"}, val_iou=0.412)
        fused = result(bev={"pooling": "fused"}, val_iou=0.414)
        self.expect(checks.check_pooling_equal, {"naive": ([], naive), "fused": ([], fused)})
        off = result(bev={"pooling": "fused"}, val_iou=0.39)
        self.expect(checks.check_pooling_equal, {"naive": ([], naive), "fused": ([], off)}, "val IoU differs")
        self.expect(checks.check_pooling_equal, {"naive": ([], naive), "fused": ([], naive)},
                    "pooling variants")


class CommandLine(unittest.TestCase):
    """check.sh calls `checks.py CHECK FILES...`: PASS/FAIL line and exit status."""

    def write(self, lines):
        f = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
        f.write("".join(json.dumps(x) + "\n" for x in lines))
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name

    def run_checks(self, *args):
        return subprocess.run([sys.executable, os.path.join(HERE, "checks.py"), *args], capture_output=True,
                              text=True)

    def test_pass_and_fail(self):
        good = self.write([{"event": "start"}, result()])
        p = self.run_checks("mfu", good)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertTrue(p.stdout.startswith("PASS: mfu"), p.stdout)
        bad = self.write([result(mfu=1.7)])
        p = self.run_checks("mfu", good, bad)
        self.assertEqual(p.returncode, 1)
        self.assertTrue(p.stdout.startswith("FAIL: mfu: "), p.stdout)
        self.assertIn("1.7", p.stdout)

    def test_missing_or_empty_output_fails(self):
        empty = self.write([])
        for path in (empty, "/nonexistent/out.jsonl"):
            p = self.run_checks("peak-memory", path)
            self.assertEqual(p.returncode, 1)
            self.assertIn("FAIL: peak-memory: cannot check", p.stdout)

    def test_pair_checks_need_two_outputs(self):
        p = self.run_checks("bf16-faster", self.write([result()]))
        self.assertEqual(p.returncode, 1)
        self.assertIn("compares 2 outputs", p.stdout)

    def test_unknown_check_is_a_usage_error(self):
        self.assertEqual(self.run_checks("nonsense", "x").returncode, 64)


class Script(unittest.TestCase):
    """check.sh verify DIR: the script's own checking on a run's canned outputs."""

    RUNS = ["baseline", "bf16_channels_last", "matmul_fp32", "matmul_bf16", "fp16", "bev_naive", "bev_fused",
            "bev_depth_fused"]

    def good_run(self):
        return {"baseline": [result()], "bf16_channels_last": [result(precision="bf16")],
                "matmul_fp32": [result()], "matmul_bf16": [result(precision="bf16", step_time_ms={"median": 1.0})],
                "fp16": progress(2.3, 0.9) + [result(precision="fp16")],
                "bev_naive": [result(bev={"pooling": "naive"}, val_iou=0.41)],
                "bev_fused": [self.pooled("fused")], "bev_depth_fused": [self.pooled("depth_fused")]}

    @staticmethod
    def pooled(variant, **fields):
        return result(**dict({"bev": {"pooling": variant}, "val_iou": 0.41, "phases": {"gate_s": 0.8},
                              "op": {"op": "bev_pool", "variant": variant, "reference": "naive", "speedup": 3.2,
                                     "forward_backward_ms": 0.4}}, **fields))

    def verify(self, run):
        folder = tempfile.mkdtemp()
        for name, lines in run.items():
            with open(os.path.join(folder, name + ".jsonl"), "w") as f:
                f.write("".join(json.dumps(x) + "\n" for x in lines))
        p = subprocess.run(["bash", os.path.join(HERE, "check.sh"), "verify", folder], capture_output=True,
                           text=True, env=dict(os.environ, PYTHON=sys.executable))
        for name in run:
            os.unlink(os.path.join(folder, name + ".jsonl"))
        os.rmdir(folder)
        return p

    def test_a_good_run_passes(self):
        p = self.verify(self.good_run())
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(p.stdout.count("PASS: "), 10, p.stdout)
        self.assertIn("PASS: all 9 checks", p.stdout)

    def test_each_broken_check_fails_the_script(self):
        breaks = {
            "mfu": ("baseline", [result(mfu=2.0)]),
            "bf16-faster": ("matmul_bf16", [result(precision="bf16", step_time_ms={"median": 9.0})]),
            "peak-memory": ("bf16_channels_last", [result(precision="bf16", peak_memory_mb=0)]),
            "profile-cuda": ("baseline", [result(profile={"tool": "libtorch", "cuda": False, "top_operators": []})]),
            "loss-scaler": ("fp16", progress(2.3, 2.9) + [result(precision="fp16")]),
            "pooling-equal": ("bev_depth_fused", [self.pooled("depth_fused", val_iou=0.2)]),
            "op-gated": ("bev_depth_fused", [self.pooled("depth_fused", phases={"gate_s": 0})]),
            "cuda": ("bev_naive", [result(device="cpu", bev={"pooling": "naive"}, val_iou=0.41)]),
        }
        self.assertEqual(set(breaks), set(checks.CHECKS))
        for check, (run_name, lines) in breaks.items():
            run = self.good_run()
            run[run_name] = lines
            p = self.verify(run)
            self.assertEqual(p.returncode, 1, f"{check}: {p.stdout}")
            self.assertIn(f"FAIL: {check}: ", p.stdout)
            self.assertIn("checks failed", p.stdout)

    def test_a_missing_output_fails_the_script(self):
        run = self.good_run()
        del run["fp16"]
        p = self.verify(run)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn("FAIL: loss-scaler: cannot check", p.stdout)

    def test_script_is_strict(self):
        with open(os.path.join(HERE, "check.sh")) as f:
            text = f.read()
        self.assertIn("set -euo pipefail", text)
        self.assertNotIn("set +e", text)


if __name__ == "__main__":
    unittest.main()
