"""`seahorse-metrics plan`: per-device memory of training and scoring on a mesh,
before renting one."""
from __future__ import annotations

import argparse
import logging

from seahorse_metrics.cli.score import mesh_spec

logger = logging.getLogger(__name__)

_EPILOG = """\
The trainer's step and the scorer's program are compiled from shapes alone (no
weights), and the per-device bytes of parameters, optimizer state, batch and
XLA's temporaries are read from the compiled programs. Without data x model
devices here, they are compiled on as many simulated CPU devices: parameters,
optimizer state and batch are exact, temporaries are the CPU compiler's.

example:
  seahorse-metrics plan --model mt5_xxl --mesh data=2,model=8 --input_length 2048 \\
      --batch_size 16 --dtype bfloat16
"""


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="Per-device memory of a training and scoring run on a device mesh.",
        description="Compiles the train step and the scoring step of a model size from shapes "
                    "alone and prints what each device holds.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True,
                        help="Model preset: tiny, mt5_small, mt5_base, mt5_large, mt5_xl, mt5_xxl.")
    parser.add_argument("--mesh", required=True, type=mesh_spec, metavar="data=D,model=M",
                        help="The mesh (a missing axis is 1).")
    parser.add_argument("--input_length", type=int, default=2048, help="Input tokens (default 2048).")
    parser.add_argument("--target_length", type=int, default=4,
                        help="Training target tokens (default 4).")
    parser.add_argument("--batch_size", type=int, required=True,
                        help="Training rows per step (a multiple of data).")
    parser.add_argument("--score_batch_size", type=int, default=None,
                        help="Scoring rows per batch (default: --batch_size).")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                        help="Compute dtype (training keeps float32 master weights; scoring "
                             "keeps the weights in this dtype). Default float32.")
    parser.add_argument("--optimizer", choices=("adafactor", "adamw"), default="adafactor",
                        help="The trainer's optimizer (default adafactor, as T5X).")
    parser.set_defaults(func=run)


def run(args) -> int:
    import jax

    from seahorse_metrics import planning
    from seahorse_metrics.model.config import get_config
    from seahorse_metrics.model.partitioning import parse_mesh_spec
    from seahorse_metrics.training.optimizers import OptimizerConfig

    sizes = parse_mesh_spec(args.mesh)
    data, model = sizes.get("data", 1), sizes.get("model", 1)
    config = get_config(args.model, dtype=args.dtype)
    request = dict(input_length=args.input_length, batch_size=args.batch_size,
                   target_length=args.target_length, score_batch_size=args.score_batch_size,
                   optimizer=OptimizerConfig(name=args.optimizer), model_name=args.model)
    if jax.device_count() >= data * model:
        from seahorse_metrics.model.partitioning import mesh_from_spec

        plan = planning.plan_memory(config, mesh_from_spec(f"data={data},model={model}"), **request)
    else:
        logger.info("%d devices here; compiling on %d simulated CPU devices (mT5-XXL's train "
                    "step takes minutes on a few CPU cores)", jax.device_count(), data * model)
        plan = planning.plan_in_subprocess(config, data, model, **request)
    print(plan.report())
    return 0
