"""The machinery behind `seahorse_metrics.Scorer` (see `seahorse_metrics.predict`).

* `units`: from a (premise, hypothesis) pair to encoder inputs: truncation
  (via `seahorse_metrics.data.inputs`), premise chunks, summary sentences.
* `batching`: length buckets and the deterministic batch plan of a window.
* `runner`: one model's compiled first-step scorer on a device mesh.
* `pipeline`: windows of examples -> batches -> scores, aggregated per example.
* `files`: the resumable JSONL/CSV/TSV scoring behind `seahorse-metrics score`.

Nothing here imports TensorFlow.
"""
