"""The Python SDK against frontier-trial: the same FLOPs for the same network,
the same protocol, and a clear result for every way a script can go wrong.

Run by ctest (sdk.*) with FRONTIER_TRIAL_BINARY set; needs /usr/bin/python3
(Debian's python3-torch)."""
import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "worker", "python"))
sys.path.insert(0, os.path.join(ROOT, "search_spaces", "byo_pytorch"))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import frontier_trial  # noqa: E402
import protocol  # noqa: E402
import train as byo  # noqa: E402  (the example's model)

TRIAL = os.environ.get("FRONTIER_TRIAL_BINARY", os.path.join(ROOT, "build", "worker", "frontier-trial"))
EXAMPLE = os.path.join(ROOT, "search_spaces", "byo_pytorch", "train.py")
ENV = dict(os.environ, FRONTIER_THREADS="1", OMP_NUM_THREADS="1")

# The quickstart baseline (search_spaces/quickstart.yaml) as a frontier-trial spec.
QUICKSTART = {"schema": 1, "trial_id": "flops", "seed": 1,
              "task": {"dataset": "synthetic", "batch_size": 128, "steps": 2, "eval_every": 0, "warmup_steps": 1},
              "arch": {"stem": {"kind": "conv3x3", "width": 24, "stride": 2, "depth": 1},
                       "stages": [{"block": "basic", "width": 32, "depth": 1, "stride": 1},
                                  {"block": "basic", "width": 64, "depth": 1, "stride": 2}],
                       "norm": "batch", "activation": "relu"},
              "runtime": {"threads": 1}}


def run(cmd, spec=None, env=None, timeout=300):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec or {}, f)
    artifacts = tempfile.mkdtemp()  # frontier-trial and the SDK write their (default) profile there
    try:
        args = cmd + ["--spec", f.name] if spec is not None else cmd
        if cmd == [TRIAL]:
            args += ["--artifact-dir", artifacts]
        env = dict(env or ENV)
        env.setdefault("FRONTIER_ARTIFACT_DIR", artifacts)
        p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout)
        p.artifacts = sorted(os.listdir(artifacts))
        return p
    finally:
        os.unlink(f.name)
        shutil.rmtree(artifacts, ignore_errors=True)


def trial_flops(spec):
    p = run([TRIAL], spec)
    events = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    start = next((e for e in events if e.get("event") == "start"), None)
    if start is None:
        raise AssertionError(f"frontier-trial printed no start event: {p.stdout[-1000:]} {p.stderr[-1000:]}")
    return start["train_flops_per_step"]


class BlasKernels(unittest.TestCase):
    """OpenBLAS's generic kernels on a CPU it does not know are replaced by the CPU's own."""

    def test_core_for_a_cpu_openblas_does_not_know(self):
        from frontier_trial.blas import openblas_core_for
        avx512 = {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx2", "fma"}
        self.assertEqual(openblas_core_for("Prescott", avx512), "SkylakeX")
        self.assertEqual(openblas_core_for("prescott", {"avx2", "fma"}), "Haswell")
        self.assertEqual(openblas_core_for("Prescott", {"sse3"}), "")
        self.assertEqual(openblas_core_for("Haswell", avx512), "")
        self.assertEqual(openblas_core_for("", avx512), "")


class FlopCrossCheck(unittest.TestCase):
    """The SDK's dispatcher-level count equals frontier-trial's for the same network."""

    def check(self, attention):
        spec = copy.deepcopy(QUICKSTART)
        if attention != "none":
            spec["arch"]["stages"][1]["attention"] = {"kind": attention, "heads": 4}
        model = byo.Net(64, attention, 4)
        counted = frontier_trial.count_model_flops(model, torch.zeros(128, 1, 28, 28))
        self.assertGreater(counted["forward_per_step"], 0)
        self.assertEqual(counted["train_per_step"], trial_flops(spec))

    def test_quickstart_baseline(self):
        self.check("none")

    def test_with_mhsa(self):
        self.check("mhsa")

    def test_with_linear_attention(self):
        self.check("linear")

    def test_bf16_autocast_counts_the_same(self):
        model = byo.Net(64, "mhsa", 4)
        fp32 = frontier_trial.count_model_flops(model, torch.zeros(8, 1, 28, 28))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            bf16 = frontier_trial.count_model_flops(model, torch.zeros(8, 1, 28, 28))
        self.assertEqual(fp32["forward_per_step"], bf16["forward_per_step"])

    def test_formulas_by_hand(self):
        conv = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1, groups=1)
        got = frontier_trial.count_model_flops(conv, torch.zeros(2, 3, 16, 16))["forward_per_step"]
        self.assertEqual(got, 2 * 2 * 8 * 8 * 8 * 3 * 3 * 3)   # 2 N Cout Hout Wout Cin k k
        grouped = torch.nn.Conv2d(8, 8, 3, padding=1, groups=4)
        got = frontier_trial.count_model_flops(grouped, torch.zeros(1, 8, 5, 5))["forward_per_step"]
        self.assertEqual(got, 2 * 8 * 5 * 5 * 2 * 3 * 3)
        linear = torch.nn.Linear(10, 7)
        got = frontier_trial.count_model_flops(linear, torch.zeros(4, 6, 10))["forward_per_step"]
        self.assertEqual(got, 2 * 24 * 10 * 7)


