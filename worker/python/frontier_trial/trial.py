"""One trial of a user's own training program, speaking the trial protocol
(docs/trial-protocol.md): read the spec, time steps between device-synchronized
points, print start/progress/eval events and one result line on stdout."""
import json
import math
import os
import random
import signal
import socket
import sys
import time
import traceback

import torch

from . import deploy
from . import flops as flops_mod
from . import measure
from . import profile as profile_mod

SCHEMA = 1
EXIT_COMPLETED, EXIT_FAILED, EXIT_DIVERGED = 0, 2, 3
VERSION = "1"


def _load_spec(spec, argv):
    """The spec: a dict given, `--spec FILE` in argv, FRONTIER_TRIAL_SPEC, or none (a local run)."""
    if spec is not None:
        return dict(spec)
    path = None
    argv = list(sys.argv[1:] if argv is None else argv)
    for i, arg in enumerate(argv):
        if arg == "--spec" and i + 1 < len(argv):
            path = argv[i + 1]
        elif arg.startswith("--spec="):
            path = arg[len("--spec="):]
    path = path or os.environ.get("FRONTIER_TRIAL_SPEC")
    if not path:
        return {}
    with open(path, encoding="utf-8") as f:
        loaded = json.load(f)
    if not isinstance(loaded, dict):
        raise ValueError(f"trial spec {path} is not a JSON object")
    return loaded


