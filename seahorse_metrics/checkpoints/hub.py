"""Hugging Face hub ids as checkpoints: `google/seahorse-large-q4` -> a local directory.

`resolve_checkpoint` is the one place the Scorer, `score --checkpoint`,
`evaluate --metric checkpoint:` and `export --checkpoint` turn what the user
wrote into a directory. A path that exists is used as it is (a training
run's MODEL_DIR, which is no checkpoint itself, by its `best/`), and one
that looks local (it starts with `.` or `/`, or its first part is a
directory here) is reported missing; otherwise a
string shaped like a hub id (`org/name`, optionally `org/name@revision`) goes
through `huggingface_hub.snapshot_download`, so its cache (`HF_HOME`,
`HF_HUB_CACHE`), offline mode (`HF_HUB_OFFLINE=1`), endpoint and token
settings all apply: a cached snapshot is used without the network, and only
the files a checkpoint needs are downloaded (safetensors weights when the
repository has them, else PyTorch or Flax ones).
"""

from __future__ import annotations

import logging
import os
import re

logger = logging.getLogger(__name__)

_HUB_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)(?:@(?P<revision>[\w./-]+))?$")
_COMMON_FILES = ["config.json", "spiece.model", "*.safetensors.index.json", "*.bin.index.json"]
_WEIGHT_CHOICES = (["*.safetensors"], ["pytorch_model*.bin", "flax_model.msgpack"])


def is_hub_id(spec: str) -> bool:
    """Whether `spec` is shaped like a hub id (`org/name[@revision]`) and is no
    local path: a path that exists, or one whose first part is a local
    directory (`runs/q5` where `runs/` exists: a mistyped path, reported
    missing rather than looked up on the hub), is not."""
    if os.path.exists(spec) or _HUB_ID.match(spec) is None:
        return False
    return not os.path.isdir(spec.split("/", 1)[0])


def resolve_checkpoint(spec: str) -> str:
    """The local directory of a checkpoint given as a path or a Hugging Face hub id.

    Args:
      spec: A local checkpoint path (returned unchanged, existing or not, so the
        loader reports what is wrong with it; a training run's MODEL_DIR gives
        its `best/`), or a hub id such as `google/seahorse-large-q4` or
        `google/seahorse-large-q4@<revision>`.

    Returns:
      The directory: `spec` itself, its `best/`, or the hub snapshot in the
      local cache.

    Raises:
      FileNotFoundError: if `spec` is a hub-id-shaped string that is neither a
        local directory nor in the cache while the hub cannot be reached (or
        does not have it).
    """
    if not is_hub_id(spec):
        return _best_of_run(spec)
    match = _HUB_ID.match(spec)
    repo, revision = match.group("repo"), match.group("revision")
    path = _snapshot(spec, repo, revision, _COMMON_FILES + _WEIGHT_CHOICES[0])
    if not _has_weights(path):
        path = _snapshot(spec, repo, revision, _COMMON_FILES + _WEIGHT_CHOICES[1])
    logger.info("hub id %s -> %s", spec, path)
    return path


def _best_of_run(path: str) -> str:
    """`path`, or `path/best` when `path` is a training run's MODEL_DIR (no
    checkpoint itself, with a `best/`)."""
    from seahorse_metrics.checkpoints import detect_format
    from seahorse_metrics.checkpoints.layout import BEST_DIR

    best = os.path.join(path, BEST_DIR)
    if not os.path.isdir(best):
        return path
    try:
        detect_format(path)
    except FileNotFoundError:
        logger.info("%s is a training run: using its best checkpoint %s", path, best)
        return best
    return path


def _has_weights(directory: str) -> bool:
    from seahorse_metrics.checkpoints.hf import WEIGHT_FILES

    return any(
        name in WEIGHT_FILES or name.endswith(".safetensors") for name in os.listdir(directory)
    )


def _snapshot(spec: str, repo: str, revision, patterns: list[str]) -> str:
    import huggingface_hub
    from huggingface_hub import constants
    from huggingface_hub.errors import (
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
    )

    try:
        return huggingface_hub.snapshot_download(repo, revision=revision, allow_patterns=patterns)
    except (LocalEntryNotFoundError, RepositoryNotFoundError, HfHubHTTPError) as error:
        offline = " (HF_HUB_OFFLINE is set)" if constants.HF_HUB_OFFLINE else ""
        raise FileNotFoundError(
            f"{spec} is neither a local directory nor a Hugging Face hub id in the cache "
            f"{constants.HF_HUB_CACHE}, and the hub{offline} could not provide it "
            f"({type(error).__name__}: {str(error).splitlines()[0]}). Give an existing checkpoint "
            f"directory, or download the model while online: huggingface-cli download {repo}"
        ) from error
