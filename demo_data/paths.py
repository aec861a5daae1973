"""Where the demo's data lives in the repository."""

import os

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE_DIR = os.path.join(REPO_ROOT, "seahorse_metrics", "data", "sample")
BACKBONE_DIR = os.path.join(REPO_ROOT, "seahorse_metrics", "data", "backbone")
