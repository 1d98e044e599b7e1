"""A short profile of a command trial's steps (docs/byo-model.md#profiling), as frontier-trial
profiles its own: a few consecutive steps after warm-up recorded with torch's autograd profiler
(input shapes; CUDA times on CUDA), kept out of the step statistics, train time and time to
target. The SDK only records: it writes every operator call of those steps to
`profile_calls.json` in the trial's artifact folder, and the worker summarizes it with
frontier-trial's own code and judges the bottleneck by the same rules (worker/profile/), so
a command trial's classes, shares, trace and verdict mean what a built-in trial's do.

NVTX ranges mark the steps and phases on CUDA, so an nsys- or ncu-wrapped command trial shows
them: `frontier.step`, `frontier.data_wait`, `frontier.flop_count`, `frontier.latency`, and
`frontier.profiled_step` (the range ncu's filter and frontier-trial's profiled steps use)."""
import contextlib
import json
import os
import socket
import time

import torch

CALLS_FILE = "profile_calls.json"  # worker/profile/profile_recording.h reads it
STEP_RANGE = "frontier.profiled_step"
DEFAULT_STEPS = 3
MAX_NAME = 256  # an operator's name in the recording (the worker refuses names past 512 bytes)


def _shape(shape):
    """A tensor's shape as integers; [] for a scalar, a list of tensors or a non-tensor argument."""
    if isinstance(shape, (list, tuple)) and all(isinstance(d, int) for d in shape):
        return [int(d) for d in shape]
    return []


class Nvtx:
    """NVTX ranges on a CUDA device (torch.cuda.nvtx); nothing elsewhere."""

    def __init__(self, device, nvtx=None):
        self.enabled = device.type == "cuda" or nvtx is not None
        self._nvtx = nvtx

    def _module(self):
        return self._nvtx if self._nvtx is not None else torch.cuda.nvtx

    def push(self, name):
        if self.enabled:
            self._module().range_push(name)

    def pop(self):
        if self.enabled:
            self._module().range_pop()

    @contextlib.contextmanager
    def range(self, name):
        self.push(name)
        try:
            yield
        finally:
            self.pop()


