#!/usr/bin/python3
"""A plain PyTorch training script run as a Frontier trial (docs/byo-model.md).

Its own model class, its own Fashion-MNIST loader over Debian's
dataset-fashion-mnist files, its own loop; Frontier's part is the
`frontier_trial` SDK: the parameters, the seed, timed steps, FLOPs, evals and
the result. Run alone: `/usr/bin/python3 train.py` (defaults below), or with a
spec: `/usr/bin/python3 train.py --spec SPEC.json`.
"""
import gzip
import math
import os
import sys

import torch
from torch import nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "worker", "python"))
import frontier_trial  # noqa: E402  (or `pip install ./worker/python`)

DEFAULTS = {"lr": 0.1, "width": 64, "attention": "none", "heads": 4, "batch_size": 128,
            "data_dir": "/usr/share/datasets/fashion-mnist", "val_size": 5000}


# ---- the model: a small CNN with an optional token mixer on its last stage ----
def conv_bn(cin, cout, k, stride):
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False), nn.BatchNorm2d(cout))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1, self.conv2 = conv_bn(cin, cout, 3, stride), conv_bn(cout, cout, 3, 1)
        self.shortcut = None if stride == 1 and cin == cout else conv_bn(cin, cout, 1, stride)

    def forward(self, x):
        y = self.conv2(F.relu(self.conv1(x)))
        return F.relu(y + (x if self.shortcut is None else self.shortcut(x)))


class TokenMixer(nn.Module):
    """Pre-norm residual attention over the feature map's positions: softmax (`mhsa`) or
    kernelized linear attention (`linear`, relu feature map)."""

    def __init__(self, channels, heads, kind):
        super().__init__()
        self.heads, self.kind, self.head_dim = heads, kind, channels // heads
        self.norm = nn.LayerNorm(channels)
        self.q = nn.Linear(channels, channels)
        self.kv = nn.Linear(channels, 2 * channels)
        self.proj = nn.Linear(channels, channels)

    def forward(self, x):
        b, c, h, w = x.shape
        tokens = x.flatten(2).transpose(1, 2)  # (B, HW, C)
        t = self.norm(tokens.float())  # layer norm in fp32 under autocast, as its parameters
        n, heads, d = t.shape[1], self.heads, self.head_dim
        q = self.q(t).view(b, n, heads, d).transpose(1, 2)
        k, v = self.kv(t).view(b, n, 2, heads, d).permute(2, 0, 3, 1, 4)
        if self.kind == "mhsa":
            mixed = torch.matmul(torch.softmax(torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d), -1), v)
        else:
            q, k = F.relu(q), F.relu(k)
            mixed = torch.matmul(q, torch.matmul(k.transpose(-2, -1), v))
            mixed = mixed.float() / ((q.float() * k.float().sum(2, keepdim=True)).sum(-1, keepdim=True) + 1e-6)
        y = self.proj(mixed.transpose(1, 2).reshape(b, n, heads * d))
        return (tokens + y.to(tokens.dtype)).transpose(1, 2).reshape(b, c, h, w)


class Net(nn.Module):
    def __init__(self, width, attention, heads, classes=10):
        super().__init__()
        self.stem = nn.Sequential(conv_bn(1, 24, 3, 2), nn.ReLU())           # 28x28 -> 14x14
        self.stage1 = BasicBlock(24, width // 2, 1)                           # 14x14
        self.stage2 = BasicBlock(width // 2, width, 2)                        # 7x7
        self.mixer = TokenMixer(width, heads, attention) if attention != "none" else nn.Identity()
        self.fc = nn.Linear(width, classes)

    def forward(self, x):
        x = self.mixer(self.stage2(self.stage1(self.stem(x))))
        return self.fc(x.mean((2, 3)))


# ---- the data: Fashion-MNIST from the IDX files -------------------------------
def read_idx(path, header):
    with gzip.open(path) as f:
        return torch.frombuffer(bytearray(f.read()[header:]), dtype=torch.uint8)


def load_split(data_dir, prefix):
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"), 16).view(-1, 1, 28, 28)
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"), 8).long()
    return ((images.float() / 255.0) - 0.2860) / 0.3530, labels


def evaluate(model, images, labels, trial, batch=1000):
    model.eval()
    correct, loss = 0, 0.0
    with torch.no_grad(), trial.autocast():
        for i in range(0, len(images), batch):
            out = model(images[i:i + batch].to(trial.device)).float()
            y = labels[i:i + batch].to(trial.device)
            loss += F.cross_entropy(out, y, reduction="sum").item()
            correct += (out.argmax(1) == y).sum().item()
    model.train()
    return correct / len(images), loss / len(images)


def main():
    trial = frontier_trial.start(params=DEFAULTS)
    p = trial.params
    trial.seed_everything()
    train_x, train_y = load_split(p["data_dir"], "train")
    test_x, test_y = load_split(p["data_dir"], "t10k")
    val_x, val_y = train_x[-p["val_size"]:], train_y[-p["val_size"]:]
    train_x, train_y = train_x[:-p["val_size"]], train_y[:-p["val_size"]]

    model = Net(int(p["width"]), p["attention"], int(p["heads"])).to(trial.device)
    batch = int(p["batch_size"])
    trial.count_flops(model, train_x[:batch].to(trial.device))
    opt = torch.optim.SGD(model.parameters(), lr=p["lr"], momentum=0.9, nesterov=True, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=trial.steps)
    generator = torch.Generator().manual_seed(trial.seed)

    def batches():
        while True:
            order = torch.randperm(len(train_x), generator=generator)
            for i in range(0, len(order) - batch + 1, batch):
                idx = order[i:i + batch]
                yield train_x[idx].to(trial.device), train_y[idx].to(trial.device)

    data = trial.batches(batches())
    for step in range(trial.steps):
        x, y = next(data)
        with trial.step(len(x)) as s:
            opt.zero_grad(set_to_none=True)
            with trial.autocast():
                loss = F.cross_entropy(model(x).float(), y)
            loss.backward()
            opt.step()
            s.loss, s.lr = loss, sched.get_last_lr()[0]
        sched.step()
        if trial.should_stop():
            break
        if trial.eval_every and (step + 1) % trial.eval_every == 0 and step + 1 < trial.steps:
            acc, vloss = evaluate(model, val_x, val_y, trial)
            trial.eval(step + 1, val_accuracy=acc, val_loss=vloss)
    acc, vloss = evaluate(model, val_x, val_y, trial)
    trial.eval(trial.steps, val_accuracy=acc, val_loss=vloss)
    trial.measure_latency(model, val_x[:batch])  # onboard latency: batch 1 and the training batch
    test_acc, test_loss = evaluate(model, test_x, test_y, trial)
    trial.finish(test_accuracy=test_acc, test_loss=test_loss)


if __name__ == "__main__":
    main()