def _resolve_device(name):
    name = os.environ.get("FRONTIER_DEVICE") or name or "auto"
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def _json_ready(value):
    """`value` as strict JSON holds it: a NaN or infinite float as null (JSON has neither, and the worker's
    parser refuses the bare NaN that json.dumps writes; frontier-trial writes null), in lists and dicts too."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    return value


def _metric_value(key, value):
    """A metric passed to finish(): a number (a one-element tensor or a numpy scalar too) as a float; a
    string, bool, None, list or dict as it is; anything else is refused, naming the metric."""
    if torch.is_tensor(value) and value.numel() == 1:
        value = value.item()
    elif type(value).__module__ == "numpy" and hasattr(value, "item") and getattr(value, "size", 1) == 1:
        value = value.item()
    if isinstance(value, (bool, str, list, dict)) or value is None:
        return value
    if isinstance(value, (int, float)):
        return float(value)
    raise TypeError(f"trial.finish({key}=...): a {type(value).__name__} is not a number or a JSON value")


def _error_kind(exc):
    text = str(exc)
    if isinstance(exc, MemoryError) or "out of memory" in text or "CUDA out of memory" in text:
        return "out_of_memory"
    return "runtime"


class Step:
    """One timed optimizer step: set `.loss` (tensor or number) and optionally `.lr` inside."""

    def __init__(self, trial, batch_size):
        self._trial = trial
        self.batch_size = int(batch_size)
        self.loss = None
        self.lr = None

    def __enter__(self):
        measure.synchronize(self._trial.device)
        self._index = self._trial._steps_run
        self._trial._profiler.before(self._index)
        self._trial._nvtx.push("frontier.step")
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            return False
        measure.synchronize(self._trial.device)
        seconds = time.perf_counter() - self._t0
        self._trial._nvtx.pop()
        self._trial._profiler.after(self._index)
        self._trial._record_step(self, seconds)
        return False


class _DataWait:
    def __init__(self, trial):
        self._trial = trial

    def __enter__(self):
        self._trial._nvtx.push("frontier.data_wait")
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb):
        self._trial._pending_wait += time.perf_counter() - self._t0
        self._trial._nvtx.pop()
        return False


class Trial:
    # What measure_latency times (frontier-trial's `latency.*.input`).
    LATENCY_INPUT = "the program's example batch, repeated"

    def __init__(self, spec, params, out):
        self.spec = spec
        self._out = out
        self.trial_id = str(spec.get("trial_id", "local"))
        self.seed = int(spec.get("seed", 0))
        self.params = dict(params or {})
        self.params.update(spec.get("params") or {})
        task = spec.get("task") or {}
        runtime = spec.get("runtime") or {}
        self.steps = int(task.get("steps", self.params.get("steps", 100)))
        self._warnings = []
        spec_params = spec.get("params") or {}
        if "steps" in spec_params and "steps" in task and spec_params["steps"] != task["steps"]:
            self._warn(f"params.steps ({spec_params['steps']}) is not the trial's step count: steps come from "
                       f"task.steps ({task['steps']}), which ASHA's rungs and screening set; loop over "
                       "trial.steps, not params['steps']")
        self.eval_every = int(task.get("eval_every", 0))
        self.warmup_steps = int(task.get("warmup_steps", 10))
        self.target = task.get("target")
        self.precision = str(self.params.get("precision", runtime.get("precision", "fp32")))
        if self.precision not in measure.DTYPES:
            raise ValueError(f"precision '{self.precision}' is not one of fp32, bf16, fp16")
        self.memory_format = str(self.params.get("memory_format", runtime.get("memory_format", "contiguous")))
        self.host_allocator = measure.configure_host_allocator()  # before the script allocates its model
        threads = int(os.environ.get("FRONTIER_THREADS") or runtime.get("threads") or 0)
        if threads > 0:
            torch.set_num_threads(threads)
        self.threads = torch.get_num_threads()
        self.device = _resolve_device(runtime.get("device"))
        self.artifact_dir = os.environ.get("FRONTIER_ARTIFACT_DIR") or os.path.join("artifacts", self.trial_id)
        self.progress_every = int(os.environ.get("FRONTIER_PROGRESS_EVERY", "10"))
        self._stop_file = os.environ.get("FRONTIER_STOP_FILE")
        self._stop_requested = False
        self._wall_start = time.perf_counter()
        self._flops = None
        self._param_count = None
        self._peak = None
        self._memory = measure.MemoryTracker(self.device)
        self._started = False
        self._finished = False
        self._pending_wait = 0.0
        self._step_times, self._waits = [], []
        self._train_time = 0.0
        self._steps_run = 0
        self._last_loss = None
        self._batch_size = None
        self._evals = []
        self._last_eval = {}
        self._time_to_target = None
        self._steps_to_target = None
        self._latency = None
        self._deploy = None
        self._nvtx = profile_mod.Nvtx(self.device)
        self._profiler = profile_mod.StepProfiler(spec.get("profile"), self.steps, self.warmup_steps, self.device,
                                                  self.artifact_dir, self.trial_id, self._nvtx)
        self._profiled_times = []  # the profiled steps' times: in no training figure

    # --- what a training script calls -------------------------------------------------------
    def seed_everything(self, seed=None):
        """Seeds Python's random, torch (CPU and CUDA) and numpy when it is installed."""
        seed = self.seed if seed is None else int(seed)
        random.seed(seed)
        torch.manual_seed(seed)
        try:
            import numpy
            numpy.random.seed(seed % (2 ** 32))
        except ImportError:
            pass
        return seed

    def autocast(self):
        """torch.autocast for the trial's precision (a no-op context for fp32)."""
        enabled = self.precision != "fp32"
        dtype = measure.DTYPES[self.precision] if enabled else torch.bfloat16
        return torch.autocast(self.device.type, dtype=dtype, enabled=enabled)

    def count_flops(self, model, example_inputs):
        """Counts the forward FLOPs of `model` on `example_inputs` (one batch) and the trainable
        parameters; a training step is counted as 3 x forward."""
        with self._nvtx.range("frontier.flop_count"):
            self._flops = flops_mod.count_model_flops(model, example_inputs)
        self._param_count = sum(p.numel() for p in model.parameters() if p.requires_grad)
        return self._flops

    def measure_latency(self, model, example_batch, batch_size=None, repetitions=100, warmup=5):
        """Eval-mode forward latency at batch 1 and at `batch_size` (default: the example's),
        as frontier-trial measures it: no autograd, the trial's precision (autocast) and
        memory format, each pass device-synchronized, warm-up excluded, median and p99.
        Call it after training; the result gets latency_ms, latency_p99_ms, latency_b1_ms,
        latency_b1_p99_ms and `latency`. Returns the `latency` object."""
        self._profiler.stop()  # a loop that ended inside the profiled steps: latency is not profiled
        x = example_batch.to(self.device)
        batch = int(batch_size or x.shape[0])
        index = torch.arange(batch, device=x.device) % x.shape[0]
        inputs = {1: x[:1], batch: x.index_select(0, index)}
        if self.memory_format == "channels_last":
            inputs = {b: t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 else t
                      for b, t in inputs.items()}
        was_training = model.training
        model.eval()
        stats = {}
        self._nvtx.push("frontier.latency")
        try:
            with torch.no_grad():
                for b, t in inputs.items():
                    def forward(t=t):
                        with self.autocast():
                            model(t)
                    stats[b] = measure.latency(forward, self.device, repetitions, warmup)
        finally:
            self._nvtx.pop()
            model.train(was_training)
        one, many = stats[1], stats[batch]
        self._latency = {
            "latency_ms": many["median"] * 1e3, "latency_p99_ms": many["p99"] * 1e3,
            "latency_b1_ms": one["median"] * 1e3, "latency_b1_p99_ms": one["p99"] * 1e3,
            "latency": {"mode": "eval, no autograd, forward only", "precision": self.precision,
                        "memory_format": self.memory_format, "device": str(self.device),
                        "synchronized": "cuda: after every pass" if self.device.type == "cuda"
                        else "cpu: synchronous",
                        "batch_1": measure.latency_json(1, one, warmup, self.LATENCY_INPUT),
                        "batch": measure.latency_json(batch, many, warmup, self.LATENCY_INPUT)}}
        self._latency["latency"]["batch"]["from_evaluation"] = 0  # every pass the SDK's own (trial-output.md)
        return self._latency["latency"]

    def measure_deploy(self, model, example_batch, evaluate, calibration=None, quality_metric="val_accuracy"):
        """The trained model as it would ship (docs/byo-model.md, Onboard inference): in each format of the
        spec's deploy section (float, torchscript, int8; without a section float and int8), its quality
        `evaluate(m)` (the validation `quality_metric` of a model m), forward latency per batch and thread
        count, and size. `calibration` yields int8's calibration input batches (training data; default the
        example batch). Call it after training; the result gets `deploy`, which it also returns."""
        self._profiler.stop()  # a loop that ended inside the profiled steps: deployment is not profiled
        was_training = model.training
        self._nvtx.push("frontier.deploy")
        try:
            self._deploy = deploy.measure_deploy(model, example_batch, evaluate, calibration=calibration,
                                                 section=self.spec.get("deploy"), device=self.device,
                                                 memory_format=self.memory_format, quality_metric=quality_metric)
        finally:
            self._nvtx.pop()
            model.train(was_training)
        return self._deploy

    def data_wait(self):
        """`with trial.data_wait(): x, y = next(batches)`: timed apart from the step."""
        return _DataWait(self)

    def batches(self, iterable):
        """Yields from `iterable`, timing each next() as data wait."""
        it = iter(iterable)
        while True:
            with self.data_wait():
                try:
                    batch = next(it)
                except StopIteration:
                    return
            yield batch

    def step(self, batch_size):
        """`with trial.step(len(x)) as s: ...; s.loss = loss`: one optimizer step, forward to update."""
        if not self._started:
            self._start()
        return Step(self, batch_size)

    def should_stop(self):
        """True once the worker asked the trial to stop (SIGTERM, or its stop file exists)."""
        if not self._stop_requested and self._stop_file and os.path.exists(self._stop_file):
            self._stop_requested = True
        return self._stop_requested

    def eval(self, step=None, **metrics):
        """Reports a validation evaluation (val_accuracy=, val_loss=, val_iou=, ...)."""
        self._profiler.stop()  # the evaluation is done by now; whatever follows is not profiled
        event = {"step": self._steps_run if step is None else int(step)}
        for key, value in metrics.items():
            event[key] = float(value)
        event["train_time_s"] = self._train_time
        self._emit({"event": "eval", **event})
        self._evals.append(event)
        self._last_eval = {k: v for k, v in event.items() if k not in ("step", "train_time_s")}
        if self.target and self._time_to_target is None and self._reached_target(event):
            self._time_to_target, self._steps_to_target = self._train_time, self._steps_run
        return event

    def finish(self, **metrics):
        """Ends a completed trial: prints the result (test_accuracy=, test_loss=, ... and any
        final validation figures not reported by eval) and returns it."""
        if not self._started:
            self._start()
        if self._steps_run > 0 and self._last_loss is None:
            self._warn("no step set its loss (s.loss = loss inside trial.step): a NaN or infinite loss "
                       "cannot end the trial as diverged, and final_train_loss is null")
        result = self._result("completed")
        for key, value in self._last_eval.items():
            result.setdefault(key, value)
        for key, value in metrics.items():
            result[key] = _metric_value(key, value)
        self._print_result(result)
        return result

    def incorrect(self, reason, **details):
        """Ends the trial as failed because its own output is wrong, e.g. a custom operator
        that disagrees with its reference beyond tolerance: status `failed`, error_kind
        `incorrect`, `reason` as the error and `details` (numbers or strings, such as
        max_abs_error=, tolerance=) as the result's `check`. The worker does not retry it
        (another attempt computes the same thing) and an external proposer is told the
        configuration was `incorrect` (docs/trial-protocol.md). Exits with status 2."""
        reason = str(reason).strip()
        if not reason:
            raise ValueError("trial.incorrect() needs a reason: what was wrong, e.g. "
                             "'fused pooling differs from the reference by 0.3 (tolerance 1e-4)'")
        if self._finished:
            raise RuntimeError("trial.incorrect() after the trial printed its result")
        check = {}
        for key, value in details.items():
            if torch.is_tensor(value) and value.numel() == 1:
                value = value.item()
            check[key] = value if isinstance(value, (bool, int, float, str)) or value is None else str(value)
        result = self._result("failed")
        result["error_kind"] = "incorrect"
        result["error"] = reason
        if check:
            result["check"] = check
        self._print_result(result)
        sys.exit(EXIT_FAILED)

    # --- internals ----------------------------------------------------------------------------
    def _warn(self, message):
        """A warning on standard error and in the result's `warnings`."""
        self._warnings.append(message)
        print(f"frontier_trial: warning: {message}", file=sys.stderr, flush=True)

    def _emit(self, event):
        self._out.write(json.dumps(_json_ready(event), allow_nan=False) + "\n")
        self._out.flush()

    def _start(self):
        self._started = True
        self._peak = measure.worker_peak(self.precision) or measure.measured_peak(self.precision, self.device)
        self._emit({"event": "start", "trial_id": self.trial_id, "device": str(self.device),
                    "device_name": self._device_name(), "threads": self.threads, "params": self._param_count,
                    "train_flops_per_step": self._flops["train_per_step"] if self._flops else None,
                    "peak_flops_per_s": self._peak["flops_per_s"], "peak_flops_source": self._peak["source"]})
        self._memory.start()

    def _device_name(self):
        if self.device.type == "cuda":
            return torch.cuda.get_device_name(self.device)
        return socket.gethostname() + " cpu"

    def _record_step(self, step, seconds):
        wait, self._pending_wait = self._pending_wait, 0.0
        if self._profiler.covers(self._steps_run):
            self._profiled_times.append(seconds)  # trains, but is timed under the profiler: left out
        else:
            self._step_times.append(seconds)
            self._waits.append(wait)
            self._train_time += seconds
        self._steps_run += 1
        self._batch_size = step.batch_size
        loss = step.loss
        if loss is not None:
            self._last_loss = float(loss.detach().float()) if torch.is_tensor(loss) else float(loss)
            if not math.isfinite(self._last_loss):
                result = self._result("diverged")
                result["error"] = f"loss became {self._last_loss} at step {self._steps_run - 1}"
                self._print_result(result)
                sys.exit(EXIT_DIVERGED)
        if self.progress_every > 0 and (self._steps_run % self.progress_every == 0 or self._steps_run == self.steps):
            measured = measure.summarize(self._step_times[self._timed_warmup_steps():])
            self._emit({"event": "progress", "step": self._steps_run, "loss": self._last_loss, "lr": step.lr,
                        "step_time_ms": seconds * 1e3, "median_step_time_ms": measured["median"] * 1e3,
                        "data_wait_ms": wait * 1e3})

    def _reached_target(self, event):
        metric, value = self.target.get("metric"), self.target.get("value")
        if metric not in event or value is None:
            return False
        return event[metric] <= value if metric.endswith("loss") else event[metric] >= value

    def _timed_warmup_steps(self):
        """How many of the timed steps (profiled ones are not) are warm-up steps."""
        return sum(1 for i in range(min(self.warmup_steps, self._steps_run)) if not self._profiler.covers(i))

    def _result(self, status):
        skip = self._timed_warmup_steps()
        steps = measure.summarize(self._step_times[skip:])
        waits = measure.summarize(self._waits[skip:])
        batch = self._batch_size or 0
        r = {"event": "result", "schema": SCHEMA, "status": status, "trial_id": self.trial_id, "seed": self.seed,
             "implementation": "frontier_trial (Python SDK " + VERSION + ")", "dataset": "command",
             "batch_size": batch, "precision": self.precision, "memory_format": self.memory_format,
             "threads": self.threads, "torch_version": torch.__version__, "host_allocator": self.host_allocator,
             "device": str(self.device), "device_name": self._device_name(),
             "steps_run": self._steps_run, "warmup_steps": self.warmup_steps,
             "step_time_ms": measure.stats_json(steps, 1e3), "data_wait_ms": measure.stats_json(waits, 1e3),
             "data_wait_fraction": waits["sum"] / (steps["sum"] + waits["sum"]) if steps["sum"] + waits["sum"] > 0
             else 0.0}
        if steps["n"] > 0 and batch > 0:
            r["throughput"] = {"samples_per_s": batch / steps["median"],
                               "end_to_end_samples_per_s": steps["n"] * batch / (steps["sum"] + waits["sum"])}
        else:
            r["throughput"] = None
        r["mfu"] = None
        if self._flops is not None:
            train = self._flops["train_per_step"]
            r["flops"] = {"forward_per_step": self._flops["forward_per_step"], "train_per_step": train,
                          "train_per_sample": train / batch if batch else None,
                          "forward_by_op": self._flops["forward_by_op"]}
            if steps["n"] > 0 and self._peak:
                r["achieved_flops_per_s"] = train / steps["median"]
                r["mfu"] = r["achieved_flops_per_s"] / self._peak["flops_per_s"]
        if self._peak:
            r["peak_flops"] = self._peak
        if self._param_count is not None:
            r["params"] = self._param_count
        if self._started:
            r["peak_memory_mb"] = self._memory.peak_bytes() / (1024.0 * 1024.0)
            r["peak_memory_kind"] = self._memory.kind
        r["process_peak_rss_mb"] = measure.MemoryTracker.process_peak_bytes() / (1024.0 * 1024.0)
        r["train_time_s"] = self._train_time
        r["final_train_loss"] = self._last_loss
        r["evals"] = self._evals
        if self.target:
            r["target"] = self.target
            r["time_to_target_s"] = self._time_to_target
            r["steps_to_target"] = self._steps_to_target
        if self._latency is not None and status == "completed":
            r.update(self._latency)
        if self._deploy is not None and status == "completed":
            r["deploy"] = self._deploy
        if self._warnings:
            r["warnings"] = list(self._warnings)
        # The worker summarizes the recording and judges the bottleneck with frontier-trial's code and rules
        # (worker/profile/): the result's "profile" and "bottleneck" then mean what a built-in trial's do.
        profile = self._profiler.result(steps["median"] if steps["n"] > 0 else None)
        if profile is not None:
            r["profile"] = profile
        r["wall_time_s"] = time.perf_counter() - self._wall_start
        return r

    def _print_result(self, result):
        self._emit(result)
        self._finished = True  # only once it is out: a result that cannot be written fails the trial instead

    def _fail(self, kind, message):
        if self._finished:
            return
        result = self._result("failed")
        result["error_kind"] = kind
        result["error"] = message
        self._print_result(result)


