"""The suite's quick-compile flags (fixtures/compile_speed.py) suit the jaxlib installed."""

import os
import subprocess
import sys

from fixtures.compile_speed import EMITTERS_FLAG, FAST_FLAGS, LEVEL_FLAG, fast_flags


def test_the_emitters_flag_is_given_only_to_jaxlibs_that_have_it():
    assert fast_flags("0.10.2") == FAST_FLAGS
    # From 0.11 on an unknown flag in XLA_FLAGS aborts every process.
    assert fast_flags("0.11.2") == fast_flags("0.12.0.1") == (LEVEL_FLAG,)
    assert EMITTERS_FLAG not in fast_flags("1.0.0")


def test_a_child_starts_xla_under_the_suites_flags():
    assert LEVEL_FLAG in os.environ["XLA_FLAGS"]  # conftest set them
    done = subprocess.run(
        [sys.executable, "-c", "import jax; print(jax.numpy.ones(2).sum())"],
        env=dict(os.environ, JAX_PLATFORMS="cpu"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == "2.0", done.stderr[-2000:]
