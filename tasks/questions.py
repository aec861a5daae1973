"""Multi-question tasks: the question as a decoder prefix, loss weight 0 on it.

    names = register_multi_question(prefixes, rates={"q4": 2.0})
    # -> seahorse_mq_q1 ... seahorse_mq_q6 and the mixture seahorse_multi_question

Each task reads the examples of a registered `seahorse_q<n>` task (the
encoder input `premise: ... hypothesis: ...` unchanged) and prepends that
question's prefix ids to the targets, with a `targets_loss_weights` feature
that is 0 on the prefix and 1 on the label and EOS (`add_question_prefix`).
seqio's own encoder-decoder converter weights every non-padding target
token; `PrefixWeightedEncDecFeatureConverter` carries the task's weights into
`decoder_loss_weights` instead, the feature T5X's `EncoderDecoderModel.loss_fn`
multiplies the token losses by. With T5X, bind it in gin:

    models.EncoderDecoderModel.feature_converter_cls = \
        @seahorse_metrics.tasks.questions.PrefixWeightedEncDecFeatureConverter

The mixture samples questions at the rates given (default: in proportion to
their training examples, as `seahorse_all`).
"""

from __future__ import annotations

import functools
from typing import Mapping, Optional

import seqio
import tensorflow as tf

from seahorse_metrics.model.questions import QuestionPrefixes

MULTI_QUESTION_MIXTURE = "seahorse_multi_question"
TASK_PREFIX = "seahorse_mq_"
LOSS_WEIGHTS = "targets_loss_weights"


def add_question_prefix(dataset: tf.data.Dataset, *, prefix_ids) -> tf.data.Dataset:
    """Prepends `prefix_ids` to each example's targets, with `targets_loss_weights`
    0 on the prefix and 1 on the rest."""
    prefix = tf.constant(list(prefix_ids), tf.int32)

    def prepend(features):
        features = dict(features)
        targets = tf.cast(features["targets"], tf.int32)
        features["targets"] = tf.concat([prefix, targets], axis=0)
        features[LOSS_WEIGHTS] = tf.concat([tf.zeros_like(prefix), tf.ones_like(targets)], axis=0)
        return features

    return dataset.map(prepend, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


class PrefixWeightedEncDecFeatureConverter(seqio.EncDecFeatureConverter):
    """seqio's encoder-decoder converter, with `decoder_loss_weights` taken
    from the task's `targets_loss_weights` (where it has one).

    Raises:
      ValueError: when packing (segments would need their weights packed
        alongside; train multi-question tasks unpacked).
    """

    def __init__(self, pack: bool = False, **kwargs):
        if pack:
            raise ValueError(
                "PrefixWeightedEncDecFeatureConverter does not pack; use "
                "pack=False for multi-question tasks"
            )
        super().__init__(pack=False, **kwargs)

    def _convert_features(self, ds: tf.data.Dataset, task_feature_lengths):
        if LOSS_WEIGHTS in ds.element_spec:
            length = task_feature_lengths["targets"]
            ds = ds.map(lambda f: {**f, LOSS_WEIGHTS: _pad_to(f[LOSS_WEIGHTS], length)})
        return super()._convert_features(ds, task_feature_lengths)

    def _convert_example(self, features):
        converted = dict(super()._convert_example(features))
        if LOSS_WEIGHTS in features:
            converted["decoder_loss_weights"] = (
                features[LOSS_WEIGHTS] * converted["decoder_loss_weights"]
            )
        return converted


def _pad_to(values: tf.Tensor, length: int) -> tf.Tensor:
    values = tf.cast(values[:length], tf.int32)
    padded = tf.pad(values, [[0, length - tf.shape(values)[0]]])
    padded.set_shape([length])
    return padded


def register_multi_question(
    prefixes: QuestionPrefixes, rates: Optional[Mapping[str, float]] = None
) -> list[str]:
    """Registers `seahorse_mq_<name>` per question over the registered
    `seahorse_q<n>` tasks (`name` is `q<n>`), and their mixture.

    Args:
      prefixes: The questions' decoder prefixes (names `q1` ... `q6`).
      rates: name -> sampling rate; default: the training examples.

    Returns:
      The registered names.

    Raises:
      ValueError: for a question whose `seahorse_q<n>` task is not registered
        (call `seahorse_metrics.tasks.register` first), or rates of unknown
        questions.
    """
    unknown = sorted(set(rates or {}) - set(prefixes.names))
    if unknown:
        raise ValueError(
            f"rates of unknown questions {unknown}; the questions are {list(prefixes.names)}"
        )
    names = []
    for name, prefix in zip(prefixes.names, prefixes.prefixes):
        base = (
            seqio.TaskRegistry.get(f"seahorse_{name}")
            if f"seahorse_{name}" in seqio.TaskRegistry.names()
            else None
        )
        if base is None:
            raise ValueError(
                f"question {name!r}: task seahorse_{name} is not registered; "
                "call seahorse_metrics.tasks.register first"
            )
        seqio.TaskRegistry.add(
            TASK_PREFIX + name,
            source=base.source,
            output_features=_output_features(base),
            preprocessors=list(base.preprocessors)
            + [functools.partial(add_question_prefix, prefix_ids=prefix)],
            shuffle_buffer_size=None,
            postprocess_fn=base.postprocessor,
            metric_fns=list(base.metric_fns),
        )
        names.append(TASK_PREFIX + name)
    tasks = [
        (task, float(rates[q])) if rates and q in rates else task
        for task, q in zip(names, prefixes.names)
    ]
    seqio.MixtureRegistry.add(MULTI_QUESTION_MIXTURE, tasks, default_rate=_train_examples_rate)
    return names + [MULTI_QUESTION_MIXTURE]


def _output_features(base: seqio.Task) -> dict:
    """The base task's features and the loss weights (a mixture keeps only
    its tasks' output features)."""
    weights = seqio.Feature(
        seqio.PassThroughVocabulary(2), add_eos=False, required=False, dtype=tf.int32
    )
    return {**base.output_features, LOSS_WEIGHTS: weights}


def _train_examples_rate(task: seqio.Task) -> float:
    """The task's training examples (the rate `seahorse_all` uses)."""
    from seahorse_metrics import tasks as task_module

    return float(
        len(task_module.examples_for_task(f"seahorse_{task.name[len(TASK_PREFIX) :]}", "train"))
    )


def unregister_multi_question(prefixes: QuestionPrefixes) -> None:
    """Removes what `register_multi_question` added."""
    seqio.MixtureRegistry.remove(MULTI_QUESTION_MIXTURE)
    for name in prefixes.names:
        seqio.TaskRegistry.remove(TASK_PREFIX + name)
