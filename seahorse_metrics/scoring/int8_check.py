"""Does int8 rank as float32 on this host? A probe scored both ways, once.

    check = int8_check.run_check(probe, reference_engine, int8_engine)
    # {"spearman": 0.9991, "max_abs_log_p1_diff": 0.031, "pairs": 48, ...}

Int8 scores depend on the host: CTranslate2's int8 products saturate where
the CPU has no VNNI, JAX's multiply in bfloat16 or float32 by CPU
(`engines.isa`). So when a metric is loaded with int8 weights, a fixed
probe (`PROBE_ARTICLES` articles of the bundled multilingual corpus, each
with its own summary and with another article's, so that the scores
spread; at most `PROBE_LENGTH` tokens) is scored by the float32 model and
by the int8 one on the same engine, and their agreement is kept: the
Spearman correlation of P("1") and the largest |log P("1") difference|.
It is computed once per checkpoint content, vocabulary, engine and its
version, int8 variant (the conversion or the product dtype) and
instruction set, and kept in `<cache>/int8_checks/<key>.json` (the cache
of `cache_directory`), so later loads read it.

A Spearman below `WARN_BELOW`, or a log P("1") difference above
`WARN_LOG_DIFF_ABOVE` (a factor of 2.1 in P("1")), logs one warning line
with the figures;
`int8_min_spearman` makes a figure below it a refusal (`Int8AgreementError`).
The float32 twin is scored in a child process on the CPU, so its weights
never join the int8 ones in the scorer's memory; where it would not fit in
the memory available, the check is skipped and says so.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from typing import Any, Callable, Optional, Sequence

import numpy as np

from seahorse_metrics.io.json_files import read_json_or_none

logger = logging.getLogger(__name__)

PROBE_ARTICLES = 48
PROBE_LENGTH = 128
# The documented levels (README, "Int8 on every CPU"). On the demo's seven
# metrics the probe gave JAX int8 0.9985-0.9996, CTranslate2 int8 with VNNI
# 0.990-0.999 and on AVX2 with 7-bit weights 0.985-0.999 (largest log
# difference <= 0.44), and saturating 8-bit weights on AVX2 0.88-0.987
# with log differences of 0.96-2.7 on six of them.
WARN_BELOW = 0.98
WARN_LOG_DIFF_ABOVE = 0.75
CACHE_ENV_VAR = "SEAHORSE_METRICS_CACHE"
# "off" turns the check off for every load (batch jobs, test suites).
SWITCH_ENV_VAR = "SEAHORSE_METRICS_INT8_CHECK"
_PROBE_VERSION = 1  # Changes when the probe or its figures change.


class Int8AgreementError(ValueError):
    """Int8 scores rank below the Spearman a user asked for (`int8_min_spearman`)."""


@dataclasses.dataclass(frozen=True)
class Int8Variant:
    """What makes one metric's int8 scores, and how to get its float32 twin's.

    Attributes:
      name: The metric's name (for messages).
      identity: Everything the int8 scores depend on (JSON-ready): content
        digests, engine and version, int8 variant, instruction set.
      reference: Probe tokens -> the float32 twin's log P("1") on the same
        engine (`reference_in_child`).
      float32_bytes: The float32 parameters' size, for the memory check.
    """

    name: str
    identity: dict
    reference: Callable[[np.ndarray], np.ndarray]
    float32_bytes: int


def wanted(asked: bool) -> bool:
    """Whether to check: as asked, unless `SEAHORSE_METRICS_INT8_CHECK=off`."""
    return bool(asked) and os.environ.get(SWITCH_ENV_VAR, "").lower() != "off"


def cache_directory() -> str:
    """`$SEAHORSE_METRICS_CACHE`, else `$XDG_CACHE_HOME/seahorse-metrics` (`~/.cache/...`)."""
    if os.environ.get(CACHE_ENV_VAR):
        return os.environ[CACHE_ENV_VAR]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "seahorse-metrics")


def probe_pairs() -> tuple[list[str], list[str]]:
    """The probe's (articles, summaries): each article with its summary and
    with the next article's."""
    from seahorse_metrics.engines.smoothing import calibration_pairs

    pairs = calibration_pairs(None, PROBE_ARTICLES)
    articles = [article for article, _ in pairs]
    summaries = [summary for _, summary in pairs]
    others = summaries[1:] + summaries[:1]
    return articles + articles, summaries + others