class StepProfiler:
    """Records steps [first, first + count) of the training loop, 0-based. The spec's `profile`
    section says how many (`steps`, default 3; 0 turns it off), from which step (`start`; -1,
    the default: the first step after warm-up) and with what (`tool`: libtorch records here;
    nsys/ncu wrap the process, and the SDK only marks the steps with NVTX ranges)."""

    def __init__(self, spec_profile, steps, warmup_steps, device, artifact_dir, trial_id, nvtx):
        section = spec_profile if isinstance(spec_profile, dict) else {}
        self.tool = str(section.get("tool", "libtorch"))
        self.count = int(section.get("steps", DEFAULT_STEPS if self.tool == "libtorch" else 0))
        start = int(section.get("start", -1))
        # -1: right after warm-up, and never the very first (cold) step.
        self.first = max(warmup_steps, 1) if start < 0 else start
        self.device = device
        self.artifact_dir = artifact_dir
        self.trial_id = trial_id
        self._nvtx = nvtx
        self.problem = None
        if self.count > 0 and self.first + self.count > steps:
            self.problem = (f"not profiled: steps {self.first}..{self.first + self.count - 1} are past the "
                            f"trial's {steps} steps")
        elif self.count > 0 and steps - self.count < warmup_steps + 1:
            self.problem = (f"not profiled: {steps} steps leave fewer than warmup_steps + 1 = "
                            f"{warmup_steps + 1} unprofiled steps to measure")
        self._profiler = None
        self._marker = None
        self._steps = []  # (step, wall seconds, thread CPU seconds)
        self._cpu0 = 0.0
        self._t0 = 0.0
        self._error = None
        self._stopped = False

    def covers(self, step):
        return self.count > 0 and self.problem is None and self.first <= step < self.first + self.count

    def before(self, step):
        if not self.covers(step):
            return
        self._nvtx.push(STEP_RANGE)
        if self.tool == "libtorch" and self._error is None and not self._stopped:
            try:
                if self._profiler is None:
                    self._profiler = torch.autograd.profiler.profile(
                        record_shapes=True, use_cuda=self.device.type == "cuda", use_kineto=False)
                    self._profiler.__enter__()
                self._marker = torch.autograd.profiler.record_function(STEP_RANGE)
                self._marker.__enter__()
            except Exception as e:  # a profiler that cannot start leaves the trial unprofiled
                self._error = f"cannot start torch's profiler: {type(e).__name__}: {e}"
                self._marker = None
                self.stop()
        self._cpu0, self._t0 = time.thread_time(), time.perf_counter()

    def after(self, step):
        if not self.covers(step):
            return
        if self._marker is not None:
            self._marker.__exit__(None, None, None)
            self._marker = None
        self._steps.append((step, time.perf_counter() - self._t0, time.thread_time() - self._cpu0))
        self._nvtx.pop()
        if step == self.first + self.count - 1:
            self.stop()

    def stop(self):
        """Ends the recording: after the last profiled step, or when the loop left the window early
        (evaluation, latency and the result are never recorded)."""
        if self._marker is not None:
            try:
                self._marker.__exit__(None, None, None)
            except Exception:
                pass
            self._marker = None
        if self._profiler is not None and not self._stopped:
            self._stopped = True
            try:
                self._profiler.__exit__(None, None, None)
            except Exception as e:
                self._error = f"cannot stop torch's profiler: {type(e).__name__}: {e}"

    def result(self, unprofiled_median_s):
        """The result's `profile` object, after the recording is written; None when off."""
        if self.count <= 0:
            return None
        out = {"tool": self.tool, "steps": {"first": self.first, "count": self.count, "recorded": len(self._steps)}}
        if self.problem:
            out["error"] = self.problem
            return out
        wall = [s[1] for s in self._steps]
        if wall:
            ordered = sorted(wall)
            out["profiled_step_time_ms"] = {"n": len(wall), "median": ordered[len(wall) // 2] * 1e3,
                                            "mean": sum(wall) / len(wall) * 1e3}
            if unprofiled_median_s:
                out["slowdown"] = ordered[len(wall) // 2] / unprofiled_median_s
        if self.tool != "libtorch":
            out["nvtx_range"] = STEP_RANGE if self._nvtx.enabled else None
            return out
        self.stop()
        if self._error:
            out["error"] = self._error
        if self._profiler is None:
            if not self._steps:
                out["error"] = out.get("error") or "no profiled step was run"
            return out
        t0 = time.perf_counter()
        try:
            recording = self._recording()
            os.makedirs(self.artifact_dir, exist_ok=True)
            with open(os.path.join(self.artifact_dir, CALLS_FILE), "w", encoding="utf-8") as f:
                json.dump(recording, f)
            out["recorded"] = CALLS_FILE
            out["profiler"] = recording["profiler"]
            out["recorded_calls"] = len(recording["calls"])
        except Exception as e:
            out["error"] = f"cannot write the profile recording: {type(e).__name__}: {e}"
        # What profiling cost the trial: the profiled steps' time and writing the recording.
        out["cost_s"] = sum(wall) + time.perf_counter() - t0
        return out

    def _recording(self):
        cuda = self.device.type == "cuda"
        steps, calls = [], []
        events = list(self._profiler.function_events)
        markers = [e for e in events if e.name == STEP_RANGE]
        for (step, _, cpu_s), marker in zip(self._steps, markers):
            steps.append({"step": step, "start_us": float(marker.time_range.start),
                          "end_us": float(marker.time_range.end), "thread_cpu_us": cpu_s * 1e6})
        for e in events:
            if e.name == STEP_RANGE:
                continue
            call = {"name": e.name[:MAX_NAME], "thread": int(e.thread), "start_us": float(e.time_range.start),
                    "end_us": float(e.time_range.end),
                    "shapes": [_shape(s) for s in (e.input_shapes or [])]}
            if cuda:
                call["cuda_us"] = float(e.cuda_time_total)
            calls.append(call)
        return {"schema": 1, "tool": "libtorch",
                "profiler": f"torch {torch.__version__} autograd profiler (legacy), frontier_trial SDK",
                "trial_id": self.trial_id, "host": socket.gethostname(), "pid": os.getpid(),
                "first": self.first, "count": self.count, "basis": "cuda" if cuda else "wall",
                "steps": steps, "calls": calls}
