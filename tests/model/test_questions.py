"""The multi-question metric's model (issue 49): every question's decoder prefix
packed side by side against one encoder output (`first_step.question_log_probs`)
must give what scoring each question alone gives, with the encoder run again."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seahorse_metrics.model import first_step
from seahorse_metrics.model.model import EncoderDecoderModel
from seahorse_metrics.model.questions import QuestionPrefixes

from fixtures.multi_question import LABEL_IDS, QUESTIONS
from fixtures.tiny_model import tiny_config, tiny_t5_v1_0_config


def _tokens(config, rows=3, length=12, seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(3, config.vocab_size, (rows, length)).astype(np.int32)
    tokens[1, 8:] = config.pad_id  # a padded row
    return jnp.asarray(tokens)


def _one_question_alone(model, params, tokens, prefix):
    """log P(LABEL_IDS) after `prefix`: a plain teacher-forced forward pass of
    one question (its own encoder pass), read at the prefix's last step."""
    rows = tokens.shape[0]
    decoder = np.asarray([[model.config.decoder_start_id, *prefix]] * rows, np.int32)
    logits = model.logits(
        params, {"encoder_input_tokens": tokens, "decoder_input_tokens": jnp.asarray(decoder)}
    )
    log_probs = jax.nn.log_softmax(logits[:, len(prefix)].astype(jnp.float32), axis=-1)
    return np.asarray(log_probs[:, list(LABEL_IDS)])


@pytest.mark.parametrize("config_of", [tiny_config, tiny_t5_v1_0_config], ids=["mt5", "t5v1.0"])
def test_shared_encoder_scores_equal_each_question_alone(config_of):
    model = EncoderDecoderModel(config_of())
    params = model.init_params(jax.random.PRNGKey(1))
    tokens = _tokens(model.config)
    shared = np.asarray(
        jax.jit(lambda p, t: first_step.question_log_probs(model, LABEL_IDS, QUESTIONS, p, t))(
            params, tokens
        )
    )
    assert shared.shape == (3, len(QUESTIONS), len(LABEL_IDS))
    for index, prefix in enumerate(QUESTIONS.prefixes):
        np.testing.assert_allclose(
            shared[:, index], _one_question_alone(model, params, tokens, prefix), atol=1e-5
        )
    # The questions really differ (a broken mask could make them all equal).
    assert np.abs(shared[:, 0] - shared[:, 5]).max() > 1e-4


def test_shared_encoder_runs_the_encoder_once_per_row():
    model = EncoderDecoderModel(tiny_config())
    params = model.init_params(jax.random.PRNGKey(1))
    program = jax.jit(lambda p, t: first_step.question_log_probs(model, LABEL_IDS, QUESTIONS, p, t))
    text = program.lower(params, _tokens(model.config)).as_text()
    # Encoder activations are [3 rows, 12 tokens, 32]; nothing per question
    # (18 = 3 rows x 6 questions) is ever as long as the input.
    assert "tensor<3x12x32xf32>" in text
    assert "tensor<18x12x" not in text


def test_question_prefixes_refuse_bad_input():
    with pytest.raises(ValueError, match="empty decoder prefix"):
        QuestionPrefixes(("q1",), ((),))
    with pytest.raises(ValueError, match="2 question names but 1 prefixes"):
        QuestionPrefixes(("q1", "q2"), ((3,),))
    with pytest.raises(ValueError, match="question 'q2': prefix token ids \\[999\\]"):
        QuestionPrefixes(("q1", "q2"), ((3,), (999,))).check_vocab(512)
