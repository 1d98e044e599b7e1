"""frontier_trial: run your own PyTorch training script as a Frontier trial.

    import frontier_trial
    trial = frontier_trial.start(params={"lr": 0.1, "width": 64})
    trial.seed_everything()
    model = build(trial.params)
    trial.count_flops(model, example_batch)
    for step in range(trial.steps):
        with trial.data_wait():
            x, y = next(batches)
        with trial.step(len(x)) as s:
            ...
            s.loss = loss
        if trial.should_stop():
            break
        if trial.eval_every and (step + 1) % trial.eval_every == 0:
            trial.eval(step + 1, val_accuracy=..., val_loss=...)
    trial.finish(test_accuracy=...)

The protocol it speaks is docs/trial-protocol.md; the measurement definitions
are frontier-trial's (docs/worker.md, Measurement).
"""
from .blas import use_the_cpus_blas_kernels

use_the_cpus_blas_kernels()  # before any GEMM (docs/worker.md, The CPU's own BLAS kernels)

from .flops import FlopCounter, count_model_flops  # noqa: E402
from .trial import EXIT_COMPLETED, EXIT_DIVERGED, EXIT_FAILED, SCHEMA, Step, Trial, start  # noqa: E402

__all__ = ["start", "Trial", "Step", "FlopCounter", "count_model_flops", "SCHEMA", "EXIT_COMPLETED",
           "EXIT_FAILED", "EXIT_DIVERGED"]
