"""Model calls other than JAX behind the one scoring core.

The scorer's core (buckets, windows, chunks, sentences, questions, output
files, Beam) asks a model call for log P("1") and log P("0") at the first
decoder step of a padded token batch. `scoring.runner.ModelRunner` is that
call on JAX (any mesh, dtype, int8, packing); `engines.ctranslate2` is the
same call on CTranslate2 (CPUs, float32 or int8 GEMMs), converted once per
checkpoint and compute type.
"""
ENGINES = ("jax", "ctranslate2")
