"""From checkpoint paths to models on a device mesh, for `Scorer.load` and `MultiScorer.load`.

The vocabulary and question template come from the checkpoint directory
(`seahorse_metrics.checkpoints.layout`); parameters are read tensor by
tensor straight onto the mesh.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import os
from typing import Any, Mapping, Optional, Sequence

from seahorse_metrics.checkpoints.layout import find_vocabulary, question_template
from seahorse_metrics.checkpoints.streaming import trim_heap
from seahorse_metrics.checkpoints.t5x import missing_vocabulary_message
from seahorse_metrics.data.inputs import QUESTION_TEMPLATE
from seahorse_metrics.data.vocab import target_token_ids
from seahorse_metrics.engines.choice import check_settings
from seahorse_metrics.engines.isa import jax_int8_products
from seahorse_metrics.scoring.options import ScoringOptions

logger = logging.getLogger(__name__)


def shared_question_template(checkpoints: Mapping[str, str]) -> str:
    """The question template every checkpoint agrees on (the default when none names one)."""
    templates = {
        name: question_template(path) or QUESTION_TEMPLATE for name, path in checkpoints.items()
    }
    if len(set(templates.values())) > 1:
        raise ValueError(
            f"the checkpoints name different question templates ({templates}); "
            "score them separately or pass question_template=..."
        )
    return next(iter(templates.values()))


def resolve_vocabulary(path: str, vocab: Optional[str]) -> str:
    if not os.path.isdir(path):
        raise FileNotFoundError(
            f"checkpoint directory {path} does not exist"
            if not os.path.exists(path)
            else f"checkpoint {path} is not a directory"
        )
    vocab_path = vocab or find_vocabulary(path)
    if vocab_path is None:
        raise FileNotFoundError(missing_vocabulary_message(path))
    if not os.path.isfile(vocab_path):
        raise FileNotFoundError(f"vocabulary {vocab_path} does not exist")
    return vocab_path


def load_model(
    path: str, dtype: str, mesh: Any, quantize: Optional[str] = None, scan_layers: bool = False
):
    """The model of a checkpoint, its parameters read tensor by tensor in
    `dtype` straight onto `mesh` (sharded by their logical axes); quantized,
    each kernel read in float32 and turned into int8 and its scales before
    the next is read (the float32 model is never whole in memory); with
    `scan_layers`, stacked for a scanned network parameter by parameter
    (`model.stacks.stack_layers`, no second copy of the model). Int8
    kernels multiply in the dtype this host runs fastest
    (`engines.isa.jax_int8_products`)."""
    from seahorse_metrics.checkpoints import checkpoint_config, load_checkpoint
    from seahorse_metrics.model import stacks
    from seahorse_metrics.model.model import EncoderDecoderModel
    from seahorse_metrics.model.partitioning import logical_to_sharding

    # A checkpoint trained with other attention blocks is scored with today's.
    products = jax_int8_products() if quantize else "bfloat16"
    model = EncoderDecoderModel(
        checkpoint_config(path)
        .with_default_attention()
        .replace(dtype=dtype, quantize=quantize, int8_products=products)
    )
    if quantize is None:
        _, params = load_checkpoint(path, dtype=dtype, mesh=mesh)
    else:
        from seahorse_metrics.model.quantize import kernel_converter

        _, params = load_checkpoint(
            path, dtype="float32", mesh=mesh, convert=kernel_converter(model)
        )
        release_freed_memory()
    if not scan_layers:
        return model, params
    scanned = EncoderDecoderModel(model.config.replace(scan_layers=True))
    shardings = logical_to_sharding(scanned.param_logical_axes(), mesh)
    return scanned, stacks.stack_layers(params, shardings, release=True)


def release_freed_memory() -> bool:
    """Hands the memory of freed arrays back to the system, where the C
    library keeps it (glibc's `malloc_trim`); False where there is none.

    Quantizing frees the float32 kernels just read, but glibc keeps freed
    blocks of that size in its heap, counted in the process's memory: the
    int8 scorer of an mT5-base then peaked 0.9 GB above the float32 one
    (3.70 against 2.87 GB; 2.84 GB with the memory handed back).
    """
    gc.collect()
    return trim_heap()


def load_models(
    checkpoints: Mapping[str, str],
    vocab_path: str,
    options: ScoringOptions,
    mesh: Any,
    engine_options: Optional[Mapping[str, Any]] = None,
) -> tuple[dict, Any]:
    """name -> (model, parameters) of each checkpoint on `options.engine`,
    and the mesh they are scored on (None on an engine other than JAX, whose
    converted models `engines.ctranslate2.converted_models` gives, with
    `options.engine_options` updated by `engine_options`).

    Raises:
      ValueError: for engine options with the JAX engine, or a setting the
        engine cannot run (`engines.choice.check_settings`).
    """
    check_settings(
        options.engine,
        dtype=options.dtype,
        mesh=mesh,
        packing=options.packing,
        scan_layers=options.scan_layers,
    )
    merged = {**(options.engine_options or {}), **(engine_options or {})}
    if options.engine != "jax":
        from seahorse_metrics.engines.ctranslate2 import converted_models

        return converted_models(checkpoints, vocab_path, options, mesh, merged), None
    if merged:
        raise ValueError(
            f"engine options ({', '.join(sorted(merged))}) are the ctranslate2 "
            "engine's; drop them, or score with engine ctranslate2"
        )
    mesh = mesh_or_default(mesh)
    return {
        name: load_model(path, options.dtype, mesh, options.quantize, options.scan_layers)
        for name, path in checkpoints.items()
    }, mesh


def mesh_or_default(mesh: Any) -> Any:
    """`mesh`; for a spec such as "data=2,model=4" the mesh of the local
    devices it names (`partitioning.mesh_from_spec`); for None every local
    device on data."""
    from seahorse_metrics.engines.jax_engine import default_mesh

    if mesh is None or mesh == "":
        return default_mesh()
    if isinstance(mesh, str):
        import jax

        from seahorse_metrics.model.partitioning import mesh_from_spec

        mesh = mesh_from_spec(mesh, jax.local_devices())
        logger.info("scoring on a %s mesh", dict(mesh.shape))
    return mesh


def multi_question_metrics(checkpoints: Mapping[str, str], engine: str) -> dict:
    """name -> `QuestionPrefixes` of the checkpoints that are multi-question
    metrics (a `questions.json` beside them).

    Raises:
      ValueError: for a malformed questions file, or such metrics on an engine
        other than JAX (`engines.choice.check_questions_engine`).
    """
    from seahorse_metrics.checkpoints.layout import question_prefixes
    from seahorse_metrics.engines.choice import check_questions_engine

    found = {name: question_prefixes(path) for name, path in checkpoints.items()}
    found = {name: questions for name, questions in found.items() if questions is not None}
    check_questions_engine(engine, found)
    return found


def column_checkpoints(
    metrics: Sequence[str],
    checkpoints: Mapping[str, str],
    questions: Mapping[str, Any],
    columns: Sequence[str],
) -> dict[str, str]:
    """column -> checkpoint path (each question column of a multi-question
    metric has the metric's checkpoint); `columns` as `column_names` gives them."""
    owners = [
        name for name in metrics for _ in range(len(questions[name]) if name in questions else 1)
    ]
    return {
        column: checkpoints[owner] for column, owner in zip(columns, owners) if owner in checkpoints
    }


def file_digest(path: str) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def given_options(options: Optional[ScoringOptions], **given) -> ScoringOptions:
    """`options` with the arguments given (not None) set."""
    return ScoringOptions.of(options, **{k: v for k, v in given.items() if v is not None})


def check_models(
    models: Mapping[str, tuple[Any, Any]], tokenizer: Any, vocab_path: str
) -> tuple[int, int, int]:
    """Checks the vocabulary against every model; returns the ids of "1",
    "0" and padding.

    Raises:
      ValueError: for a vocabulary that does not fit a model, disagrees on
        the eos/pad ids or cannot tell "1" from "0", or models that disagree
        on the pad id.
    """
    configs = {name: model.config for name, (model, _) in models.items()}
    for name, config in configs.items():
        _check_vocabulary(name, config, tokenizer, vocab_path)
    try:
        positive_id, negative_id = target_token_ids(tokenizer)
    except ValueError as error:
        raise ValueError(
            f"{vocab_path}: {error}. Use the vocabulary the metric was trained with."
        ) from None
    pad_ids = {config.pad_id for config in configs.values()}
    if len(pad_ids) > 1:
        raise ValueError(f"the models disagree on the pad id: {pad_ids}")
    return positive_id, negative_id, pad_ids.pop()


def _check_vocabulary(name: str, config: Any, tokenizer: Any, vocab_path: str) -> None:
    if tokenizer.vocab_size > config.vocab_size:
        raise ValueError(
            f"{vocab_path}: {tokenizer.vocab_size} pieces do not fit model {name!r} "
            f"with vocab_size {config.vocab_size}; is it the checkpoint's vocabulary?"
        )
    for role, vocab_id, model_id in (
        ("eos", tokenizer.eos_id, config.eos_id),
        ("pad", tokenizer.pad_id, config.pad_id),
    ):
        if vocab_id >= 0 and vocab_id != model_id:
            raise ValueError(
                f"{vocab_path}: {role} id {vocab_id} differs from model {name!r}'s {model_id}"
            )
