"""Data-parallel scoring over several devices keeps input order.

Other metric tools return scores shuffled across GPUs; here the batch is
split over the mesh's `data` axis and gathered back in row order. JAX reads
the forced device count once, so the run happens in a subprocess.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from seahorse_metrics.data.vocab import SentencePieceTokenizer

from fixtures import scoring_reference as ref

SCRIPT = """
import json, sys
import jax
from seahorse_metrics import Scorer
path, pairs_file = sys.argv[1], sys.argv[2]
with open(pairs_file) as f:
    premises, hypotheses = json.load(f)
scorer = Scorer.load(path, bucket_lengths=(48, 64, 128), window_size=9,
                     compiler_options={"xla_backend_optimization_level": 0})
scores = scorer.score(premises, hypotheses, batch_size=6)
print(json.dumps({"devices": jax.device_count(),
                  "data_parallel": scorer.metadata()["batching"]["data_parallel"],
                  "shapes": scorer.multi.batching(6).shapes(),
                  "scores": [float(s) for s in scores]}))
"""


@pytest.mark.slow
def test_scores_come_back_in_input_order_on_four_devices(
    tmp_path, tiny_hf_dir, tiny_hf_model, tiny_vocab_path
):
    premises, hypotheses = ref.random_pairs(23, seed=1, max_words=20)
    pairs_file = tmp_path / "pairs.json"
    pairs_file.write_text(json.dumps([premises, hypotheses]))
    env = dict(
        os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=4"
    )
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, tiny_hf_dir, str(pairs_file)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["devices"] == 4 and result["data_parallel"] == 4
    assert all(rows % 4 == 0 for rows, _ in result["shapes"])
    expected = ref.hf_scores(
        tiny_hf_model,
        SentencePieceTokenizer(tiny_vocab_path),
        tiny_vocab_path,
        premises,
        hypotheses,
    )
    np.testing.assert_allclose(result["scores"], expected, rtol=1e-5, atol=1e-8)
