"""Pretrains the demo's tiny backbone on the sample's text, without labels.

The released SEAHORSE metrics are mT5 checkpoints fine-tuned on the ratings;
mT5 itself learnt the languages by span corruption on unlabelled web text.
The demo follows the same recipe at toy scale: this package trains a tiny
mT5-shaped model with T5's span-corruption objective on the text of the
bundled sample's *train* split only (articles and summaries, written as the
metric's inputs `premise: <article> hypothesis: <summary>`); no rating is
read. The result is written as a Hugging Face `MT5ForConditionalGeneration`
directory (`config.json`, `model.safetensors`, `spiece.model`) in
`seahorse_metrics/data/backbone/`, and `gin/runs/demo.gin` fine-tunes
from it, exactly as a real run fine-tunes from `google/mt5-large`.
Run it from the repository root as `python -m demo_data.backbone`.

Four encoder stages, each a per-piece head on the encoder's outputs that
is dropped afterwards, can come before the text objectives of the same run
(in this order):
* matching (`--matching_steps`, module `matching`): for every piece of
  a random sequence with many copied pieces, whether it occurs elsewhere. A
  tiny model does not learn to find equal pieces from text whose pairs
  differ by one piece, and every comparison below needs it;
* word noise (`--word_noise_steps`, module `word_noise`): which words
  of a train-split text were swapped with their neighbour or turned into
  another inflection, many per text;
* grammar (`--grammar_steps`, module `grammar`): on the sample's
  unlabelled corpus (`corpus/train.jsonl.gz`, 9,000 article-summary pairs
  that nobody rated, standing in for the summarisation datasets' train
  splits and the web text that taught mT5 the languages) and on the train
  split's pairs, which summary words make a word pair that the corpus never
  has, once a bigram generator has swapped words or put others in their
  place (ELECTRA with n-gram statistics in both roles), and whether the
  summary has any such word;
* alignment (`--alignment_steps`, module `alignment`): on the train
  split's pairs as they are (and `--alignment_corpus` of the time the
  corpus'), which summary pieces the article contains, and its lead; which
  article pieces the summary contains and which lie in the lead; which
  pieces repeat; which names and numbers the article lacks; and which words
  the word noise changed (with `--alignment_grammar`, the grammar stage's
  noise and verdicts). Shuffling the article's sentences
  (`--alignment_shuffle`) and giving the summary names and numbers of
  another summary (`--alignment_swap`) keep the encoder comparing rather
  than remembering the 3,600 pairs.
Every label comes from the text itself; no rating is read.

Measured on the demo (test split ROC-AUC, README), from the span-corruption
backbone (Q1-Q6 0.90 0.51 0.54 0.48 0.51 0.89): matching alone gives Q2
0.81 but costs Q1 (0.77); matching then word noise keeps Q1 and loses Q2
again (validation 0.95 and 0.60); the alignment stage after them gives
0.89 0.92 0.54 0.72 0.98 0.96 (210 fine-tuning steps each; without
shuffling and swapping, Q4 stays at 0.66). Grammar (Q3) is learnt by none
of them: word noise on the rated text, whose own ungrammatical summaries
count as good text there, reaches a per-piece ROC-AUC of only 0.68-0.78.
The grammar stage on the corpus, then alignment with the corpus' pairs and
the grammar verdicts, gives the shipped backbone: 0.93 0.89 0.90 0.89 0.97
0.97 (validation Q3 0.52 before it, 0.86 after the first grammar run, 0.90
after the second; Q4 0.79 at 630 steps before it, 0.87 at 210 after).

Then three label-free text objectives, all sequence-to-sequence on the same
inputs:
* span corruption as in T5: about 15% of the tokens, in spans of mean
  length 3, are replaced by sentinels (the highest ids of the embedding, as
  mT5's `extra_ids`), and the target spells out the dropped spans after
  their sentinels;
* grounded-token replacement (`--replace_rate`): some hypothesis tokens that
  the premise contains are replaced by such tokens of another pair, and the
  target is the original hypothesis (BART's token-replacement noise, aimed
  at the tokens a summary takes from its article, as FactCC's swaps are);
* noise detection (`--detect_rate`, module `noise_detection`): ELECTRA's
  replaced-token detection for the hypothesis, with generic noises
  (`--noise_kinds`: pieces from another pair, names and numbers swapped
  within the premise, repeated spans, swapped words, other inflections);
  the target lists the noisy pieces, so the first decoder step, the one a
  metric reads, must notice them, and `--rtd_weight` adds ELECTRA's
  per-piece discriminator on the encoder's outputs. `--noise_strength`
  starts the noise heavy and makes it lighter: a tiny model does not learn
  to compare pieces from one repeated or swapped piece, only from many.
The run is deterministic for a given seed on one machine.

The shipped backbone was made in six runs (about 40 + 14 + 14 + 9 + 28 +
16 minutes on 2 CPU cores; `pretraining.json` in the output records the
last, and under `init_record` the ones before it). They were run as
`python scripts/pretrain_backbone.py`, the same code before it moved to
this package; today they read:
  python -m demo_data.backbone --steps 1500 --output /tmp/backbone_span
  python -m demo_data.backbone --init /tmp/backbone_span --steps 600 \
      --replace_rate 0.5 --target_length 64 --learning_rate 2e-3 --output /tmp/backbone_text
  python -m demo_data.backbone --init /tmp/backbone_text --steps 0 \
      --matching_steps 700 --word_noise_steps 1500 --output /tmp/backbone_mw
  python -m demo_data.backbone --init /tmp/backbone_mw --steps 0 --input_length 96 \
      --alignment_steps 1500 --alignment_shuffle 0.5 --alignment_swap 0.3 \
      --output /tmp/backbone_align
  python -m demo_data.backbone --init /tmp/backbone_align --steps 0 --input_length 96 \
      --grammar_steps 4000 --alignment_steps 1500 --alignment_grammar --alignment_corpus 0.5 \
      --output /tmp/backbone_grammar
  python -m demo_data.backbone --init /tmp/backbone_grammar --steps 0 --input_length 96 \
      --grammar_steps 2500 --grammar_split 0.5 --alignment_steps 1000 --alignment_grammar \
      --alignment_corpus 0.5

Smoke run:
  python -m demo_data.backbone --steps 20 --output /tmp/backbone

Modules: `main` composes the run from `options` (the command line),
`config` (the shape), `texts` and `vocabulary` (the text as pieces and
tables over them), one module per encoder stage (`matching`, `word_noise`,
`grammar`, `alignment`) trained by `piece_stage`, the text objectives
(`text_objectives`, `noise_detection`, trained by `text_training`) and
`record` (`pretraining.json`).
"""
