"""Choosing an engine: the names, what each can run, and engines for loaded models.

    check_settings("ctranslate2", mesh=mesh)     # ValueError: --mesh is the jax engine's ...
    engines = place(models, tokenizer, token_ids, mesh)   # one `Engine` per model

A setting an engine cannot run (its `Capabilities`) is refused in one line
that says which engine has it.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from seahorse_metrics.engines.base import Engine
from seahorse_metrics.engines.ctranslate2 import ConvertedModel, CTranslate2Engine
from seahorse_metrics.engines.jax_engine import JaxEngine, default_mesh
from seahorse_metrics.engines.question_columns import question_columns
from seahorse_metrics.option_names import option

ENGINE_CLASSES: dict[str, type[Engine]] = {"jax": JaxEngine, "ctranslate2": CTranslate2Engine}
ENGINES = tuple(ENGINE_CLASSES)


def engine_class(name: str) -> type[Engine]:
    """The engine named `name`.

    Raises:
      ValueError: for an unknown engine.
    """
    if name not in ENGINE_CLASSES:
        raise ValueError(f"unknown engine {name!r}; choose one of {ENGINES}")
    return ENGINE_CLASSES[name]


def check_settings(
    engine: str,
    *,
    dtype: Optional[str] = None,
    mesh: Any = None,
    packing: bool = False,
    scan_layers: bool = False,
) -> None:
    """Refuses, in one line each, what `engine` cannot run (its `Capabilities`).

    Raises:
      ValueError: for an unknown engine, or a mesh, packing, scanned layers
        or a dtype the engine does not have.
    """
    capabilities = engine_class(engine).capabilities
    other = option("engine='jax'", "--engine jax")
    for given, able, name in (
        (mesh is not None, capabilities.mesh, option("mesh", "--mesh")),
        (packing, capabilities.packing, option("packing=True", "--packing")),
        (scan_layers, capabilities.scan_layers, option("scan_layers=True", "--scan_layers")),
    ):
        if given and not able:
            raise ValueError(
                f"{name} is the jax engine's; drop it with the {engine} engine, "
                f"or score with {other}"
            )
    if dtype not in capabilities.dtypes and dtype in JaxEngine.capabilities.dtypes:
        raise ValueError(
            f"{option(f'dtype={dtype!r}', f'--dtype {dtype}')} is the jax engine's; "
            f"the {engine} engine computes in {' or '.join(capabilities.dtypes)}, "
            f"or int8 with {option('quantize=' + repr('int8'), '--quantize int8')}"
        )


def place(
    models: Mapping[str, tuple[Any, Any]],
    tokenizer: Any,
    token_ids: Sequence[int],
    mesh: Any = None,
    compiler_options: Optional[Mapping[str, Any]] = None,
    questions: Optional[Mapping[str, Any]] = None,
) -> list[Engine]:
    """One engine per model: converted models (`ctranslate2.load_converted`)
    on CTranslate2, parameters on JAX, placed on `mesh` (default: every local
    device on `data`). A multi-question model gets one engine per question
    (`engines.question_columns`), which share one call per batch.

    Args:
      models: name -> (model, parameters or `ConvertedModel`).
      tokenizer: The scorer's tokenizer (CTranslate2 reads token strings).
      token_ids: Vocabulary ids whose log-probabilities are read.
      mesh: A ('data', 'model') mesh for the JAX engine.
      compiler_options: XLA options for the JAX engine (see `JaxEngine`).
      questions: name -> `QuestionPrefixes` of the multi-question models.

    Raises:
      ValueError: for a multi-question model on the ctranslate2 engine.
    """
    questions = dict(questions or {})
    if any(isinstance(params, ConvertedModel) for _, params in models.values()):
        check_questions_engine("ctranslate2", questions)
        return [
            CTranslate2Engine.of(params, model.config, tokenizer, token_ids)
            for model, params in models.values()
        ]
    mesh = mesh if mesh is not None else default_mesh()
    return [
        column
        for name, (model, params) in models.items()
        for column in question_columns(
            JaxEngine(
                model, params, token_ids, mesh, compiler_options, questions=questions.get(name)
            )
        )
    ]


def check_questions_engine(engine: str, questions: Mapping[str, Any]) -> None:
    """Refuses multi-question metrics on an engine without `Capabilities.questions`,
    in one line.

    CTranslate2 runs a decoder prefix only as a target prefix of its own
    encoder pass (one pass per question), never several prefixes against one
    encoder output, so it would lose what the metric is for.

    Raises:
      ValueError: naming the metrics and the engine.
    """
    if questions and not engine_class(engine).capabilities.questions:
        other = option("engine='jax'", "--engine jax")
        raise ValueError(
            f"{', '.join(sorted(questions))}: a multi-question metric is scored "
            f"by the jax engine only (the {engine} engine cannot share one "
            f"encoder pass between questions); score it with {other}"
        )
