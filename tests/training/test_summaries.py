"""The trainer's metrics writer: JSONL and TensorBoard events, without importing PyTorch."""

from __future__ import annotations

import glob
import json
import os
import struct

from fixtures import train_utils


def _event_scalars(directory: str) -> dict[tuple[int, str], float]:
    """{(step, tag): value} of the scalars in the TensorBoard event files of `directory`
    (TFRecord framing: length, its CRC, the Event proto, its CRC)."""
    from tensorboardX.proto import event_pb2

    scalars = {}
    for path in glob.glob(os.path.join(directory, "events.out.tfevents.*")):
        with open(path, "rb") as handle:
            data = handle.read()
        offset = 0
        while offset < len(data):
            (length,) = struct.unpack("<Q", data[offset : offset + 8])
            event = event_pb2.Event.FromString(data[offset + 12 : offset + 12 + length])
            offset += 12 + length + 4
            for value in event.summary.value:
                scalars[(event.step, value.tag)] = value.simple_value
    return scalars


def test_metrics_reach_both_logs_and_the_writer_leaves_pytorch_unimported(tmp_path):
    """tensorboardX imports PyTorch where it is installed (about a second of every `train`
    start); the writer hides it for that import, in a process that has not imported it."""
    script = (
        "import sys\n"
        "from seahorse_metrics.training.summaries import MetricsWriter\n"
        "writer = MetricsWriter(sys.argv[1])\n"
        "writer.write(3, 'train', {'loss': 0.25, 'examples_per_sec': 8.0})\n"
        "writer.write(3, 'validation', {'roc_auc': 0.75})\n"
        "writer.close()\n"
        "import torch\n"  # hidden for one import only: still importable afterwards
        "print('torch' in sys.modules, torch.ones(2).sum().item())\n"
    )
    done = train_utils.run_python(["-c", script, str(tmp_path)], train_utils.child_env())
    assert done.stdout.split() == ["True", "2.0"], done.stdout
    with open(tmp_path / "train_log.jsonl", encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle]
    assert [(r["step"], r["split"]) for r in records] == [(3, "train"), (3, "validation")]
    assert records[0]["loss"] == 0.25
    assert _event_scalars(str(tmp_path / "tensorboard")) == {
        (3, "train/loss"): 0.25,
        (3, "train/examples_per_sec"): 8.0,
        (3, "validation/roc_auc"): 0.75,
    }


def test_the_writer_imports_no_pytorch_in_a_fresh_process(tmp_path):
    script = (
        "import sys\n"
        "from seahorse_metrics.training.summaries import MetricsWriter\n"
        "MetricsWriter(sys.argv[1]).close()\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n"
    )
    done = train_utils.run_python(["-c", script, str(tmp_path)], train_utils.child_env())
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
