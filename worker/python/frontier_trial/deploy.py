"""Onboard inference of a command trial's model (docs/byo-model.md, docs/trial-output.md#deploy): the
trained network as it would ship, in the formats the spec's deploy section names, each with its validation
quality (the program's own evaluate function), its forward latency per batch size and thread count (timed
as frontier-trial times it: warm-up excluded, median and p99) and its size. The result's `deploy` section
has frontier-trial's shape, so the report's onboard front and the deploy.* metrics work the same.

  float        a copy in eval mode, fp32, batch norms folded into their convs where torch.fx can trace the
               model (torch.fx.experimental.optimization.fuse), without autograd
  torchscript  that float model traced (torch.jit.trace), frozen (torch.jit.freeze) and optimized for
               inference (torch.jit.optimize_for_inference)
  int8         post-training static quantization with torch.ao.quantization's FX graph mode on the CPU engine
               (onednn or qnnpack): the engine's default qconfig (per-channel int8 weights, uint8 activations
               from observers over the calibration batches), every module it cannot quantize named
"""
import copy
import io

import torch

from . import measure

FORMATS = ("float", "torchscript", "int8")


def _engines():
    supported = set(torch.backends.quantized.supported_engines)
    return [e for e in ("onednn", "qnnpack") if e in supported]


def _size_bytes(model):
    buffer = io.BytesIO()
    if isinstance(model, torch.jit.ScriptModule):
        torch.jit.save(model, buffer)
    else:
        torch.save(model.state_dict(), buffer)
    return buffer.tell()


def _float_model(model):
    m = copy.deepcopy(model).float().eval()
    try:
        from torch.fx.experimental.optimization import fuse
        return fuse(m), "fp32, batch norms folded (torch.fx)"
    except Exception as e:  # a model torch.fx cannot trace stays as it is
        return m, "fp32, batch norms not folded (torch.fx could not trace the model: %s)" % _first_line(e)


def _first_line(e):
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0][:300]


def _int8_model(model, example, calibration, engine):
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
    torch.backends.quantized.engine = engine
    prepared = prepare_fx(copy.deepcopy(model).float().eval(), get_default_qconfig_mapping(engine),
                          example_inputs=(example,))
    samples = 0
    with torch.no_grad():
        for batch in calibration:
            prepared(batch.float())
            samples += int(batch.shape[0])
    if samples == 0:
        raise ValueError("no calibration batch: int8 needs calibration inputs")
    quantized = convert_fx(prepared)
    kept, count = [], 0
    for name, module in quantized.named_modules():
        kind = type(module).__module__
        if ".quantized" in kind and hasattr(module, "weight"):
            count += 1
        elif isinstance(module, (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.Linear)):
            kept.append({"name": name, "why": "left in fp32 by the engine's qconfig"})
    return quantized, count, kept, samples


def measure_deploy(model, example_batch, evaluate, calibration=None, section=None, device=None,
                   memory_format="contiguous", quality_metric="val_accuracy"):
    """Measures `model` in each format of `section` (the spec's deploy section: formats, batch, threads,
    engine, repetitions, warmup). `evaluate(m)` returns the validation quality (`quality_metric`) of a
    model `m`; `calibration` yields input batches for int8 (default: the example batch). Returns the
    result's `deploy` section."""
    section = dict(section or {})
    formats = list(section.get("formats", ["float", "int8"]))
    for f in formats:
        if f not in FORMATS:
            raise ValueError("deploy format %r is not in this SDK: it measures %s" % (f, ", ".join(FORMATS)))
    batches = [int(b) for b in section.get("batch", [1])]
    threads = [int(t) for t in section.get("threads", [1])]
    repetitions = int(section.get("repetitions", 100))
    warmup = int(section.get("warmup", 5))
    device = device or torch.device("cpu")
    x = example_batch.detach().float()
    inputs = {}
    for b in batches:
        t = x.index_select(0, torch.arange(b) % x.shape[0])
        if memory_format == "channels_last" and t.dim() == 4:
            t = t.contiguous(memory_format=torch.channels_last)
        inputs[b] = t
    out = {"batch": batches[0], "threads": threads[0], "quality_metric": quality_metric,
           "mode": "eval, no autograd, fp32 input; int8: torch.ao.quantization FX graph mode"}
    threads_before = torch.get_num_threads()
    float_model, float_mode = None, ""
    for f in formats:
        try:
            if f != "int8" and float_model is None:
                float_model, float_mode = _float_model(model)
            figures = {}
            if f == "float":
                deployed = float_model.to(device)
                figures["mode"] = float_mode
            elif f == "torchscript":
                with torch.no_grad():
                    traced = torch.jit.trace(float_model, inputs[batches[0]].to(device))
                    deployed = torch.jit.optimize_for_inference(torch.jit.freeze(traced.eval()))
                figures["mode"] = "traced, frozen, optimize_for_inference"
            else:
                if device.type != "cpu":
                    raise ValueError("int8 runs on torch's quantized CPU engines (onednn, qnnpack); this trial ran "
                                     "on %s" % device)
                engines = _engines()
                engine = section.get("engine") or (engines[0] if engines else "")
                if engine not in engines:
                    raise ValueError("the quantized engine %r is not in this torch build (it has: %s)"
                                     % (engine, ", ".join(engines) or "none"))
                deployed, count, kept, samples = _int8_model(model, x, calibration or [x], engine)
                out["engine"] = engine
                figures.update({"quantized_layers": count, "float_layers": kept, "calibration_samples": samples})
            with torch.no_grad():
                quality = evaluate(deployed)
            figures[quality_metric] = float(quality)
            figures["size_bytes"] = _size_bytes(deployed)
            settings = []
            for b in batches:
                for n in threads:
                    torch.set_num_threads(n)
                    t = inputs[b].to(device)
                    with torch.inference_mode():
                        s = measure.latency(lambda: deployed(t), device, repetitions, warmup)
                    setting = measure.latency_json(b, s, warmup)
                    setting["threads"] = n
                    settings.append(setting)
                    if len(settings) == 1:
                        figures["latency_ms"] = s["median"] * 1e3
                        figures["latency_p99_ms"] = s["p99"] * 1e3
            figures["settings"] = settings
            out[f] = figures
        except Exception as e:  # one format's failure is its own; the others are still measured
            out[f] = {"error": _first_line(e)}
        finally:
            torch.set_num_threads(threads_before)
    return out
