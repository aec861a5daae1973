"""The float32 side of the int8 self-check, in its own process.

    python -m seahorse_metrics.scoring.int8_reference \\
        CHECKPOINT VOCAB OPTIONS_JSON TOKENS.npy OUT.npy

Loads CHECKPOINT in float32 (`MultiScorer.load` with the JSON keyword
arguments: the engine, its options, the question template), scores the
probe's padded token batch and writes log P("1") of each row to OUT.npy.
`scoring.int8_check.reference_in_child` runs it, so that the float32
weights live and die in this process.
"""

from __future__ import annotations

import json
import sys
from typing import Optional, Sequence

import numpy as np

from seahorse_metrics.scoring.int8_check import first_step_log_p1
from seahorse_metrics.scoring.scorer import MultiScorer


def main(argv: Optional[Sequence[str]] = None) -> int:
    checkpoint, vocab, options, source, target = argv if argv is not None else sys.argv[1:]
    scorer = MultiScorer.load(
        {"float32": checkpoint}, vocab=vocab, int8_check=False, **json.loads(options)
    )
    np.save(target, first_step_log_p1(scorer.engines[0], np.load(source)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
