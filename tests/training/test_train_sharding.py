"""The same run on 1 device, a 2x4 and an 8x1 (data x model) mesh gives the same loss."""

from __future__ import annotations

import pytest

from fixtures import train_utils


@pytest.mark.slow
def test_meshes_give_the_loss_of_one_device(train_sample, tmp_path):
    # This (pytest) process has one CPU device; the child has eight.
    single = train_utils.mesh_losses(str(tmp_path / "one"), 1, train_sample)
    meshes = train_utils.run_mesh_losses(str(tmp_path / "eight"), 8, [4, 1], train_sample)
    assert sorted(single) == [1, 2, 3, 4]
    for model_parallel, losses in meshes.items():  # 4: a 2x4 mesh, 1: an 8x1 mesh
        for step, loss in single.items():
            assert losses[step] == pytest.approx(loss, rel=1e-5, abs=1e-5), (model_parallel, step)
    # The parameters changed between steps, so the comparison covers updates too.
    assert single[4] != single[1]
