"""seahorse-metrics: learnt, reference-free summarization metrics on JAX."""
import setuptools

INSTALL_REQUIRES = [
    "absl-py",
    "flax>=0.10",
    "gin-config>=0.5",
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

EXTRAS_REQUIRE = {
    # The Hugging Face PyTorch MT5 is the independent reference the tests
    # compare against. transformers 5.x forces tied embeddings on MT5 configs,
    # so it is not a faithful reference: stay on 4.x. torch 2.13.0 is the CPU
    # build this project tests with.
    "test": [
        "pytest",
        "pytest-timeout",
        "torch==2.13.0",
        "transformers>=4.44,<5",
        "openpyxl",
    ],
    # bench/score.py's peers: Hugging Face PyTorch (as in "test") and
    # CTranslate2's CPU wheels (converted from the same weights, float32 and int8).
    "bench": [
        "ctranslate2",
        "torch==2.13.0",
        "transformers>=4.44,<5",
    ],
    "xlsx": ["openpyxl"],
    "hf": ["datasets"],
}

setuptools.setup(
    name="seahorse-metrics",
    version="0.1.0",
    description="Learnt, reference-free summarization metrics (SEAHORSE) on JAX.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=setuptools.find_packages(include=["seahorse_metrics", "seahorse_metrics.*"])
    + ["seahorse_metrics.tasks"],
    package_dir={"seahorse_metrics.tasks": "tasks"},
    include_package_data=True,
    package_data={"seahorse_metrics": ["data/sample/**/*", "data/sample/*", "data/backbone/*", "assets/*"]},
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS_REQUIRE,
    entry_points={"console_scripts": ["seahorse-metrics=seahorse_metrics.cli:main"]},
)
