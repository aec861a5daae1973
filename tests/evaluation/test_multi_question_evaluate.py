"""`evaluate` on a multi-question checkpoint (issue 49): one metric per question."""

import numpy as np
import pytest


def test_evaluate_reads_a_multi_question_checkpoint_as_one_metric_per_question(
    multi_question_dir, monkeypatch
):
    from seahorse_metrics.evaluation import metrics as metrics_lib
    from seahorse_metrics.evaluation import run as run_lib
    from seahorse_metrics.evaluation.benchmarks import Benchmark
    from seahorse_metrics.scoring.scorer import MultiScorer

    from fixtures import eval_data

    bench = Benchmark("true/frank", "true", "frank", "test", tuple(eval_data.rated_pairs(8, 0)))
    settings = ",max_input_length=64"
    q1, q4 = (
        metrics_lib.build_metric(
            metrics_lib.parse_metric_spec(f"{name}=checkpoint:{multi_question_dir}{settings}"),
            batch_size=4,
        )
        for name in ("q1", "q4")
    )
    calls = []
    original = MultiScorer.score
    monkeypatch.setattr(
        MultiScorer, "score", lambda self, *a, **k: calls.append(1) or original(self, *a, **k)
    )
    report = run_lib.evaluate([bench], [q1, q4], run_lib.EvaluationConfig(n_resamples=20))
    assert len(calls) == 1 and q1._scorer is q4._scorer  # one pass for both questions
    expected = q1._scorer.scorer.score(
        [i.premise for i in bench.items], [i.hypothesis for i in bench.items]
    )
    np.testing.assert_allclose(q4.score_benchmark(bench), expected["q4"], atol=1e-6)
    assert report.result("q4", "true/frank").n == 8
    assert "|q:q4" in q4.provenance()["signature"]
    other = metrics_lib.build_metric(
        metrics_lib.parse_metric_spec(f"mq=checkpoint:{multi_question_dir}{settings}")
    )
    with pytest.raises(
        ValueError,
        match="metric 'mq': a multi-question checkpoint is evaluated "
        "as metrics named after its questions",
    ):
        other.score_benchmark(bench)