SMALL = {"schema": 1, "trial_id": "t-sdk", "seed": 3, "params": {"width": 32, "attention": "linear"},
         "task": {"steps": 24, "eval_every": 12, "warmup_steps": 4,
                  "target": {"metric": "val_accuracy", "value": 0.01}}}


class Protocol(unittest.TestCase):
    """Both implementations pass the same conformance check."""

    def test_frontier_trial(self):
        spec = copy.deepcopy(QUICKSTART)
        spec["task"].update({"dataset": "fashion-mnist", "steps": 24, "eval_every": 12, "warmup_steps": 4,
                             "val_size": 1000})
        p = run([TRIAL], spec)
        protocol.check_output(p.stdout, p.returncode)

    def test_python_sdk_example(self):
        p = run(["/usr/bin/python3", EXAMPLE], SMALL)
        events, result = protocol.check_output(p.stdout, p.returncode)
        self.assertEqual(result["status"], "completed", p.stderr[-2000:])
        self.assertEqual(result["trial_id"], "t-sdk")
        self.assertEqual(result["steps_run"], 24)
        self.assertEqual(result["step_time_ms"]["n"], 24 - 4 - 3)  # warm-up and the 3 profiled steps left out
        self.assertEqual(result["profile"]["recorded"], "profile_calls.json")
        self.assertEqual([e["step"] for e in result["evals"]], [12, 24])
        self.assertEqual(result["steps_to_target"], 12)
        self.assertIn("test_accuracy", result)
        self.assertEqual(result["flops"]["train_per_step"],
                         frontier_trial.count_model_flops(byo.Net(32, "linear", 4),
                                                          torch.zeros(128, 1, 28, 28))["train_per_step"])

    def test_checker_rejects_a_bad_stream(self):
        with self.assertRaises(protocol.ProtocolError):
            protocol.check_output('{"event": "start"}\nnot json\n', 0)
        with self.assertRaises(protocol.ProtocolError):
            protocol.check_output('{"event": "result", "schema": 1, "status": "completed"}\n', 0)
        with self.assertRaises(protocol.ProtocolError):
            protocol.check_output('{"event": "result", "schema": 1, "status": "failed", "error": "x",'
                                  ' "error_kind": "runtime"}\n', 0)


def script(body):
    """A throwaway training script using the SDK; returns its path."""
    f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False)
    f.write(textwrap.dedent(f"""
        import sys, time, torch
        sys.path.insert(0, {os.path.join(ROOT, 'worker', 'python')!r})
        import frontier_trial
        trial = frontier_trial.start()
        model = torch.nn.Linear(4, 2)
        trial.count_flops(model, torch.zeros(8, 4))
    """) + textwrap.dedent(body))
    f.close()
    return f.name


def run_script(body, spec, env=None):
    """Runs a throwaway SDK script (see script) on `spec`; returns the finished process."""
    path = script(body)
    try:
        return run(["/usr/bin/python3", path], spec, env=env)
    finally:
        os.unlink(path)


# Whether a 48 MiB malloc gets its own mapping (glibc's dynamic mmap threshold stops at 32 MiB; the
# SDK's policy, frontier-trial's, keeps blocks up to 64 MiB on the heap). Prints "mapped N".
MAPPED_PROBE = """
import ctypes
class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
before = libc.mallinfo2().hblks
block = libc.malloc(48 << 20)
print(f"mapped {libc.mallinfo2().hblks - before}", file=sys.stderr)
libc.free(block)
"""


