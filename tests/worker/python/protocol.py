"""The trial protocol's output contract (docs/trial-protocol.md), as a checker:
every implementation (frontier-trial, the Python SDK) is held to it by
test_protocol.py."""
import json
import math

EXIT_FOR_STATUS = {"completed": 0, "failed": 2, "diverged": 3}
EVENT_FIELDS = {
    "start": {"trial_id": str, "device": str, "threads": int, "peak_flops_per_s": (int, float)},
    "progress": {"step": int, "loss": (int, float), "step_time_ms": (int, float),
                 "median_step_time_ms": (int, float), "data_wait_ms": (int, float)},
    "eval": {"step": int, "train_time_s": (int, float)},
}
STATS = ("n", "median", "p10", "p90", "mean", "min", "max", "cv")
COMPLETED_FIELDS = {"schema": int, "trial_id": str, "seed": int, "batch_size": int, "precision": str,
                    "threads": int, "device": str, "steps_run": int, "warmup_steps": int,
                    "step_time_ms": dict, "data_wait_ms": dict, "data_wait_fraction": (int, float),
                    "throughput": dict, "flops": dict, "peak_flops": dict, "achieved_flops_per_s": (int, float),
                    "mfu": (int, float), "params": int, "peak_memory_mb": (int, float), "peak_memory_kind": str,
                    "train_time_s": (int, float), "final_train_loss": (int, float), "evals": list,
                    "val_loss": (int, float), "test_loss": (int, float), "wall_time_s": (int, float)}


class ProtocolError(AssertionError):
    pass


def _check(cond, message):
    if not cond:
        raise ProtocolError(message)


def _fields(obj, fields, where):
    for name, kind in fields.items():
        _check(name in obj, f"{where}: missing '{name}'")
        _check(isinstance(obj[name], kind) and not isinstance(obj[name], bool),
               f"{where}: '{name}' is {obj[name]!r}, expected {kind}")


def _refuse_constant(name):
    """NaN and Infinity are not JSON: Python's json.loads takes them, the worker's parser does not."""
    raise ValueError(f"{name} is not JSON (the worker refuses the line)")


def check_output(stdout, returncode):
    """Validates one run's stdout and exit status; returns (events, result)."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    _check(lines, "no output")
    events = []
    for i, line in enumerate(lines):
        try:
            event = json.loads(line, parse_constant=_refuse_constant)
        except ValueError as e:
            raise ProtocolError(f"line {i + 1} is not JSON: {e}: {line[:200]}")
        _check(isinstance(event, dict) and isinstance(event.get("event"), str), f"line {i + 1} has no event")
        events.append(event)
    result = events[-1]
    _check(result["event"] == "result", "the last line is not the result")
    _check(all(e["event"] != "result" for e in events[:-1]), "more than one result line")
    _check(result.get("schema") == 1, f"schema {result.get('schema')!r}, expected 1")
    status = result.get("status")
    _check(status in EXIT_FOR_STATUS, f"unknown status {status!r}")
    _check(returncode == EXIT_FOR_STATUS[status], f"exit {returncode} for status {status}")
    if status == "failed":
        _check(isinstance(result.get("error"), str) and result["error"], "failed without an error")
        _check(isinstance(result.get("error_kind"), str), "failed without an error_kind")
        return events, result
    _check(events[0]["event"] == "start", "the first event is not start")
    last_step = 0
    for e in events[:-1]:
        _check(e["event"] in EVENT_FIELDS, f"unknown event {e['event']!r}")
        _fields(e, EVENT_FIELDS[e["event"]], e["event"] + " event")
        if e["event"] == "progress":
            _check(e["step"] > last_step, f"progress steps not increasing at {e['step']}")
            last_step = e["step"]
    if status == "diverged":
        _check("error" in result, "diverged without an error")
        return events, result
    _fields(result, COMPLETED_FIELDS, "result")
    for name in STATS:
        _check(name in result["step_time_ms"], f"step_time_ms lacks {name}")
    st = result["step_time_ms"]
    _check(st["n"] == result["steps_run"] - result["warmup_steps"] or st["n"] < result["steps_run"],
           "step_time_ms.n counts warm-up steps")
    _check(0 < st["p10"] <= st["median"] <= st["p90"], f"step times out of order: {st}")
    _check(0 < result["mfu"] <= 1, f"mfu {result['mfu']} outside (0, 1]")
    _check(result["flops"]["train_per_step"] == 3 * result["flops"]["forward_per_step"],
           "train FLOPs are not 3 x forward")
    tp = result["throughput"]["samples_per_s"]
    _check(math.isclose(tp, result["batch_size"] / (st["median"] / 1e3), rel_tol=1e-6),
           "samples_per_s is not batch / median step time")
    _check(result["evals"], "no evaluations")
    quality = [k for k in ("val_accuracy", "val_iou") if k in result]
    _check(quality, "no validation quality")
    return events, result
