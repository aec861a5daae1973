"""Exporting a multi-question metric (issue 49): questions.json travels with
the HF and T5X exports, and transformers agrees per question."""

import os

import numpy as np

from fixtures.multi_question import HYPOTHESES, PREMISES


# ------------------------------------------------------------------- export
def test_exports_carry_the_questions_and_transformers_agrees(tmp_path, multi_question_dir):
    """HF and T5X exports keep questions.json beside the weights, score the
    same q1..q6, and transformers' MT5 gives each question's P("1") after its
    prefix as our shared-encoder program does."""
    import torch
    import transformers

    from seahorse_metrics.checkpoints.export import export_checkpoint
    from seahorse_metrics.checkpoints.layout import QUESTIONS_FILE, question_prefixes
    from seahorse_metrics.scoring.scorer import MultiScorer

    shape = dict(bucket_lengths=(32, 64), max_input_length=64, batch_size=4)
    source = MultiScorer.load([multi_question_dir], **shape)
    expected = source.score(PREMISES, HYPOTHESES)
    questions = question_prefixes(multi_question_dir)
    for to in ("hf", "t5x"):
        output = str(tmp_path / f"export-{to}")
        export_checkpoint(multi_question_dir, to, output)
        assert QUESTIONS_FILE in os.listdir(output)
        assert question_prefixes(output) == questions
        scores = MultiScorer.load([output], **shape).score(PREMISES, HYPOTHESES)
        for name in questions.names:
            np.testing.assert_allclose(scores[name], expected[name], atol=1e-6)

    hf_model = transformers.MT5ForConditionalGeneration.from_pretrained(
        str(tmp_path / "export-hf")
    ).eval()
    for row, ids in enumerate(source.encode_inputs(PREMISES, HYPOTHESES)):
        input_ids = torch.tensor([ids], dtype=torch.long)
        for name, prefix in zip(questions.names, questions.prefixes):
            decoder = torch.tensor([[hf_model.config.decoder_start_token_id, *prefix]])
            with torch.no_grad():
                logits = hf_model(input_ids=input_ids, decoder_input_ids=decoder).logits
            p_yes = torch.softmax(logits[0, len(prefix)].float(), -1)[source.positive_id]
            np.testing.assert_allclose(expected[name][row], float(p_yes), atol=1e-5)