class HostAllocator(unittest.TestCase):
    def test_the_sdk_keeps_the_heap_as_frontier_trial_does(self):
        p = run_script(MAPPED_PROBE + """
with trial.step(8) as s:
    s.loss = 1.0
trial.eval(1, val_accuracy=0.5, val_loss=1.0)
trial.finish(test_accuracy=0.5, test_loss=1.0)
""", {"trial_id": "t", "task": {"steps": 1, "warmup_steps": 0}})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("mapped 0", p.stderr)
        result = json.loads(p.stdout.splitlines()[-1])
        self.assertEqual(result["host_allocator"], "glibc mmap_threshold=64MiB trim_threshold=1GiB top_pad=64MiB")
        # The probe tells the policies apart: glibc's defaults map the block.
        bare = subprocess.run(["/usr/bin/python3", "-c", "import sys\n" + MAPPED_PROBE], capture_output=True,
                              text=True, env=ENV)
        self.assertIn("mapped 1", bare.stderr)


ONE_STEP = {"trial_id": "t", "task": {"steps": 1, "warmup_steps": 0}}  # a completed result's step statistics


class Failures(unittest.TestCase):
    def result_of(self, body, spec=None, expect_exit=None):
        p = run_script(body, spec or {"trial_id": "t", "task": {"steps": 5, "warmup_steps": 1}})
        events, result = protocol.check_output(p.stdout, p.returncode)
        if expect_exit is not None:
            self.assertEqual(p.returncode, expect_exit)
        return result

    def test_nan_loss_is_diverged(self):
        r = self.result_of("""
            for i in range(trial.steps):
                with trial.step(8) as s:
                    s.loss = torch.tensor(float('nan') if i == 2 else 1.0)
            trial.finish()
        """, expect_exit=3)
        self.assertEqual(r["status"], "diverged")
        self.assertIn("at step 2", r["error"])
        self.assertIsNone(r["final_train_loss"])  # null: the worker's parser refuses a bare NaN

    def test_non_finite_values_are_null_as_the_worker_reads_them(self):
        r = self.result_of("""
            with trial.step(8) as s:
                s.loss = 1.0
            trial.eval(val_loss=1.0, val_accuracy=float('inf'))
            trial.finish(test_loss=1.0, test_accuracy=float('nan'))
        """, ONE_STEP, expect_exit=0)
        self.assertIsNone(r["test_accuracy"])
        self.assertIsNone(r["evals"][0]["val_accuracy"])

    def test_finish_takes_tensor_and_numpy_metrics_and_names_any_other_kind(self):
        r = self.result_of("""
            import numpy
            with trial.step(8) as s:
                s.loss = 1.0
            trial.eval(val_accuracy=0.5, val_loss=1.0)
            trial.finish(test_accuracy=torch.tensor(0.75), test_loss=numpy.float32(0.5), split="test")
        """, ONE_STEP, expect_exit=0)
        self.assertEqual((r["status"], r["test_accuracy"], r["test_loss"], r["split"]), ("completed", 0.75, 0.5, "test"))
        r = self.result_of("""
            with trial.step(8) as s:
                s.loss = 1.0
            trial.finish(test_accuracy=torch.ones(3))
        """, expect_exit=2)
        self.assertEqual(r["status"], "failed")
        self.assertIn("trial.finish(test_accuracy=...): a Tensor is not a number or a JSON value", r["error"])

    def test_exception_is_failed_with_the_traceback_tail(self):
        r = self.result_of("""
            with trial.step(8) as s:
                s.loss = 1.0
            def load_batch():
                raise ValueError("bad shard 17")
            load_batch()
        """, expect_exit=2)
        self.assertEqual(r["status"], "failed")
        self.assertEqual(r["error_kind"], "runtime")
        self.assertIn("ValueError: bad shard 17", r["error"])
        # Where it was raised is on the first line, which reports show.
        self.assertRegex(r["error"].splitlines()[0], r"ValueError: bad shard 17 \(at \S+\.py:\d+ in load_batch\)")
        self.assertNotIn("Traceback (most recent call last)", r["error"])

    def test_incorrect_output_is_failed_with_kind_incorrect(self):
        r = self.result_of("""
            with trial.step(8) as s:
                s.loss = 1.0
            reference, fused = torch.zeros(4), torch.tensor([0.0, 0.0, 0.31, 0.0])
            error = (fused - reference).abs().max()
            if error > 1e-4:
                trial.incorrect(f"fused pooling differs from the reference by {float(error):.2f}",
                                max_abs_error=error, tolerance=1e-4, op="bev_pool")
            trial.finish()
        """, expect_exit=2)
        self.assertEqual((r["status"], r["error_kind"]), ("failed", "incorrect"))
        self.assertEqual(r["error"], "fused pooling differs from the reference by 0.31")
        self.assertAlmostEqual(r["check"]["max_abs_error"], 0.31, places=6)
        self.assertEqual((r["check"]["tolerance"], r["check"]["op"]), (1e-4, "bev_pool"))
        self.assertEqual(r["steps_run"], 1)

    def test_incorrect_needs_a_reason(self):
        r = self.result_of("trial.incorrect('  ')\n", expect_exit=2)
        self.assertEqual(r["error_kind"], "runtime")  # the ValueError, uncaught
        self.assertIn("trial.incorrect() needs a reason", r["error"])

    def test_memory_error_is_out_of_memory(self):
        r = self.result_of("raise MemoryError('cannot allocate 4 GiB')\n", expect_exit=2)
        self.assertEqual(r["error_kind"], "out_of_memory")

    def test_exit_without_finish_is_failed(self):
        r = self.result_of("""
            with trial.step(8) as s:
                s.loss = 1.0
        """, expect_exit=2)
        self.assertIn("without calling trial.finish()", r["error"])

    def test_a_stray_print_goes_to_standard_error_not_the_protocol(self):
        p = run_script("""
            import ctypes
            print("epoch 1: loss 0.3")
            ctypes.CDLL(None).printf(b"from C\\n")
            ctypes.CDLL(None).fflush(None)
            with trial.step(8) as s:
                s.loss = 1.0
            trial.eval(1, val_accuracy=0.5, val_loss=1.0)
            trial.finish(test_accuracy=0.5, test_loss=1.0)
        """, {"trial_id": "t", "task": {"steps": 1, "warmup_steps": 0}})
        events, result = protocol.check_output(p.stdout, p.returncode)  # every stdout line is the protocol's
        self.assertEqual(result["status"], "completed")
        self.assertIn("epoch 1: loss 0.3", p.stderr)
        self.assertIn("from C", p.stderr)
        self.assertNotIn("epoch", p.stdout)

    def test_a_script_that_sets_no_loss_is_warned(self):
        p = run_script("""
            with trial.step(8) as s:
                pass
            trial.finish(test_accuracy=0.5, test_loss=1.0)
        """, {"trial_id": "t", "task": {"steps": 1, "warmup_steps": 0}})
        self.assertEqual(p.returncode, 0, p.stderr)
        r = json.loads(p.stdout.splitlines()[-1])
        self.assertIn("frontier_trial: warning: no step set its loss", p.stderr)
        self.assertEqual(len(r["warnings"]), 1, r.get("warnings"))
        self.assertIn("no step set its loss", r["warnings"][0])

    def test_params_steps_other_than_task_steps_is_warned(self):
        r = self.result_of("""
            for i in range(trial.steps):
                with trial.step(8) as s:
                    s.loss = 1.0
            trial.eval(2, val_accuracy=0.5, val_loss=1.0)
            trial.finish(test_accuracy=0.5, test_loss=1.0)
        """, {"trial_id": "t", "params": {"steps": 50}, "task": {"steps": 2, "warmup_steps": 0}}, expect_exit=0)
        self.assertEqual(r["steps_run"], 2)
        self.assertIn("params.steps (50) is not the trial's step count", r["warnings"][0])
        self.assertNotIn("warnings", self.result_of("""
            with trial.step(8) as s:
                s.loss = 1.0
            trial.eval(1, val_accuracy=0.5, val_loss=1.0)
            trial.finish(test_accuracy=0.5, test_loss=1.0)
        """, {"trial_id": "t", "task": {"steps": 1, "warmup_steps": 0}}, expect_exit=0))

    def test_stop_file_and_sigterm_ask_to_stop(self):
        stop = tempfile.mktemp()
        p = run_script("""
            import os, signal
            print(trial.should_stop(), file=sys.stderr)
            open(os.environ['FRONTIER_STOP_FILE'], 'w').close()
            print(trial.should_stop(), file=sys.stderr)
            trial._stop_requested = False
            os.remove(os.environ['FRONTIER_STOP_FILE'])
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)
            print(trial.should_stop(), file=sys.stderr)
            with trial.step(8) as s:
                s.loss = 1.0
            trial.eval(1, val_accuracy=0.5, val_loss=1.0)
            trial.finish()
        """, {"trial_id": "t", "task": {"steps": 1, "warmup_steps": 0}}, env=dict(ENV, FRONTIER_STOP_FILE=stop))
        self.assertEqual(p.stderr.split(), ["False", "True", "True"], p.stderr)
        self.assertEqual(p.returncode, 0)

    def test_worker_peak_is_used(self):
        p = run_script("""
            for i in range(3):
                with trial.step(8) as s:
                    s.loss = 1.0
            trial.eval(3, val_accuracy=0.5, val_loss=1.0)
            trial.finish()
        """, {"trial_id": "t", "task": {"steps": 3, "warmup_steps": 1}},
                       env=dict(ENV, FRONTIER_PEAK_FLOPS='{"fp32": 1e11, "source": "calibrated:worker-1"}'))
        result = json.loads(p.stdout.splitlines()[-1])
        self.assertEqual(result["peak_flops"], {"flops_per_s": 1e11, "dtype": "fp32",
                                                "source": "calibrated:worker-1"})

    def test_worker_peak_of_another_thread_count_is_not_used(self):
        p = run_script("""
            for i in range(3):
                with trial.step(8) as s:
                    s.loss = 1.0
            trial.eval(3, val_accuracy=0.5, val_loss=1.0)
            trial.finish()
        """, {"trial_id": "t", "task": {"steps": 3, "warmup_steps": 1}},
                       env=dict(ENV, FRONTIER_PEAK_FLOPS='{"fp32": 1e11, "source": "calibrated:cpu-gemm", '
                                                         '"threads": 999, "device": "cpu"}'))
        result = json.loads(p.stdout.splitlines()[-1])
        self.assertEqual(result["peak_flops"]["source"], "measured:cpu-gemm", result["peak_flops"])

    def test_unreadable_spec_is_a_spec_failure(self):
        path = script("trial.finish()\n")
        try:
            p = subprocess.run(["/usr/bin/python3", path, "--spec", "/nonexistent/spec.json"],
                               capture_output=True, text=True, env=ENV)
        finally:
            os.unlink(path)
        result = json.loads(p.stdout.splitlines()[-1])
        self.assertEqual((result["status"], result["error_kind"], p.returncode), ("failed", "spec", 2))