def probe_tokens(tokenizer: Any, pad_id: int, question_template: str) -> np.ndarray:
    """The probe as one padded [pairs, length] id batch (length a multiple of 8)."""
    from seahorse_metrics.data.inputs import encode_pair

    articles, summaries = probe_pairs()
    ids = [
        encode_pair(
            tokenizer, a, s, PROBE_LENGTH, long_summaries="cut", question_template=question_template
        ).ids
        for a, s in zip(articles, summaries)
    ]
    length = -(-max(len(row) for row in ids) // 8) * 8
    tokens = np.full((len(ids), length), pad_id, np.int32)
    for row, row_ids in enumerate(ids):
        tokens[row, : len(row_ids)] = row_ids
    return tokens


def first_step_log_p1(engine: Any, tokens: np.ndarray) -> np.ndarray:
    """log P("1") of each probe row from an engine (`engines.base.Engine`:
    the first of its token ids is "1")."""
    return np.asarray(engine.log_probs(tokens), np.float64)[:, 0]


def agreement(reference: np.ndarray, quantized: np.ndarray) -> dict:
    """Spearman of the two and their largest |difference| (log P("1"))."""
    from scipy.stats import spearmanr

    return {
        "spearman": round(float(spearmanr(reference, quantized).statistic), 6),
        "max_abs_log_p1_diff": round(float(np.abs(reference - quantized).max()), 6),
        "pairs": int(len(reference)),
    }


def check_key(identity: dict) -> str:
    payload = json.dumps({**identity, "probe": _PROBE_VERSION}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def available_memory() -> Optional[int]:
    """MemAvailable of /proc/meminfo in bytes, or None where there is none."""
    try:
        with open("/proc/meminfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def run_check(variant: Int8Variant, quantized_engine: Any, tokens: np.ndarray) -> dict:
    """The agreement of one metric's int8 model call with its float32 twin,
    from the cache or measured now (and cached).

    Returns:
      {"spearman", "max_abs_log_p1_diff", "pairs", "key", "cached"}, or
      {"skipped": reason, "key"} where float32 would not fit in memory.
    """
    key = check_key(variant.identity)
    path = os.path.join(cache_directory(), "int8_checks", f"{key}.json")
    cached = _read_cached(path)
    if cached is not None:
        return {**cached, "key": key, "cached": True}
    free = available_memory()
    if free is not None and variant.float32_bytes > 0.8 * free:
        return {
            "skipped": f"the float32 model ({variant.float32_bytes / 2**30:.1f} GiB) would "
            f"not fit in the {free / 2**30:.1f} GiB available",
            "key": key,
        }
    reference = variant.reference(tokens)
    measured = agreement(reference, first_step_log_p1(quantized_engine, tokens))
    _write_cached(path, {**measured, "identity": variant.identity})
    logger.info(
        'int8 self-check of %s: Spearman %.5f to float32, largest |log P("1") '
        "difference| %.4f over %d probe pairs",
        variant.name,
        measured["spearman"],
        measured["max_abs_log_p1_diff"],
        measured["pairs"],
    )
    return {**measured, "key": key, "cached": False}


def judge(name: str, check: dict, min_spearman: Optional[float]) -> None:
    """Warns (one line) below `WARN_BELOW` or above `WARN_LOG_DIFF_ABOVE`;
    refuses below `min_spearman`.

    Raises:
      Int8AgreementError: when the Spearman is below `min_spearman`.
    """
    if "spearman" not in check:
        logger.warning("int8 self-check of %s skipped: %s", name, check.get("skipped"))
        return
    figures = (
        f'Spearman {check["spearman"]:.4f} to float32, largest |log P("1") difference| '
        f"{check['max_abs_log_p1_diff']:.3f} over {check['pairs']} probe pairs"
    )
    if min_spearman is not None and check["spearman"] < min_spearman:
        raise Int8AgreementError(
            f"int8 scores of {name} rank below --int8_min_spearman {min_spearman} on this host "
            f"({figures}); score in float32, or with the other engine's int8"
        )
    if check["spearman"] < WARN_BELOW or check["max_abs_log_p1_diff"] > WARN_LOG_DIFF_ABOVE:
        logger.warning(
            "int8 scores of %s may rank differently from float32 here (%s; the "
            "warning levels are Spearman %.2f and %.2f); score in float32 where "
            "ranks matter",
            name,
            figures,
            WARN_BELOW,
            WARN_LOG_DIFF_ABOVE,
        )


def _read_cached(path: str) -> Optional[dict]:
    value = read_json_or_none(path)  # Absent or torn: measured again.
    keys = ("spearman", "max_abs_log_p1_diff", "pairs")
    return (
        {k: value[k] for k in keys}
        if isinstance(value, dict) and all(k in value for k in keys)
        else None
    )


def _write_cached(path: str, value: dict) -> None:
    from seahorse_metrics.io.atomic import write_json_atomically

    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_json_atomically(path, value)
    except OSError as error:  # A read-only cache costs a probe per load, not the run.
        logger.warning("could not keep the int8 self-check in %s: %s", path, error)


def check_all(
    variants: Sequence[Int8Variant],
    engines: Sequence[Any],
    tokens: np.ndarray,
    min_spearman: Optional[float],
) -> dict:
    """name -> `run_check` of each metric, judged (see `judge`)."""
    checks = {}
    for variant, engine in zip(variants, engines):
        checks[variant.name] = run_check(variant, engine, tokens)
        judge(variant.name, checks[variant.name], min_spearman)
    return checks


def float32_bytes(config: Any) -> int:
    """Bytes of a network's parameters in float32 (`T5Config`)."""
    import jax

    from seahorse_metrics.model.model import EncoderDecoderModel

    abstract = EncoderDecoderModel(config.replace(quantize=None)).abstract_params()
    return 4 * sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(abstract))


def reference_in_child(
    checkpoint: str, vocab_path: str, options: dict, tokens: np.ndarray
) -> np.ndarray:
    """log P("1") of the probe `tokens` from the float32 model of `checkpoint`,
    scored in a child process on the CPU (`scoring.int8_reference`), so that
    the float32 weights never join the int8 ones in this process's memory.

    Args:
      options: `MultiScorer.load` keyword arguments (engine, engine_options,
        question_template, ...), JSON-ready.

    Raises:
      RuntimeError: with the child's last error line when it fails.
    """
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(prefix="seahorse-int8-check-") as work:
        source, target = os.path.join(work, "tokens.npy"), os.path.join(work, "log_p1.npy")
        np.save(source, tokens)
        environment = dict(os.environ, JAX_PLATFORMS="cpu")
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "seahorse_metrics.scoring.int8_reference",
                checkpoint,
                vocab_path,
                json.dumps(options),
                source,
                target,
            ],
            capture_output=True,
            text=True,
            env=environment,
        )
        if done.returncode or not os.path.isfile(target):
            lines = [line for line in done.stderr.splitlines() if line.strip()]
            raise RuntimeError(
                f"the int8 self-check's float32 scoring of {checkpoint} failed: "
                f"{lines[-1] if lines else done.returncode}"
            )
        return np.load(target)


