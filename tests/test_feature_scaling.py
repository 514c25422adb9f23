"""Feature scaling, the --scale option (``kkmeans_cli.io.scaling``)."""
import numpy as np
import pytest

from kkmeans_cli.io.scaling import fit_scaler

X = np.array([[1.0, 5.0, 2.0], [3.0, 5.0, 4.0], [5.0, 5.0, 9.0]])


def test_standard():
    scaler = fit_scaler(X, "standard")
    Z = scaler.transform(X)
    assert np.allclose(Z[:, [0, 2]].mean(axis=0), 0)
    assert np.allclose(Z[:, [0, 2]].std(axis=0), 1)
    assert np.array_equal(Z[:, 1], [0, 0, 0])  # constant column: no division by zero
    assert np.allclose(scaler.offset, [3, 5, 5]) and scaler.factor[1] == 1.0


def test_minmax():
    scaler = fit_scaler(X, "minmax")
    Z = scaler.transform(X)
    assert np.allclose(Z[:, 0], [0, 0.5, 1]) and np.allclose(Z[:, 2], [0, 2 / 7, 1])
    assert np.array_equal(Z[:, 1], [0, 0, 0])
    assert np.allclose(scaler.transform(np.array([[7.0, 6.0, 16.0]])), [[1.5, 1, 2]])


def test_none_and_unknown():
    scaler = fit_scaler(X, "none")
    assert scaler.transform(X) is X and scaler.offset is None
    with pytest.raises(ValueError, match="scale must be one of none, standard, minmax"):
        fit_scaler(X, "robust")
