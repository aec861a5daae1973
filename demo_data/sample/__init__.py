"""Generates the bundled SYNTHETIC sample in `seahorse_metrics/data/sample/`.

The sample mimics the file formats of the SEAHORSE release (three TSVs plus an
articles JSONL), of the mFACE spreadsheet, of the TRUE CSVs and of a
continuous-ratings JSONL, so that readers, tasks, the trainer, the scorer and
the meta-evaluation can be exercised end to end without any download. Nothing
in it is real data: articles are template news in de, en, es, ru, tr, vi (plus
fr and pt for mFACE) about invented people and companies in real cities.

Every "No" rating is caused by one specific corruption of an otherwise good
summary (see `corruptions.make_summary` and the sample README), so each question carries a
real, learnable signal:

  Q1 comprehensible  letters or words scrambled, text cut off mid-word, or
                     words of other languages mixed in
  Q2 repetition      a repeated sentence or a phrase repeated in place
  Q3 grammar         broken agreement (gender, number, case, vowel harmony)
                     or two swapped adjacent words
  Q4 attribution     a name, number, place or company absent from the article
  Q5 main ideas      the summary restates a later sentence, not the lead
  Q6 conciseness     filler clauses, filler sentences or an extra minor fact

Usage:
  python -m demo_data.sample [--seed 0] [--output_dir DIR]

The output is a pure function of the seed and the size flags: re-running
reproduces byte-identical files. Each file is written atomically.

Modules, from words to files: `languages` (one pack of names, places and
templates per language), `facts` and `morphology`, `templates` (rendering),
`articles`, `corruptions` (summaries and what makes them fail a question),
`systems` (how often each system fails), then one module per format
(`seahorse`, `mface`, `true`, `ratings`, `corpus`), `writers` and `build`
(every file from the seed, and the command line).
"""
