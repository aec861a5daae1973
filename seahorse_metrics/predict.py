"""The public face of scoring: `Scorer` and `MultiScorer`.

    from seahorse_metrics import Scorer              # or: from seahorse_metrics.predict import Scorer
    scorer = Scorer.load("path/to/checkpoint")       # ours, Hugging Face or T5X
    probs = scorer.score(articles, summaries)        # float32 numpy array, input order

Both live in `seahorse_metrics.scoring.scorer` with the machinery they use;
this module keeps the documented import path.
"""
from seahorse_metrics.scoring.scorer import MultiScorer, ScoreOutput, Scorer, find_vocabulary

__all__ = ["MultiScorer", "ScoreOutput", "Scorer", "find_vocabulary"]