CPU_MEMORY_LIB = os.path.join(os.path.dirname(TRIAL), "libfrontier_cpu_memory.so")


class Memory(unittest.TestCase):
    """A command trial's CPU peak memory: LibTorch's CPU allocator counted through
    the library the worker names (FRONTIER_CPU_MEMORY_LIB), as frontier-trial counts it."""

    BODY = """
        with trial.step(8) as s:
            x = torch.empty(2 << 20)  # 8 MiB, freed within the step
            del x
            s.loss = 1.0
        trial.eval(1, val_accuracy=0.5, val_loss=1.0)
        trial.finish(test_accuracy=0.5, test_loss=1.0)
    """
    SPEC = {"trial_id": "t", "task": {"steps": 1, "warmup_steps": 0}}

    def result(self, env):
        p = run_script(self.BODY, self.SPEC, env=env)
        events, result = protocol.check_output(p.stdout, p.returncode)
        self.assertEqual(result["status"], "completed", p.stderr[-2000:])
        return result

    def test_counted_as_frontier_trial_counts_it(self):
        if not os.path.exists(CPU_MEMORY_LIB):
            self.skipTest(f"no {CPU_MEMORY_LIB} (a runner-only build)")
        r = self.result(dict(ENV, FRONTIER_CPU_MEMORY_LIB=CPU_MEMORY_LIB))
        self.assertEqual(r["peak_memory_kind"], "cpu-allocated-growth")
        self.assertGreaterEqual(r["peak_memory_mb"], 8.0)
        self.assertLess(r["peak_memory_mb"], 8.5)  # the tensor, and the SDK's own few bytes

    def test_without_the_library_resident_memory(self):
        env = {k: v for k, v in ENV.items() if k != "FRONTIER_CPU_MEMORY_LIB"}
        self.assertTrue(self.result(env)["peak_memory_kind"].startswith("cpu-rss-growth"))

    def test_a_library_that_does_not_load_falls_back(self):
        r = self.result(dict(ENV, FRONTIER_CPU_MEMORY_LIB="/nonexistent/libfrontier_cpu_memory.so"))
        self.assertTrue(r["peak_memory_kind"].startswith("cpu-rss-growth"))


