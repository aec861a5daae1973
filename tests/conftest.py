"""Shared pytest setup.

Reusable builders of tiny artefacts (vocabulary, model, checkpoint, dataset)
live as modules in `tests/fixtures/`; fixtures here expose them to tests.
"""
import os
import sys

# Tests run on the CPU only, whatever the machine has.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

sys.path.insert(0, os.path.dirname(__file__))
