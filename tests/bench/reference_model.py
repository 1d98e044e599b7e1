"""The baseline model and training loop in Python, with Debian's python3-torch.

Builds the same network as frontier-trial for specs whose stem is conv3x3 and
whose stages are basic blocks (the baseline of worker/examples), trains it on
one fixed batch like tests/bench/bare_loop.cc, and prints one JSON line.
Run with /usr/bin/python3 (Debian's packages are only visible to it).
"""
import gzip
import json
import os
import resource
import statistics
import sys
import time

import torch
from torch import nn
import bench_main  # tests/bench/bench_main.py: the tool's error exit


def conv_norm_act(cin, cout, k, stride, act):
    layers = [nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False), nn.BatchNorm2d(cout)]
    if act:
        layers.append(nn.ReLU(inplace=False))
    return nn.Sequential(*layers)


class Basic(nn.Module):
    def __init__(self, cin, cout, stride, k):
        super().__init__()
        self.body = nn.Sequential(conv_norm_act(cin, cout, k, stride, True), conv_norm_act(cout, cout, k, 1, False))
        self.shortcut = None if (stride == 1 and cin == cout) else conv_norm_act(cin, cout, 1, stride, False)

    def forward(self, x):
        s = x if self.shortcut is None else self.shortcut(x)
        return torch.relu(self.body(x) + s)


def build(arch, in_channels, classes):
    stem = arch.get("stem", {})
    if stem.get("kind", "conv3x3") != "conv3x3" or arch.get("norm", "batch") != "batch" \
            or arch.get("activation", "relu") != "relu":
        sys.exit("reference_model.py builds conv3x3 stems with batch norm and relu only")
    width, stride, depth = stem.get("width", 32), stem.get("stride", 2), stem.get("depth", 2)
    layers = [conv_norm_act(in_channels, width, 3, stride, True)]
    layers += [conv_norm_act(width, width, 3, 1, True) for _ in range(depth - 1)]
    cin = width
    for st in arch["stages"]:
        if st.get("block", "basic") != "basic" or st.get("attention", {}).get("kind", "none") != "none":
            sys.exit("reference_model.py builds basic blocks without attention only")
        k = st.get("kernel", 0) or 3
        for i in range(st.get("depth", 2)):
            layers.append(Basic(cin if i == 0 else st["width"], st["width"], st.get("stride", 1) if i == 0 else 1, k))
        cin = st["width"]
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes))


def first_batch(task, b):
    """The first `b` training images and labels of Fashion-MNIST, normalized as frontier-trial does."""
    d = task.get("data_dir") or "/usr/share/datasets/fashion-mnist"
    with gzip.open(os.path.join(d, "train-images-idx3-ubyte.gz")) as f:
        images = f.read(16 + b * 784)[16:]
    with gzip.open(os.path.join(d, "train-labels-idx1-ubyte.gz")) as f:
        labels = f.read(8 + b)[8:]
    x = torch.frombuffer(bytearray(images), dtype=torch.uint8).view(b, 1, 28, 28).float()
    x = (x / 255.0 - 0.2860) / 0.3530
    return x, torch.frombuffer(bytearray(labels), dtype=torch.uint8).long()


def main():
    spec = json.load(open(sys.argv[1]))
    task, rt = spec["task"], spec.get("runtime", {})

    torch.set_num_threads(rt.get("threads", 0) or os.cpu_count())
    torch.manual_seed(spec.get("seed", 0))
    model = build(spec["arch"], 1, 10)
    channels_last = rt.get("memory_format") == "channels_last"
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    b = task["batch_size"]
    x, y = first_batch(task, b)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    o = task.get("optimizer", {})
    opt = torch.optim.SGD(model.parameters(), lr=o.get("lr", 0.1), momentum=o.get("momentum", 0.9),
                          nesterov=o.get("nesterov", False), weight_decay=o.get("weight_decay", 5e-4))
    bf16 = rt.get("precision") == "bf16"
    times = []
    for step in range(task["steps"]):
        t0 = time.perf_counter()
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = nn.functional.cross_entropy(model(x).float(), y)
        loss.backward()
        opt.step()
        t1 = time.perf_counter()
        if step >= task.get("warmup_steps", 10):
            times.append(t1 - t0)
    print(json.dumps({"median_step_time_ms": statistics.median(times) * 1e3, "steps_measured": len(times),
                      "params": sum(p.numel() for p in model.parameters()), "torch_version": torch.__version__,
                      "threads": torch.get_num_threads(),
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}))


if __name__ == "__main__":
    bench_main.run(main)
