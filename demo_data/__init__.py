"""The tooling that builds the demo's synthetic data; not part of the library.

`make demo` and the tests run on files this package made and the repository
ships in `seahorse_metrics/data/`: a SYNTHETIC sample in the formats of the
SEAHORSE release, mFACE, TRUE and a ratings file, its SentencePiece
vocabulary, and a tiny mT5-shaped backbone pretrained on its text without
labels. Rebuild them in this order, from the repository root:

    python -m demo_data.sample      # the sample's data files and stats.json
    python -m demo_data.vocab       # its spiece.model, trained on those files
    python -m demo_data.backbone    # the backbone (the commands of the shipped
                                    # one are in demo_data/backbone/__init__.py)

The package imports the library (`seahorse_metrics`); the library never
imports it, and `pip install` does not install it (setup.py names only
`seahorse_metrics`).
"""
