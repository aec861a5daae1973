"""Scoring: `Scorer` and `MultiScorer` (`scorer`) and the machinery they use.

`seahorse_metrics.predict` and the package root are their public face.

* `scorer`: `MultiScorer` (several metrics, one tokenisation) and `Scorer`
  (one metric): loading, settings, `score`, `score_records`.
* `units`: from a (premise, hypothesis) pair to encoder inputs: truncation
  (via `seahorse_metrics.data.inputs`), premise chunks, summary sentences.
* `batching`: length buckets and the deterministic batch plan of a window.
* `runner`: one model's compiled first-step scorer on a device mesh.
* `pipeline`: windows of examples -> batches -> scores, aggregated per example.
* `files`: the resumable JSONL/CSV/TSV scoring behind `seahorse-metrics score`.
* `beam`: the same scoring as an Apache Beam pipeline (`score --runner ...`),
  on RunInference; needs the `beam` extra.

Nothing here imports TensorFlow.
"""
