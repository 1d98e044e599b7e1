#!/usr/bin/python3
"""A user's own training script, not one of Frontier's networks: three models whose step is
known to be limited by different things, each trained on random data with the frontier_trial
SDK (found on PYTHONPATH, as after `pip install ./worker/python`). The SDK profiles a few
steps by default; the worker judges them by frontier-trial's rules
(tests/integration/profile_run_test.sh).

  kind=gemm         wide convolutions without normalization at batch 16 (compute-bound)
  kind=elementwise  sigmoid/tanh/relu over 32 x 256 x 256 floats, no matrix product (memory-bound)
  kind=tiny         4-channel layers on 8 x 8 images at batch 1 (overhead-bound)

The same workloads as tests/worker/profiler_test.cc's BottleneckWorkloadTest, which asserts
frontier-trial's verdict on each."""
import torch
from torch import nn
import torch.nn.functional as F

import frontier_trial

trial = frontier_trial.start(params={"kind": "gemm", "lr": 0.01})
trial.seed_everything()
kind = trial.params["kind"]


class Elementwise(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1, 256, 256))
        self.shift = nn.Parameter(torch.zeros(1, 256, 256))

    def forward(self, x):
        return torch.relu(torch.tanh(torch.sigmoid(x * self.scale + self.shift))).mean(dim=(1, 2))


def conv(cin, cout, stride):
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1)


if kind == "gemm":
    model = nn.Sequential(conv(3, 64, 1), nn.ReLU(), conv(64, 128, 2), nn.ReLU(), conv(128, 128, 1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))
    shape, batch = (3, 16, 16), 16
elif kind == "elementwise":
    model, shape, batch = Elementwise(), (256, 256), 32
elif kind == "tiny":
    layers = [conv(1, 4, 1), nn.ReLU()]
    for _ in range(8):
        layers += [conv(4, 4, 1), nn.ReLU()]
    model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 10))
    shape, batch = (1, 8, 8), 1
else:
    raise ValueError(f"unknown kind {kind!r}: gemm, elementwise or tiny")
model = model.to(trial.device)
opt = torch.optim.SGD(model.parameters(), lr=trial.params["lr"])
generator = torch.Generator().manual_seed(trial.seed)
x = torch.randn(batch, *shape, generator=generator)
y = torch.randint(0, 10, (batch,), generator=generator)
if kind != "elementwise":
    trial.count_flops(model, x)

for step in range(trial.steps):
    with trial.data_wait():
        xb, yb = x.to(trial.device), y.to(trial.device)
    with trial.step(batch) as s:
        out = model(xb)
        loss = out.mean() if kind == "elementwise" else F.cross_entropy(out, yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        s.loss = loss
    if trial.should_stop():
        break

with torch.no_grad():
    accuracy = 0.1 if kind == "elementwise" else (model(x).argmax(1) == y).float().mean().item()
trial.eval(val_accuracy=accuracy, val_loss=float(loss))
trial.finish(test_accuracy=accuracy)
