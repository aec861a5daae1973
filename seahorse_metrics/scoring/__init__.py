"""Scoring: one core under every runner.

`Scorer` and `MultiScorer` are public at the package root (`from seahorse_metrics
import Scorer`); they are defined in `scorer`.

The core:
* `options`: `ScoringOptions` (how pairs are scored, serialisable) and the
  one table (`OPTION_FLAGS`) mapping each option to its command-line flag
  and `evaluate` checkpoint-spec key.
* `job`: a scoring job: `InputFields`, `ScoringJob`, its fingerprint
  (checkpoint content included), the one `meta.json` schema, the bad-row
  policy and `RowCounts`.
* `output`: output rows and their fields (`OutputFields`: scores,
  decisions, sentences, calibrated scores), `OutputWriter`.
* `rows`: input rows -> entries through a `MultiScorer`, cut into windows by
  the one windowing rule.

The machinery:
* `scorer`: `MultiScorer` (several metrics, one tokenisation) and `Scorer`
  (one metric); `loading`: checkpoints -> models on a mesh, or converted
  for CTranslate2; the model call is an engine (`seahorse_metrics.engines`);
  `score_output`: `ScoreOutput`, the in-memory results of `score_detailed`.
* `units`: from a (premise, hypothesis) pair to encoder inputs: truncation
  (via `seahorse_metrics.data.inputs`), premise chunks, summary sentences.
* `batching`: length buckets and the deterministic batch plan of a window.
* `window_scoring`: windows of examples -> batches -> scores, aggregated per example.
* `records`: checks of input records and pairs.

The runners:
* `files`: the resumable JSONL/CSV/TSV scoring behind `seahorse-metrics score`
  (lock, partial file, resume).
* `beam` (launch, metadata), `beam_transforms`, `shards` and `shard_merge`
  (a finished run's shards into one output): the same scoring as an Apache
  Beam pipeline (`score --runner ...`), on RunInference; need the `beam` extra.

Nothing here imports TensorFlow.
"""
