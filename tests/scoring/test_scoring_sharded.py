"""Model-parallel scoring on 8 CPU devices: the trainer's `data` x `model` mesh.

With model=2 and model=4 the parameters are really split (each device holds
1/M of every 'model'-sharded kernel), they are loaded straight into those
shards (bit for bit what a host load gives), and the scores equal those of
one device; the CLI's `--mesh` does the same. JAX reads the forced device
count once, so all of it runs in one subprocess.
"""

import json
import os
import subprocess
import sys

import pytest

from fixtures import scoring_reference as ref

SCRIPT = r"""
import json, os, sys
import jax
import numpy as np
from jax.sharding import PartitionSpec as P
from seahorse_metrics import Scorer
from seahorse_metrics.checkpoints import load_checkpoint
from seahorse_metrics.checkpoints.params import flatten
from seahorse_metrics.cli import main as cli_main
from seahorse_metrics.model.partitioning import mesh_from_spec

path, pairs_file, out_dir = sys.argv[1:4]
with open(pairs_file) as f:
    premises, hypotheses = json.load(f)
assert jax.device_count() == 8
options = dict(bucket_lengths=(64, 128), window_size=24, max_input_length=128,
               compiler_options={"xla_backend_optimization_level": 0})
result = {}
_, host = load_checkpoint(path)
host = flatten(host)
for spec in ("data=1,model=1", "data=4,model=2", "data=2,model=4"):
    mesh = mesh_from_spec(spec)
    model_axis = mesh.shape["model"]
    scorer = Scorer.load(path, mesh=mesh, **options)
    params = flatten(scorer.params)
    head = params["decoder/logits_dense/kernel"]
    assert head.sharding.spec == P(None, "model"), head.sharding.spec
    assert {tuple(s.data.shape) for s in head.addressable_shards} == {(32, 512 // model_axis)}
    wi = params["encoder/layers_0/mlp/wi_0/kernel"]
    assert {tuple(s.data.shape) for s in wi.addressable_shards} == {(32, 64 // model_axis)}
    per_device = sum(s.data.nbytes for a in params.values() for s in a.addressable_shards
                     if s.device == jax.devices()[0])
    for name, array in params.items():  # the load put exactly the file's values in place
        assert np.asarray(array).tobytes() == host[name].tobytes(), name
    rows = scorer.multi.batching(8).shapes()
    assert all(r % mesh.shape["data"] == 0 for r, _ in rows), rows
    result[spec] = {"scores": [float(s) for s in scorer.score(premises, hypotheses, batch_size=8)],
                    "per_device_bytes": per_device}
bf16 = Scorer.load(path, mesh=mesh_from_spec("data=2,model=4"), dtype="bfloat16", **options)
assert flatten(bf16.params)["decoder/logits_dense/kernel"].dtype == jax.numpy.bfloat16
result["bf16"] = {"scores": [float(s) for s in bf16.score(premises, hypotheses, batch_size=8)]}
# Packed batches and int8 kernels on the mesh (the int8 values are split as the
# float32 kernels were).
packed = Scorer.load(path, mesh=mesh_from_spec("data=2,model=4"), packing=True, **options)
result["packed"] = {"scores": [float(s) for s in packed.score(premises, hypotheses, batch_size=8)]}
int8_one = Scorer.load(path, quantize="int8", **options)
int8_mesh = Scorer.load(path, mesh=mesh_from_spec("data=2,model=4"), quantize="int8", **options)
wi = flatten(int8_mesh.params)["encoder/layers_0/mlp/wi_0/kernel"]
assert wi.dtype == np.int8 and {tuple(s.data.shape) for s in wi.addressable_shards} == {(32, 16)}
result["int8"] = {"one": [float(s) for s in int8_one.score(premises, hypotheses, batch_size=8)],
                  "mesh": [float(s) for s in int8_mesh.score(premises, hypotheses, batch_size=8)]}
rows = [{"article": p, "summary": h} for p, h in zip(premises, hypotheses)]
with open(os.path.join(out_dir, "in.jsonl"), "w") as f:
    f.write("".join(json.dumps(r) + "\n" for r in rows))
status = cli_main(["score", "--checkpoint", path, "--input", os.path.join(out_dir, "in.jsonl"),
                   "--output", os.path.join(out_dir, "out.jsonl"), "--mesh", "model=4",
                   "--buckets", "64,128", "--max_input_length", "128", "--batch_size", "8",
                   "--no_progress", "--no_compilation_cache"])
assert status == 0
with open(os.path.join(out_dir, "out.jsonl.meta.json")) as f:
    meta = json.load(f)
result["cli"] = {"mesh": meta["settings"]["mesh"], "dtype": meta["settings"]["dtype"]}
with open(os.path.join(out_dir, "out.jsonl")) as f:
    result["cli"]["scores"] = [json.loads(line)["score"] for line in f]
print("RESULT " + json.dumps(result))
"""


@pytest.mark.slow
def test_model_parallel_scoring_equals_one_device(tmp_path, tiny_hf_dir):
    import numpy as np

    premises, hypotheses = ref.random_pairs(21, seed=3, max_words=30)
    pairs_file = tmp_path / "pairs.json"
    pairs_file.write_text(json.dumps([premises, hypotheses]))
    env = dict(
        os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=8"
    )
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, tiny_hf_dir, str(pairs_file), str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    line = [text for text in done.stdout.splitlines() if text.startswith("RESULT ")][-1]
    result = json.loads(line[len("RESULT ") :])
    one = np.asarray(result["data=1,model=1"]["scores"])
    assert one.shape == (21,) and np.all((one > 0) & (one < 1))
    for spec in ("data=4,model=2", "data=2,model=4"):
        np.testing.assert_allclose(result[spec]["scores"], one, rtol=2e-5, err_msg=spec)
    np.testing.assert_allclose(result["cli"]["scores"], one, rtol=2e-5)
    assert result["cli"]["mesh"] == {"data": 2, "model": 4} and result["cli"]["dtype"] == "float32"
    # The parameters really are split: a device holds about 1/M of them.
    full = result["data=1,model=1"]["per_device_bytes"]
    assert result["data=4,model=2"]["per_device_bytes"] < 0.6 * full
    assert result["data=2,model=4"]["per_device_bytes"] < 0.35 * full
    # bfloat16 weights, sharded: close to float32 (tiny random model, P ~ 1e-3).
    np.testing.assert_allclose(result["bf16"]["scores"], one, rtol=0.1)
    np.testing.assert_allclose(result["packed"]["scores"], one, rtol=2e-5)
    np.testing.assert_allclose(result["int8"]["mesh"], result["int8"]["one"], rtol=1e-3)
    np.testing.assert_allclose(result["int8"]["one"], one, rtol=0.1)
