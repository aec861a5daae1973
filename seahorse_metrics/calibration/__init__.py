"""Calibration: maps from scores to probabilities, decision thresholds, how calibrated scores are.

* `maps`: temperature, Platt and isotonic maps, their file
  (`calibration.json`), and `calibrated_fields`, the one place every runner
  applies them (`score`, Beam, `serve`, `Scorer`).
* `fitting`: fitting a map on a labelled dev benchmark (`evaluate --calibrate_on`).
* `measures`: ECE over equal-mass bins (`ece_equal_mass`, with its
  interval), ECE over equal-width bins (`ece_equal_width`), Brier score,
  reliability data.
* `thresholds`: decision thresholds tuned on one benchmark and applied to
  another, their file, and the [0, 1] check of every threshold.

numpy, scipy and scikit-learn only; `scoring` and `evaluation` sit on it.
"""
