"""The public face of scoring: `Scorer` and `MultiScorer`.

    from seahorse_metrics import Scorer  # or: from seahorse_metrics.predict import Scorer
    scorer = Scorer.load("path/to/checkpoint")       # ours, Hugging Face or T5X
    probs = scorer.score(articles, summaries)        # float32 numpy array, input order

They live in `seahorse_metrics.scoring.scorer` (`MultiScorer`, with the
machinery it uses) and `seahorse_metrics.scoring.single` (`Scorer`); this
module keeps the documented import path.
"""

from seahorse_metrics.scoring.score_output import ScoreOutput
from seahorse_metrics.scoring.scorer import MultiScorer, find_vocabulary
from seahorse_metrics.scoring.single import Scorer

__all__ = ["MultiScorer", "ScoreOutput", "Scorer", "find_vocabulary"]
