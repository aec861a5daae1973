"""seahorse-metrics: learnt, reference-free summarization metrics on JAX.

Typical use::

    from seahorse_metrics import Scorer
    scorer = Scorer.load("path/to/checkpoint")
    probs = scorer.score(articles, summaries)

The public face: `Scorer` (one metric), `MultiScorer` (several, one
tokenisation), `RemoteScorer` (the same calls against `seahorse-metrics
serve`), and the `stats` package (statistics against human judgments).
"""

from typing import TYPE_CHECKING

__version__ = "0.1.0"

if TYPE_CHECKING:  # for type checkers and the API reference; at run time, `__getattr__`
    from seahorse_metrics.scoring.scorer import MultiScorer
    from seahorse_metrics.scoring.single import Scorer
    from seahorse_metrics.serving.client import RemoteScorer

_LAZY = {
    "Scorer": "seahorse_metrics.scoring.single",
    "MultiScorer": "seahorse_metrics.scoring.scorer",
    "RemoteScorer": "seahorse_metrics.serving.client",
}


def __getattr__(name):
    # Importing the package stays cheap: JAX and the model load on first use.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'seahorse_metrics' has no attribute {name!r}")


__all__ = ["MultiScorer", "RemoteScorer", "Scorer", "__version__"]
