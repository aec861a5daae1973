"""seahorse-metrics: learnt, reference-free summarization metrics on JAX."""

import setuptools

INSTALL_REQUIRES = [
    "absl-py",
    "flax>=0.10",
    "gin-config>=0.5",
    # Hub ids as checkpoints (seahorse_metrics.checkpoints.hub); 0.23 has huggingface_hub.errors.
    "huggingface_hub>=0.23",
    "jax>=0.4.35",
    "matplotlib",
    "numpy",
    "optax",
    "orbax-checkpoint",
    "rouge-score",
    "safetensors",
    "scikit-learn",
    "scipy",
    "sentencepiece",
    "seqio",
    "tensorboardX",
    "tqdm",
]

# Scoring on Apache Beam (`seahorse-metrics score --runner ...`). apache-beam
# needs protobuf<7, and sentencepiece 0.2.3 ships code generated for protobuf 7
# that refuses to import under protobuf 6 (seqio and our vocabularies import
# it): with Beam installed, sentencepiece stays below 0.2.3 (the sample
# vocabulary is trained with 0.2.2, see demo_data/vocab.py). 2.77 is the
# oldest Beam tested (its numpy<2.5 admits the numpy 2 this project runs).
BEAM = ["apache-beam>=2.77", "sentencepiece<0.2.3"]

# `seahorse-metrics serve`: an ASGI app (Starlette) on uvicorn, Prometheus text.
SERVE = ["starlette", "uvicorn", "prometheus_client"]

# The documentation site (mkdocs.yml): MkDocs with the Material theme, the API
# pages from the docstrings by mkdocstrings' Python handler.
DOCS = ["mkdocs>=1.6", "mkdocs-material>=9.5", "mkdocstrings[python]>=0.26", "pyyaml"]

# tests/test_lint.py runs ruff (pyproject.toml). Its formatter's style changes
# between minor releases, so the check is pinned to one.
LINT = ["ruff~=0.17.0"]

EXTRAS_REQUIRE = {
    # The Hugging Face PyTorch MT5 is the independent reference the tests
    # compare against. transformers 5.x forces tied embeddings on MT5 configs,
    # so it is not a faithful reference: stay on 4.x. torch 2.13.0 is the CPU
    # build this project tests with.
    "test": [
        "pytest",
        "pytest-timeout",
        # `make test` runs the suite on two workers (one per core of CI's 2).
        "pytest-xdist",
        "torch==2.13.0",
        "transformers>=4.44,<5",
        "openpyxl",
        # The report browser test drives Debian's chromium through its
        # chromedriver (.ci/run installs both); no browser is downloaded.
        "selenium",
        # LLM-AggreFact's hub files are Parquet.
        "pyarrow",
        # Property-based tests of the table readers (tests/data/test_data_tables.py).
        "hypothesis",
        # A CommonMark renderer shows report.md passes no raw HTML on (test_report.py).
        "markdown-it-py",
        # The ctranslate2 scoring engine (tests/engines/test_engine_ctranslate2.py).
        "ctranslate2",
    ]
    + BEAM
    + SERVE
    + DOCS
    + LINT,
    "beam": BEAM,
    "docs": DOCS,
    "serve": SERVE,
    # bench/score.py's peers: Hugging Face PyTorch (as in "test") and
    # CTranslate2's CPU wheels (converted from the same weights, float32 and int8).
    "bench": [
        "ctranslate2",
        "torch==2.13.0",
        "transformers>=4.44,<5",
    ],
    # The ctranslate2 scoring engine (`score --engine ctranslate2`): CTranslate2's
    # CPU wheels, and the transformers + torch its converter loads the
    # checkpoint with (once per checkpoint and compute type).
    "cpu": ["ctranslate2", "torch==2.13.0", "transformers>=4.44,<5"],
    "xlsx": ["openpyxl"],
    "hf": ["datasets"],
    "parquet": ["pyarrow"],
}

setuptools.setup(
    name="seahorse-metrics",
    version="0.1.0",
    description="Learnt, reference-free summarization metrics (SEAHORSE) on JAX.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    # The JAX (0.7 and later), numpy (2.3), scipy (1.16) and matplotlib (3.11) this project
    # runs have no wheels for 3.10: pip would fall back to JAX <= 0.6 there, which nothing
    # tests. tests/test_wheel.py installs the wheel into 3.11 and 3.13.
    python_requires=">=3.11",
    # gin/ and tasks/ stay at the top of the repository; the wheel carries them
    # as seahorse_metrics/gin (found by name: `--gin_file=runs/demo.gin`,
    # training/config.py) and seahorse_metrics.tasks.
    packages=setuptools.find_packages(include=["seahorse_metrics", "seahorse_metrics.*"])
    + ["seahorse_metrics.tasks", "seahorse_metrics.gin"],
    package_dir={"seahorse_metrics.tasks": "tasks", "seahorse_metrics.gin": "gin"},
    include_package_data=True,
    package_data={
        "seahorse_metrics": ["data/sample/**/*", "data/sample/*", "data/backbone/*", "assets/*"],
        "seahorse_metrics.gin": ["*/*.gin"],
    },
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS_REQUIRE,
    entry_points={"console_scripts": ["seahorse-metrics=seahorse_metrics.cli:main"]},
)