LATENCY_METRICS = ("latency_ms", "latency_p99_ms", "latency_b1_ms", "latency_b1_p99_ms")


class Latency(unittest.TestCase):
    """trial.measure_latency: frontier-trial's inference-latency measurement and fields."""

    def sdk_result(self):
        p = run_script("""
            for i in range(3):
                with trial.step(8) as s:
                    s.loss = 1.0
            trial.eval(3, val_accuracy=0.5, val_loss=1.0)
            latency = trial.measure_latency(model, torch.zeros(8, 4), repetitions=25, warmup=2)
            assert latency["batch"]["n"] == 25, latency
            trial.finish(test_accuracy=0.5, test_loss=1.0)
        """, {"trial_id": "t", "task": {"steps": 3, "warmup_steps": 1}})
        events, result = protocol.check_output(p.stdout, p.returncode)
        self.assertEqual(result["status"], "completed", p.stderr[-2000:])
        return result

    def test_batch_one_and_the_batch(self):
        r = self.sdk_result()
        for metric in LATENCY_METRICS:
            self.assertGreater(r[metric], 0, metric)
        self.assertGreaterEqual(r["latency_p99_ms"], r["latency_ms"])
        self.assertGreaterEqual(r["latency_b1_p99_ms"], r["latency_b1_ms"])
        self.assertEqual(r["latency"]["batch"]["batch_size"], 8)
        self.assertEqual(r["latency"]["batch_1"]["batch_size"], 1)
        self.assertEqual((r["latency"]["batch"]["n"], r["latency"]["batch"]["warmup"]), (25, 2))
        self.assertEqual(r["latency"]["batch"]["median_ms"], r["latency_ms"])

    def test_same_fields_as_frontier_trial(self):
        spec = copy.deepcopy(QUICKSTART)
        spec["task"].update({"steps": 3, "warmup_steps": 1})
        spec["latency"] = {"repetitions": 20}
        spec["profile"] = {"steps": 0}
        p = run([TRIAL], spec)
        native = json.loads(p.stdout.splitlines()[-1])
        self.assertEqual(native["status"], "completed", p.stderr[-2000:])
        sdk = self.sdk_result()
        for metric in LATENCY_METRICS:
            self.assertIn(metric, native)
        self.assertEqual(sorted(native["latency"]), sorted(sdk["latency"]))
        self.assertEqual(sorted(native["latency"]["batch"]), sorted(sdk["latency"]["batch"]))
        self.assertEqual(native["latency"]["batch"]["batch_size"], 128)
        self.assertEqual(native["latency"]["batch"]["n"], 20)
        self.assertEqual(sdk["latency"]["batch"]["from_evaluation"], 0)

    def test_no_latency_without_the_call(self):
        p = run_script("""
            with trial.step(8) as s:
                s.loss = 1.0
            trial.finish()
        """, {"trial_id": "t", "task": {"steps": 1, "warmup_steps": 0}})
        result = json.loads(p.stdout.splitlines()[-1])
        self.assertNotIn("latency_ms", result)
        self.assertNotIn("bottleneck", result)  # the worker judges it, by frontier-trial's rules


