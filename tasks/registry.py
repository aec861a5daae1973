"""seqio glue: a data source over `TaskExamples`, and the registration itself.

Imported by `seahorse_metrics.tasks.register`, so seqio and TensorFlow load
only when tasks are registered.
"""

from __future__ import annotations

import functools
import logging
from typing import Callable, Mapping, Optional

import numpy as np
import seqio
import tensorflow as tf

from seahorse_metrics.tasks import metrics
from seahorse_metrics.tasks.examples import METADATA_FEATURES, ExampleEncoder, TaskExamples
from seahorse_metrics.tasks.specs import SEAHORSE_MIXTURE, TaskSpec, mixture_specs

logger = logging.getLogger(__name__)

_METADATA_DTYPES = {
    "id": tf.string,
    "lang": tf.string,
    "source": tf.string,
    "system": tf.string,
    "rating": tf.float32,
    "label": tf.int32,
    "question": tf.int32,
    "truncated": tf.int32,
}


def _flatten(rows: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lengths = np.asarray([len(r) for r in rows], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    flat = np.concatenate(rows).astype(np.int32) if rows else np.zeros([0], np.int32)
    return flat, starts, lengths


def examples_dataset(examples: TaskExamples, shuffle: bool, seed: Optional[int]) -> tf.data.Dataset:
    """A tf.data pipeline over the examples, fully shuffled when asked.

    The ids live in flat constant tensors; each element slices its own, so
    features are dense int32 vectors of their own length. The shuffle covers
    the whole split and reshuffles each epoch, deterministically for a seed.
    """
    inputs_flat, input_starts, input_lengths = _flatten(examples.inputs)
    targets_flat, target_starts, target_lengths = _flatten(examples.targets)
    inputs_flat, input_starts, input_lengths = map(
        tf.constant, (inputs_flat, input_starts, input_lengths)
    )
    targets_flat, target_starts, target_lengths = map(
        tf.constant, (targets_flat, target_starts, target_lengths)
    )
    metadata = {
        name: tf.constant(
            examples.metadata[name].astype(str)
            if _METADATA_DTYPES[name] == tf.string
            else examples.metadata[name],
            dtype=_METADATA_DTYPES[name],
        )
        for name in METADATA_FEATURES
    }

    def lookup(index):
        features = {
            "inputs": inputs_flat[input_starts[index] : input_starts[index] + input_lengths[index]],
            "targets": targets_flat[
                target_starts[index] : target_starts[index] + target_lengths[index]
            ],
        }
        features.update({name: values[index] for name, values in metadata.items()})
        return features

    indices = tf.data.Dataset.range(len(examples))
    if shuffle and len(examples):
        indices = indices.shuffle(len(examples), seed=seed, reshuffle_each_iteration=True)
    return indices.map(lookup, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


class RatedPairsSource(seqio.DataSource):
    """A seqio data source over the tokenised examples of one task.

    Shuffling is done here over the whole split (seed: `get_dataset`'s, else
    the registration seed) and redone each epoch, so the Task itself does not
    shuffle again. `num_input_examples` stays None on purpose: seqio caches
    sources with a known size below 10k examples in memory before repeating,
    which would freeze the first epoch's order; `examples_for_task` gives the
    sizes instead.
    """

    def __init__(
        self,
        spec: TaskSpec,
        examples_fn: Callable[[TaskSpec, str], TaskExamples],
        default_seed: int,
    ):
        super().__init__(
            splits=spec.splits,
            num_input_examples=None,
            caching_permitted=False,
            performs_internal_shuffling=True,
        )
        self._spec = spec
        self._examples_fn = examples_fn
        self._default_seed = default_seed

    @property
    def supports_arbitrary_sharding(self) -> bool:
        return False

    def list_shards(self, split: str) -> list[str]:
        return [split]

    def get_dataset(
        self,
        split: str = "train",
        shuffle: bool = True,
        seed: Optional[int] = None,
        shard_info: Optional[seqio.ShardInfo] = None,
        *,
        sequence_length: Optional[Mapping[str, int]] = None,
        use_cached: bool = False,
        num_epochs: Optional[int] = 1,
    ) -> tf.data.Dataset:
        del sequence_length, use_cached, num_epochs  # Handled by the Task.
        examples = self._examples_fn(self._spec, split)
        dataset = examples_dataset(examples, shuffle, self._default_seed if seed is None else seed)
        if shard_info is not None and shard_info.num_shards > 1:
            dataset = dataset.shard(shard_info.num_shards, shard_info.index)
        return dataset


def require_input_length(
    dataset: tf.data.Dataset, sequence_length=None, *, input_length: int, task: str
):
    """Refuses a `sequence_length` shorter than the length the inputs were built for.

    seqio would cut such inputs from the end, losing the summary and EOS
    that `summary_first` truncation kept.
    """
    requested = (sequence_length or {}).get("inputs")
    if requested is not None and requested < input_length:
        raise ValueError(
            f"task {task} was registered with input_length={input_length} but "
            f"get_dataset asked for inputs of {requested}; register the tasks with "
            f"input_length={requested} so that the article, not the summary, is shortened "
            f"(with T5X: pass --gin.SEAHORSE_INPUT_LENGTH={requested}, which "
            "gin/t5x/finetune.gin also puts in TASK_FEATURE_LENGTHS)"
        )
    return dataset


def register_tasks(
    specs: list[TaskSpec], encoder: ExampleEncoder, vocabulary: seqio.Vocabulary, seed: int
) -> list[str]:
    """Adds one seqio Task per spec, and the `seahorse_all` mixture.

    With the encoder's `eval_targets="positive"`, the tasks carry the score
    metrics of `seahorse_metrics.tasks.metrics` (ROC-AUC and Pearson of P("1")).
    """
    scored = encoder.eval_targets == "positive"
    output_features = {
        "inputs": seqio.Feature(vocabulary=vocabulary, add_eos=True, dtype=tf.int32),
        "targets": seqio.Feature(vocabulary=vocabulary, add_eos=True, dtype=tf.int32),
    }
    names: list[str] = []
    try:
        for spec in specs:
            seqio.TaskRegistry.add(
                spec.name,
                source=RatedPairsSource(spec, encoder.examples, seed),
                output_features=output_features,
                preprocessors=[
                    functools.partial(
                        require_input_length, input_length=encoder.input_length, task=spec.name
                    )
                ],
                shuffle_buffer_size=None,
                postprocess_fn=metrics.judgment if scored else None,
                metric_fns=list(metrics.SCORE_METRICS) if scored else [],
            )
            names.append(spec.name)
        seahorse_specs = mixture_specs(specs)
        if seahorse_specs:
            seqio.MixtureRegistry.add(
                SEAHORSE_MIXTURE,
                list(seahorse_specs),
                default_rate=functools.partial(
                    _train_size_rate, encoder=encoder, specs=seahorse_specs
                ),
            )
            names.append(SEAHORSE_MIXTURE)
    except Exception:
        # Leave the registries as they were (e.g. a name taken by another project).
        unregister_tasks(names)
        raise
    return names


def _train_size_rate(
    task: seqio.Task, *, encoder: ExampleEncoder, specs: Mapping[str, TaskSpec]
) -> float:
    """Mixing rate proportional to a task's number of training examples."""
    spec = specs[task.name]
    if "train" not in spec.splits:
        return 1.0
    return float(len(encoder.examples(spec, "train")))


def unregister_tasks(names: list[str]) -> None:
    """Removes tasks and mixtures from the seqio registries."""
    for name in names:
        seqio.MixtureRegistry.remove(name)
        seqio.TaskRegistry.remove(name)
