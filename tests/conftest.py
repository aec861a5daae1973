"""Shared pytest setup.

Reusable builders of tiny artefacts (vocabulary, model, checkpoint, dataset)
live as modules in `tests/fixtures/`; fixtures here expose them to tests.
"""

import importlib.util
import os
import sys

# Tests run on the CPU only, whatever the machine has.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
# The int8 self-check scores a float32 twin in a child process on every new
# checkpoint; its own tests (test_int8_check.py) turn it back on.
os.environ.setdefault("SEAHORSE_METRICS_INT8_CHECK", "off")

sys.path.insert(0, os.path.dirname(__file__))

# PyPI's Linux torch brings triton, whose extension crashes the process (SIGSEGV) when it loads
# after TensorFlow (TensorFlow 2.21, triton 3.7.1): the reference models (transformers) load it
# through torch._dynamo, after seqio has loaded TensorFlow. Loaded first (0.2 s), it is fine.
# The CPU torch this project tests with has no triton.
if importlib.util.find_spec("triton") is not None:
    import triton  # noqa: F401

# Tiny programs compile the quick way (fixtures/compile_speed.py).
from fixtures.compile_speed import compile_fast  # noqa: E402

compile_fast()

# Under CT2_FORCE_CPU_ISA (the suite run as an AVX2 host), cap oneDNN and MKL
# now, before JAX starts: XLA:CPU uses oneDNN too, so this process and the
# child processes tests start must compute under the same cap (tests compare
# their parameters bit for bit).
from seahorse_metrics.engines import isa as _isa  # noqa: E402

_isa.apply_ctranslate2_cap()


def pytest_configure(config):
    # The score and train commands keep compiled programs under the user's
    # cache directory; tests (and their child processes) share one of their own.
    import tempfile

    if "SEAHORSE_METRICS_COMPILATION_CACHE" not in os.environ:
        config._seahorse_jax_cache = tempfile.mkdtemp(prefix="seahorse-metrics-jax-cache-")
        os.environ["SEAHORSE_METRICS_COMPILATION_CACHE"] = config._seahorse_jax_cache
    # The test processes share it too: a program compiled by one test (or worker) is read
    # back by the next that builds the same one, as the commands' child processes do.
    from seahorse_metrics import compilation_cache

    compilation_cache.enable()


# The longest files first, as measured (quiet 2-core host, 2026-11-28, 550 s in all):
# `--dist loadfile --no-loadscope-reorder` hands files out in this order (xdist's own reorder
# would sort them by their number of tests), so the last files handed out are short and
# neither worker idles long at the end while the other finishes.
LONGEST_FIRST = (
    "test_readme.py",
    "test_accelerator_run.py",
    "test_train_scale.py",
    "test_scoring_beam.py",
    "test_launch.py",
    "test_demo.py",
    "test_quantize.py",
    "test_int8_check.py",
    "test_wheel.py",
    # Compiles for GPUs and TPUs (about 50 s), after installing their compilers on a first run.
    "test_compile_only.py",
    "test_score_cli.py",
    "test_attention.py",
    "test_train_sharding.py",
    "test_pretrain_backbone.py",
    "test_smoothing.py",
    "test_relative_bias_per_layer.py",
    "test_train_resume.py",
)


def pytest_collection_modifyitems(session, config, items):
    def rank(item):
        name = os.path.basename(str(item.fspath))
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: each file keeps its own order


def pytest_unconfigure(config):
    import shutil

    directory = getattr(config, "_seahorse_jax_cache", None)
    if directory:
        shutil.rmtree(directory, ignore_errors=True)


# --- tiny model artefacts (builders in tests/fixtures/tiny_model.py) ---------
import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_vocab_path(tmp_path_factory):
    """A tiny SentencePiece model (pad 0, eos 1, unk 2, no bos; "▁1", "▁0" pieces)."""
    from fixtures.tiny_model import train_tiny_vocab

    return train_tiny_vocab(str(tmp_path_factory.mktemp("vocab")))


@pytest.fixture(scope="session")
def tiny_hf_model():
    """A random HF MT5ForConditionalGeneration of the `tiny` preset, eval mode."""
    from fixtures.tiny_model import build_hf_model

    return build_hf_model()


@pytest.fixture(scope="session")
def tiny_hf_dir(tmp_path_factory, tiny_hf_model, tiny_vocab_path):
    """`tiny_hf_model` saved as an HF directory (model.safetensors + spiece.model)."""
    from fixtures.tiny_model import save_hf_model

    return save_hf_model(
        tiny_hf_model, str(tmp_path_factory.mktemp("tiny_hf")), vocab_path=tiny_vocab_path
    )


@pytest.fixture(scope="session")
def tiny_umt5_model():
    """A random HF UMT5ForConditionalGeneration of the `tiny` preset (a
    relative position bias table in every layer, each its own), eval mode."""
    from fixtures.tiny_model import build_hf_model

    return build_hf_model(model_type="umt5")


@pytest.fixture(scope="session")
def tiny_umt5_dir(tmp_path_factory, tiny_umt5_model, tiny_vocab_path):
    """`tiny_umt5_model` saved as an HF directory (model.safetensors + spiece.model)."""
    from fixtures.tiny_model import save_hf_model

    return save_hf_model(
        tiny_umt5_model, str(tmp_path_factory.mktemp("tiny_umt5")), vocab_path=tiny_vocab_path
    )


@pytest.fixture(scope="session")
def train_sample(tmp_path_factory):
    """The bundled sample prepared, its Q4 splits cached for tiny trainer runs,
    and a compilation cache shared by the trainer tests' child processes
    (see tests/fixtures/train_utils.py)."""
    from fixtures import train_utils

    return train_utils.cache_sample(str(tmp_path_factory.mktemp("train_sample")))


@pytest.fixture(scope="session")
def multi_question_dir(tmp_path_factory, tiny_hf_dir):
    """`tiny_hf_dir` with a questions.json beside it: a multi-question metric."""
    from fixtures.multi_question import build_multi_question_dir

    return build_multi_question_dir(tmp_path_factory, tiny_hf_dir)
