"""Data: readers of the rated benchmarks, article sources, model inputs, vocabularies.

* `records`: `RatedPair`, the record every reader returns.
* `seahorse`: the SEAHORSE release TSVs and the prepared JSONL splits.
* `articles`, `prepare`: joining the release with its GEM articles.
* `mface`, `true`, `ratings`: mFACE, TRUE and generic rated files.
* `tables`: reading JSONL/JSON/CSV/TSV tables with every line accounted for
  (quoting, encodings, bad rows with their lines); every reader uses it.
* `delimited`: the CSV/TSV record grammar `tables` reads with (RFC 4180
  quoting, telling a quoted TSV) and that score files are written in.
* `factcheck`: the LLM-AggreFact and SummaC layouts.
* `inputs`: `premise: ... hypothesis: ...` inputs (with `question: ...` for
  query-focused summaries) and their truncation.
* `vocab`: SentencePiece tokenizer and seqio vocabulary.

None of these modules imports TensorFlow; the seqio tasks live in
`seahorse_metrics.tasks`.
"""

from seahorse_metrics.data.records import QUESTION_NAMES, QUESTIONS, RatedPair

__all__ = ["QUESTION_NAMES", "QUESTIONS", "RatedPair"]
