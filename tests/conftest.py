"""Fixtures shared by the test files (plain helpers are in helpers.py)."""
import pytest

from helpers import FAST, OLD, blobs, run, write_csv


@pytest.fixture
def fitted(tmp_path):
    """A folder holding good data (``data.csv``: 30 points in 3 blobs) and the model fitted to
    it (``model.npz``), nothing else."""
    X, _ = blobs(n=30, d=2, k=3)
    write_csv(tmp_path / "data.csv", X)
    result = run(["fit", "--kernel", "rbf", tmp_path / "data.csv", "-k", "3", "-o", tmp_path / "model.npz",
                  *FAST, "--quiet"])
    assert result.exit_code == 0, result.stderr
    return tmp_path


@pytest.fixture
def work(fitted):
    """``fitted`` plus the outputs a failing command must leave as they were: ``labels.txt``
    and ``out.npz``, each holding ``OLD``."""
    (fitted / "out.npz").write_bytes(OLD)
    (fitted / "labels.txt").write_bytes(OLD)
    return fitted