class Deploy(unittest.TestCase):
    """trial.measure_deploy: a command trial's model as it would ship, in frontier-trial's deploy shape."""

    def test_three_formats_from_the_spec(self):
        p = run_script("""
            torch.manual_seed(0)
            net = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                      torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 3))
            x, y = torch.randn(16, 1, 8, 8), torch.randint(0, 3, (16,))
            with trial.step(16) as s:
                s.loss = torch.nn.functional.cross_entropy(net(x), y).item()
            net.eval()
            accuracy = lambda m: (m(x).argmax(1) == y).float().mean().item()
            trial.eval(1, val_accuracy=accuracy(net), val_loss=1.0)
            trial.measure_deploy(net, x, accuracy, calibration=[x[:8], x[8:]])
            trial.finish(test_accuracy=0.5, test_loss=1.0)
        """, {"trial_id": "t", "task": {"steps": 1, "warmup_steps": 0}, "profile": {"steps": 0},
              "deploy": {"formats": ["float", "torchscript", "int8"], "batch": [1, 4], "repetitions": 5,
                         "warmup": 1}})
        events, r = protocol.check_output(p.stdout, p.returncode)
        self.assertEqual(r["status"], "completed", p.stderr[-2000:])
        d = r["deploy"]
        self.assertEqual((d["batch"], d["threads"], d["quality_metric"]), (1, 1, "val_accuracy"))
        for f in ("float", "torchscript", "int8"):
            self.assertNotIn("error", d[f], d[f])
            self.assertGreater(d[f]["latency_ms"], 0)
            self.assertEqual([s["batch_size"] for s in d[f]["settings"]], [1, 4])
            self.assertEqual(d[f]["settings"][0]["n"], 5)
            self.assertGreater(d[f]["size_bytes"], 0)
        # folding and freezing change rounding only; the quality is the trained model's
        self.assertEqual(d["float"]["val_accuracy"], r["val_accuracy"])
        self.assertEqual(d["torchscript"]["val_accuracy"], r["val_accuracy"])
        self.assertIn("folded", d["float"]["mode"])
        self.assertEqual(d["int8"]["quantized_layers"], 2)  # the conv (with its batch norm and ReLU) and the linear
        self.assertEqual(d["int8"]["calibration_samples"], 16)
        self.assertIn(d["engine"], ("onednn", "qnnpack"))

    def test_refusals_name_the_problem(self):
        from frontier_trial import deploy
        net = torch.nn.Sequential(torch.nn.Linear(4, 2))
        with self.assertRaisesRegex(ValueError, "deploy format 'onnx' is not in this SDK"):
            deploy.measure_deploy(net, torch.zeros(2, 4), lambda m: 0.0, section={"formats": ["onnx"]})
        d = deploy.measure_deploy(net, torch.zeros(2, 4), lambda m: 0.0,
                                  section={"formats": ["float", "int8"], "engine": "fbgemm", "repetitions": 2})
        self.assertNotIn("error", d["float"])
        self.assertRegex(d["int8"]["error"], "the quantized engine 'fbgemm' is not in this torch build")


