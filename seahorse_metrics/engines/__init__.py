"""Engines: the model call behind the one scoring core.

The scorer's core (buckets, windows, chunks, sentences, questions, output
files, Beam, the service) asks an engine for log P("1") and log P("0") at
the first decoder step of a padded token batch (`base.Engine`, with its
`Capabilities`):

* `jax_engine`: `JaxEngine`, the program of `model.first_step` compiled per
  batch shape on any mesh, dtype, int8, packing; training's validation
  scores with it too.
* `ctranslate2`: `CTranslate2Engine`, the same call on CTranslate2 (CPUs,
  float32 or int8 GEMMs), converted once per checkpoint and compute type
  (`conversion`; int8 smoothed first, `smoothing`; per-CPU int8 choices, `isa`).
* `choice`: the engines by name, their settings checked, engines for loaded models.
"""