_current = None


def _protocol_stream():
    """The protocol's own stream (docs/trial-protocol.md): a copy of standard output's file
    descriptor, after which descriptor 1, and so sys.stdout, a stray print() and a C library's
    printf, go to standard error: only the SDK writes protocol lines."""
    sys.stdout.flush()
    protocol = os.dup(1)
    os.dup2(2, 1)
    return os.fdopen(protocol, "w", buffering=1, encoding="utf-8")


def start(spec=None, params=None, argv=None, out=None):
    """Starts the trial: reads the spec (see _load_spec), merges its `params` over the
    defaults in `params`, and installs the protocol's handlers (SIGTERM asks to stop; an
    uncaught exception or an exit without finish() prints a `failed` result). Without `out`,
    the protocol keeps standard output to itself and everything else printed goes to
    standard error (_protocol_stream)."""
    global _current
    out = out or _protocol_stream()
    try:
        trial = Trial(_load_spec(spec, argv), params, out)
    except (OSError, ValueError) as e:
        out.write(json.dumps({"event": "result", "schema": SCHEMA, "status": "failed", "error_kind": "spec",
                              "error": f"cannot read the trial spec: {e}"}) + "\n")
        out.flush()
        sys.exit(EXIT_FAILED)
    _current = trial

    def on_term(signum, frame):
        trial._stop_requested = True

    signal.signal(signal.SIGTERM, on_term)
    previous_hook = sys.excepthook

    def on_exception(exc_type, exc, tb):
        if exc_type is KeyboardInterrupt:
            trial._fail("runtime", "interrupted")
        else:
            # The first line says what and where (reports show only it); the frames follow.
            frames = traceback.extract_tb(tb)
            where = f" (at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno} in {frames[-1].name})" \
                if frames else ""
            tail = "".join(traceback.format_list(frames[-3:])).strip()
            trial._fail(_error_kind(exc), f"{exc_type.__name__}: {exc}{where}; traceback tail: {tail[-1500:]}")
        previous_hook(exc_type, exc, tb)
        sys.stderr.flush()
        os._exit(EXIT_FAILED)

    sys.excepthook = on_exception
    import atexit

    def on_exit():
        if not trial._finished:
            trial._fail("runtime", "the training script ended without calling trial.finish()")
            sys.stderr.flush()
            os._exit(EXIT_FAILED)  # an atexit handler cannot set the exit status otherwise

    atexit.register(on_exit)
    return trial
