"""Feature scaling fitted on the training data, stored in the model and applied again by
``predict``: x' = (x − offset) / factor per column."""
from dataclasses import dataclass

import numpy as np

from .._options import SCALES as SCALE_METHODS
from ..errors import DataError


@dataclass
class Scaler:
    """A fitted per-column affine scaling.

    Attributes
    ----------
    method : {'none', 'standard', 'minmax'}
    offset, factor : ndarray of float64, shape (n_features,) or None
        None for ``'none'``. ``factor`` is never 0: a constant column gets factor 1.
    """

    method: str
    offset: np.ndarray = None
    factor: np.ndarray = None

    def transform(self, X):
        """(X − offset) / factor, or X unchanged for ``'none'``. Values that overflow come out
        infinite, without a NumPy warning: the caller refuses them with their row and column
        (``functions.check_range`` / ``check_finite``)."""
        if self.method == "none":
            return X
        with np.errstate(over="ignore", invalid="ignore"):
            return np.ascontiguousarray((X - self.offset) / self.factor)


def fit_scaler(X, method):
    """Fit a scaling on X.

    ``standard``: offset = column mean, factor = column standard deviation (population);
    ``minmax``: offset = column minimum, factor = maximum − minimum, mapping to [0, 1].
    Columns whose factor would be 0 (constant columns) get factor 1, so they become 0.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    method : {'none', 'standard', 'minmax'}

    Returns
    -------
    Scaler
    """
    if method not in SCALE_METHODS:
        raise ValueError(f"scale must be one of {', '.join(SCALE_METHODS)}; got {method!r}")
    if method == "none":
        return Scaler("none")
    X = np.asarray(X, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        if method == "standard":
            s = np.abs(X).max(axis=0)
            if np.all((s == 0) | ((s > 1e-100) & (s < 1e100))):
                offset, factor = X.mean(axis=0), X.std(axis=0)
            else:
                # Moments of X / s, s the column's largest |x|: the squares can neither
                # overflow nor underflow (data near 1e±200 or 1e308 scale like any other).
                s = np.where(s > 0, s, 1.0)
                Xs = X / s
                offset, factor = Xs.mean(axis=0) * s, Xs.std(axis=0) * s
        else:
            offset = X.min(axis=0)
            factor = X.max(axis=0) - offset
    bad = ~(np.isfinite(offset) & np.isfinite(factor))
    if bad.any():
        c = int(np.flatnonzero(bad)[0])
        raise DataError(f"--scale {method}: column {c + 1} spans {X[:, c].min():g} to "
                        f"{X[:, c].max():g}, a range wider than floating point holds "
                        f"(1.8e308)")
    factor = np.where(factor > 0, factor, 1.0)
    return Scaler(method, offset, factor)
