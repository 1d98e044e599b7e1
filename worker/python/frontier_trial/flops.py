"""Model FLOPs counted at the dispatcher, by frontier-trial's convention.

The convention (docs/worker.md, Measurement; the C++ formulas are in
worker/trial/measure/flop_counter.cc): convolutions, linear layers and matrix
products count, one multiply-add is 2 FLOPs, elementwise ops, norms, pooling
and biases do not, and a training step is 3 x the forward pass.

A TorchDispatchMode sees the operators below autograd, after composite ops
have decomposed: `linear` arrives as `addmm`/`mm`, `conv2d` as `convolution`,
a batched `matmul` as `bmm`. Their shapes give the same counts as the
C++ counter's outermost-op rule.
"""
import math

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten


def _prod(xs):
    return math.prod(int(x) for x in xs)


def conv_flops(x_shape, w_shape, stride, padding, dilation, transposed):
    """2 * N * Cout * Hout * Wout * (Cin / groups) * kh * kw, any number of spatial dims."""
    spatial = len(w_shape) - 2
    batched = len(x_shape) == len(w_shape)
    batch = x_shape[0] if batched else 1
    first = 2 if batched else 1
    positions = 1
    for i in range(spatial):
        s = stride[0] if len(stride) == 1 else stride[i]
        p = padding[0] if len(padding) == 1 else padding[i]
        d = dilation[0] if len(dilation) == 1 else dilation[i]
        size = x_shape[first + i]
        positions *= size if transposed else (size + 2 * p - d * (w_shape[2 + i] - 1) - 1) // s + 1
    return 2 * batch * positions * w_shape[0] * _prod(w_shape[1:])


def matmul_flops(a, b):
    """torch.matmul semantics: 1-d operands promoted, batch dims broadcast."""
    n = a[-2] if len(a) >= 2 else 1
    k = a[-1]
    m = b[-1] if len(b) >= 2 else 1
    batch_a, batch_b = list(a[:-2]), list(b[:-2])
    dims = max(len(batch_a), len(batch_b))
    batch_a = [1] * (dims - len(batch_a)) + batch_a
    batch_b = [1] * (dims - len(batch_b)) + batch_b
    batch = _prod(max(x, y) for x, y in zip(batch_a, batch_b))
    return 2 * batch * n * k * m


def _shape(t):
    return list(t.shape)


def _convolution(args):
    # (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    return conv_flops(_shape(args[0]), _shape(args[1]), list(args[3]), list(args[4]), list(args[5]), bool(args[6]))


_FORMULAS = {
    aten.convolution.default: ("aten::convolution", _convolution),
    aten.mm.default: ("aten::mm", lambda a: matmul_flops(_shape(a[0]), _shape(a[1]))),
    aten.bmm.default: ("aten::bmm", lambda a: matmul_flops(_shape(a[0]), _shape(a[1]))),
    aten.addmm.default: ("aten::addmm", lambda a: matmul_flops(_shape(a[1]), _shape(a[2]))),
    aten.baddbmm.default: ("aten::baddbmm", lambda a: matmul_flops(_shape(a[1]), _shape(a[2]))),
}


class FlopCounter(TorchDispatchMode):
    """Counts the FLOPs of the ops dispatched while it is active."""

    def __init__(self):
        super().__init__()
        self.by_op = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        entry = _FORMULAS.get(func)
        if entry is not None:
            name, formula = entry
            self.by_op[name] = self.by_op.get(name, 0) + int(formula(args))
        return func(*args, **(kwargs or {}))

    @property
    def total(self):
        return sum(self.by_op.values())


def count_model_flops(model, example_inputs):
    """One forward pass of `model` in eval mode without autograd (its training
    flag is restored): {"forward_per_step", "train_per_step", "forward_by_op"}."""
    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), FlopCounter() as counter:
            model(*example_inputs)
    finally:
        model.train(was_training)
    return {"forward_per_step": counter.total, "train_per_step": 3 * counter.total,
            "forward_by_op": dict(sorted(counter.by_op.items()))}