def variants(
    checkpoints: dict, vocab_path: str, engines: Sequence[Any], engine: str, reference_options: dict
) -> list[Int8Variant]:
    """An `Int8Variant` per metric of a scorer.

    Args:
      checkpoints: name -> local checkpoint directory.
      vocab_path: The vocabulary.
      engines: The int8 engines, in the order of `checkpoints`.
      engine: "jax" or "ctranslate2".
      reference_options: `MultiScorer.load` keyword arguments of the float32
        twins (`reference_in_child`).
    """
    import functools

    import seahorse_metrics
    from seahorse_metrics.checkpoints.content import content_digest
    from seahorse_metrics.engines.choice import engine_class
    from seahorse_metrics.engines.isa import engine_isa

    shared = {
        "vocabulary": content_digest(vocab_path),
        "engine": engine,
        "engine_version": engine_class(engine).library_version(),
        "isa": engine_isa(engine),
        "seahorse_metrics": seahorse_metrics.__version__,
    }
    return [
        Int8Variant(
            name,
            {**shared, "checkpoint": content_digest(path), "int8": engine.int8_variant()},
            functools.partial(reference_in_child, path, vocab_path, reference_options),
            float32_bytes(engine.model.config),
        )
        for (name, path), engine in zip(checkpoints.items(), engines)
    ]
