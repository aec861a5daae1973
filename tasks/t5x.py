"""The SEAHORSE tasks for T5X: importing this module registers them.

T5X imports a task module named by `MIXTURE_OR_TASK_MODULE` (or an `import`
line in a gin file); `gin/t5x/*.gin` name this one. The import registers
`seahorse_q1` ... `seahorse_q6`, the mixture `seahorse_all`, and, when their
files are given, `mface_{quality,attribution,informativeness}` and
`true_<name>`, with `eval_targets="positive"`: the train split has targets
`1`/`0`, every evaluation split has target `1` with the label beside it, and
the tasks carry ROC-AUC and Pearson of P("1") as seqio score metrics, so
T5X's own evaluation (its score mode gives log P("1")) reports the paper's
two measures rather than the accuracy of a decoded string.

Where the data are is read, for each setting, from a gin macro or else from
the environment variable of the same name:

  SEAHORSE_DATA_DIR      the `seahorse-metrics prepare` output (required)
  SEAHORSE_MFACE         the mFACE sheet (optional)
  SEAHORSE_TRUE_DIR      a directory of TRUE CSVs (optional)
  SEAHORSE_VOCABULARY    a SentencePiece model; default: T5X's `VOCABULARY`
                         macro (the model's own vocabulary, so task and model
                         agree), else the one `tasks.register` defaults to
  SEAHORSE_INPUT_LENGTH  input tokens, EOS included (default 2048)

Gin macros can be read only once gin has parsed them: T5X imports
`MIXTURE_OR_TASK_MODULE` after every gin file and `--gin.` flag, so any of
them works there; an `import seahorse_metrics.tasks.t5x` line in a gin file
runs while that file is parsed, and sees only macros bound above it (and the
environment).
"""

from __future__ import annotations

import logging
import os
from typing import Any, Optional

from seahorse_metrics.tasks import register

logger = logging.getLogger(__name__)

DATA_DIR = "SEAHORSE_DATA_DIR"
MFACE = "SEAHORSE_MFACE"
TRUE_DIR = "SEAHORSE_TRUE_DIR"
VOCABULARY = "SEAHORSE_VOCABULARY"
INPUT_LENGTH = "SEAHORSE_INPUT_LENGTH"
T5X_VOCABULARY = "VOCABULARY"  # The macro T5X's model gin files define.
DEFAULT_INPUT_LENGTH = 2048


def gin_macro(name: str) -> Any:
    """The value bound to the gin macro `name` (evaluated if it is a
    `@configurable()` reference), or None when it is unbound."""
    import gin

    try:
        value = gin.query_parameter(f"{name}/macro.value")
    except ValueError:
        return None
    if isinstance(value, gin.config.ConfigurableReference) and value.evaluate:
        value = value.scoped_configurable_fn()
    return value


def setting(name: str) -> Any:
    """A setting from the gin macro `name`, else the environment variable `name`, else None."""
    value = gin_macro(name)
    if value is None:
        value = os.environ.get(name) or None
    return value


def _data_dir() -> str:
    data_dir = setting(DATA_DIR)
    if data_dir is None:
        raise ValueError(
            f"seahorse_metrics.tasks.t5x needs the prepared SEAHORSE data: bind the gin macro "
            f"{DATA_DIR} (e.g. --gin.{DATA_DIR}=\"'prepared'\") or set the environment variable "
            f"{DATA_DIR}=prepared. (A gin file that imports this module directly must bind the "
            f"macro above the import line; T5X's MIXTURE_OR_TASK_MODULE imports it after all "
            "gin files and flags are parsed.)"
        )
    return str(data_dir)


def _vocabulary() -> Optional[Any]:
    path = setting(VOCABULARY)
    if path is not None:
        return str(path)
    return gin_macro(T5X_VOCABULARY)


def _warn_if_overridden(name: str, value: Any) -> None:
    """Says when the environment variable `name` loses to a gin macro of
    another `value` (gin/t5x/finetune.gin binds SEAHORSE_INPUT_LENGTH)."""
    environment = os.environ.get(name)
    if environment and gin_macro(name) is not None and str(value) != environment:
        logger.warning(
            "the environment's %s=%s is not used: the gin macro %s is bound to %s "
            "(a gin file binds it); pass --gin.%s=%s instead",
            name,
            environment,
            name,
            value,
            name,
            environment,
        )


def register_from_settings() -> list[str]:
    """Registers the tasks from the gin macros / environment variables above.

    Returns:
      The registered task and mixture names.

    Raises:
      ValueError: if SEAHORSE_DATA_DIR is set neither as a gin macro nor in the
        environment, or a setting is malformed.
    """
    input_length = setting(INPUT_LENGTH)
    _warn_if_overridden(INPUT_LENGTH, input_length)
    try:
        input_length = int(input_length) if input_length is not None else DEFAULT_INPUT_LENGTH
    except ValueError:
        raise ValueError(
            f"{INPUT_LENGTH}={input_length!r} is not a whole number of tokens"
        ) from None
    names = register(
        _data_dir(),
        vocabulary=_vocabulary(),
        input_length=input_length,
        mface_path=setting(MFACE),
        true_dir=setting(TRUE_DIR),
        eval_targets="positive",
    )
    logger.info("seahorse_metrics.tasks.t5x registered %s", ", ".join(names))
    return names


TASK_NAMES = register_from_settings()