class Profiling(unittest.TestCase):
    """The SDK records a few steps after warm-up with torch's profiler and leaves them out of every
    training figure; the worker summarizes the recording (worker/profile/, tested there and in
    e2e.profile_run, which compares the verdicts with frontier-trial's)."""

    BODY = """
        for i in range(trial.steps):
            with trial.step(8) as s:
                s.loss = model(torch.randn(8, 4)).sum()
                s.loss.backward()
        trial.eval(val_accuracy=0.5)
        trial.finish()
    """

    def result(self, task, profile=None):
        spec = {"trial_id": "prof", "task": task}
        if profile is not None:
            spec["profile"] = profile
        p = run_script(self.BODY, spec)
        result = json.loads(p.stdout.splitlines()[-1])
        self.assertEqual(result["status"], "completed", p.stderr[-2000:])
        return result, p.artifacts

    def test_steps_after_warm_up_are_recorded_and_left_out(self):
        r, files = self.result({"steps": 8, "warmup_steps": 2})
        self.assertEqual(r["profile"]["steps"], {"first": 2, "count": 3, "recorded": 3})
        self.assertEqual(r["step_time_ms"]["n"], 8 - 2 - 3)
        self.assertEqual(r["steps_run"], 8)
        self.assertEqual(r["profile"]["profiled_step_time_ms"]["n"], 3)
        self.assertGreater(r["profile"]["cost_s"], 0)
        self.assertEqual(files, ["profile_calls.json"])

    def test_profiled_steps_are_not_train_time(self):
        p = run_script("""
            for i in range(trial.steps):
                with trial.step(8) as s:
                    s.loss = model(torch.randn(8, 4)).sum()
                    time.sleep(0.25 if 2 <= i < 5 else 0)  # only the profiled steps are slow
            trial.eval(val_accuracy=0.5)
            trial.finish()
        """, {"trial_id": "prof", "task": {"steps": 8, "warmup_steps": 2}})
        r = json.loads(p.stdout.splitlines()[-1])
        self.assertGreaterEqual(r["profile"]["profiled_step_time_ms"]["median"], 250)
        self.assertLess(r["train_time_s"], 0.25)
        self.assertLess(r["step_time_ms"]["p90"], 250)

    def test_the_recording_is_what_the_worker_reads(self):
        with tempfile.TemporaryDirectory() as artifacts:
            p = run_script(self.BODY, {"trial_id": "prof", "task": {"steps": 6, "warmup_steps": 1}},
                           env=dict(ENV, FRONTIER_ARTIFACT_DIR=artifacts))
            self.assertEqual(p.returncode, 0, p.stderr[-2000:])
            with open(os.path.join(artifacts, "profile_calls.json")) as f:
                recording = json.load(f)
        self.assertEqual((recording["schema"], recording["basis"], recording["first"], recording["count"]),
                         (1, "wall", 1, 3))
        self.assertEqual([s["step"] for s in recording["steps"]], [1, 2, 3])
        addmm = [c for c in recording["calls"] if c["name"] == "aten::addmm"]
        self.assertEqual(len(addmm), 3, "one linear layer's forward a step")
        self.assertEqual(addmm[0]["shapes"][:3], [[2], [8, 4], [4, 2]])
        for c in recording["calls"]:
            self.assertLessEqual(c["start_us"], c["end_us"])

    def test_a_loop_that_leaves_the_window_early_stops_the_recording(self):
        with tempfile.TemporaryDirectory() as artifacts:
            p = run_script("""
                for i in range(trial.steps):
                    with trial.step(8) as s:
                        s.loss = model(torch.randn(8, 4)).sum()
                    if i == 2:
                        break  # inside the profiled steps 2..4
                trial.eval(val_accuracy=0.5)
                trial.measure_latency(model, torch.zeros(8, 4), repetitions=20, warmup=2)
                trial.finish()
            """, {"trial_id": "prof", "task": {"steps": 8, "warmup_steps": 2}},
                env=dict(ENV, FRONTIER_ARTIFACT_DIR=artifacts))
            result = json.loads(p.stdout.splitlines()[-1])
            self.assertEqual(result["status"], "completed", p.stderr[-2000:])
            with open(os.path.join(artifacts, "profile_calls.json")) as f:
                recording = json.load(f)
        self.assertEqual([s["step"] for s in recording["steps"]], [2])
        forwards = [c for c in recording["calls"] if c["name"] == "aten::addmm"]
        self.assertEqual(len(forwards), 1, "the latency passes after the loop were recorded")

    def test_off_and_too_short(self):
        r, files = self.result({"steps": 6, "warmup_steps": 2}, {"steps": 0})
        self.assertNotIn("profile", r)
        self.assertEqual((r["step_time_ms"]["n"], files), (4, []))
        r, files = self.result({"steps": 5, "warmup_steps": 2})
        self.assertIn("not profiled: 5 steps leave fewer than warmup_steps + 1 = 3 unprofiled steps",
                      r["profile"]["error"])
        self.assertEqual((r["step_time_ms"]["n"], files), (3, []))
        r, _ = self.result({"steps": 8, "warmup_steps": 2}, {"steps": 2, "start": 6})
        self.assertEqual(r["profile"]["steps"]["first"], 6)
        self.assertEqual(r["step_time_ms"]["n"], 4)

    def test_nvtx_ranges_mark_steps_and_phases(self):
        from frontier_trial import profile as profile_mod
        ranges, stack = [], []

        class FakeNvtx:
            @staticmethod
            def range_push(name):
                stack.append(name)
                ranges.append(name)

            @staticmethod
            def range_pop():
                stack.pop()

        trial = frontier_trial.start(spec={"trial_id": "nvtx", "task": {"steps": 6, "warmup_steps": 1},
                                           "profile": {"steps": 2, "tool": "nsys"}}, out=open(os.devnull, "w"))
        trial._nvtx = trial._profiler._nvtx = profile_mod.Nvtx(torch.device("cpu"), nvtx=FakeNvtx)
        model = torch.nn.Linear(4, 2)
        trial.count_flops(model, torch.zeros(8, 4))
        for x in trial.batches([torch.randn(8, 4)] * 6):
            with trial.step(8) as s:
                s.loss = model(x).sum()
        trial.measure_latency(model, torch.zeros(8, 4), repetitions=3, warmup=1)
        result = trial.finish()
        self.assertEqual(stack, [], "every range pushed was popped")
        self.assertEqual(ranges.count("frontier.step"), 6)
        self.assertEqual(ranges.count("frontier.profiled_step"), 2)
        self.assertEqual(ranges.count("frontier.data_wait"), 7)  # 6 batches and the end of the loader
        self.assertEqual((ranges.count("frontier.flop_count"), ranges.count("frontier.latency")), (1, 1))
        self.assertEqual(result["profile"]["nvtx_range"], "frontier.profiled_step")
        self.assertEqual(result["step_time_ms"]["n"], 6 - 1 - 2)


if __name__ == "__main__":
    unittest.main()
