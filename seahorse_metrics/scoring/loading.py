"""From checkpoint paths to models on a device mesh, for `Scorer.load` and `MultiScorer.load`.

The vocabulary and question template come from the checkpoint directory
(`seahorse_metrics.checkpoints.layout`); parameters are read tensor by
tensor straight onto the mesh.
"""
from __future__ import annotations

import hashlib
import os
from typing import Any, Mapping, Optional

from seahorse_metrics.checkpoints.layout import VOCAB_FILE, find_vocabulary, question_template
from seahorse_metrics.data.inputs import QUESTION_TEMPLATE
from seahorse_metrics.scoring.job import ScoringOptions


def shared_question_template(checkpoints: Mapping[str, str]) -> str:
    """The question template every checkpoint agrees on (the default when none names one)."""
    templates = {name: question_template(path) or QUESTION_TEMPLATE
                 for name, path in checkpoints.items()}
    if len(set(templates.values())) > 1:
        raise ValueError(f"the checkpoints name different question templates ({templates}); "
                         "score them separately or pass question_template=...")
    return next(iter(templates.values()))


def resolve_vocabulary(path: str, vocab: Optional[str]) -> str:
    if not os.path.isdir(path):
        raise FileNotFoundError(f"checkpoint directory {path} does not exist" if not
                                os.path.exists(path) else f"checkpoint {path} is not a directory")
    vocab_path = vocab or find_vocabulary(path)
    if vocab_path is None:
        raise FileNotFoundError(
            f"no {VOCAB_FILE} in {path}; pass the SentencePiece model as vocab=...")
    if not os.path.isfile(vocab_path):
        raise FileNotFoundError(f"vocabulary {vocab_path} does not exist")
    return vocab_path


def load_model(path: str, dtype: str, mesh: Any, quantize: Optional[str] = None):
    """The model of a checkpoint, its parameters read tensor by tensor in
    `dtype` straight onto `mesh` (sharded by their logical axes); quantized,
    read in float32 and then turned into int8 kernels and their scales."""
    from seahorse_metrics.checkpoints import load_checkpoint
    from seahorse_metrics.model.model import EncoderDecoderModel

    param_dtype = "float32" if quantize else dtype
    config, params = load_checkpoint(path, dtype=param_dtype, mesh=mesh)
    model = EncoderDecoderModel(config.replace(dtype=dtype, quantize=quantize))
    if quantize is None:
        return model, params
    from seahorse_metrics.model.quantize import quantize_params

    return model, quantize_params(model, params)


def mesh_or_default(mesh: Any) -> Any:
    from seahorse_metrics.scoring.runner import default_mesh

    return mesh if mesh is not None else default_mesh()


def file_digest(path: str) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def given_options(options: Optional[ScoringOptions], **given) -> ScoringOptions:
    """`options` with the arguments given (not None) set."""
    return ScoringOptions.of(options, **{k: v for k, v in given.items() if v is not None})
