"""The multi-question tasks for T5X: importing this module registers them.

`gin/t5x/finetune_multi_question.gin` names this module as
`MIXTURE_OR_TASK_MODULE`. Importing it registers the SEAHORSE tasks as
`seahorse_metrics.tasks.t5x` does (same gin macros and environment
variables), then `seahorse_mq_q1` ... `seahorse_mq_q6` and the mixture
`seahorse_multi_question` (`seahorse_metrics.tasks.questions`), the
prefixes tokenised with the tasks' vocabulary. Every question's task keeps
its ROC-AUC and Pearson score metrics, so T5X's evaluation reports each
question; the gin file binds the converter that carries the prefix loss
weights into `decoder_loss_weights`.
"""

from __future__ import annotations

import logging

from seahorse_metrics import tasks
from seahorse_metrics.model.questions import QuestionPrefixes, seahorse_question_texts
from seahorse_metrics.tasks import questions
from seahorse_metrics.tasks import t5x as single_question

logger = logging.getLogger(__name__)


def register_from_settings() -> list[str]:
    """Registers the multi-question tasks over the tasks `tasks.t5x` registered.

    Returns:
      The registered names.
    """
    from seahorse_metrics.data.vocab import SentencePieceTokenizer

    config = tasks.registered_config()
    prefixes = QuestionPrefixes.from_texts(
        seahorse_question_texts(), SentencePieceTokenizer(config.vocab_path)
    )
    names = questions.register_multi_question(prefixes)
    logger.info("seahorse_metrics.tasks.t5x_multi_question registered %s", ", ".join(names))
    return names


TASK_NAMES = single_question.TASK_NAMES + register_from_settings()
