"""Fine-tuning metrics: the trainer and its parts.

    from seahorse_metrics.training import TrainConfig, train
    result = train(TrainConfig(model_dir="runs/q4", task="seahorse_q4", data_dir="prepared"))
    print(result.summary)

Modules: `config` (TrainConfig, gin), `optimizers`, `data` (examples),
`batches` (the resumable batch stream), `run_inputs` (a run's network,
vocabulary and examples), `sharding`, `state`, `step` (the jitted train
step), `checkpointing`, `validation`, `summaries`, `trainer` (the loop).
"""

import importlib

# Importing the package stays cheap (the command line parses its flags before
# JAX and Orbax load); the names below load their module on first use.
_LAZY = {
    "ExampleSet": "seahorse_metrics.training.data",
    "NonFiniteLossError": "seahorse_metrics.training.trainer",
    "OptimizerConfig": "seahorse_metrics.training.optimizers",
    "TrainConfig": "seahorse_metrics.training.config",
    "TrainResult": "seahorse_metrics.training.trainer",
    "config_from_gin": "seahorse_metrics.training.config",
    "load_examples": "seahorse_metrics.training.run_inputs",
    "train": "seahorse_metrics.training.trainer",
    "train_from_gin": "seahorse_metrics.training.trainer",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'seahorse_metrics.training' has no attribute {name!r}")


__all__ = sorted(_LAZY)
