"""Feature scaling fitted on the training data, stored in the model and applied again by
``predict``: x' = (x − offset) / factor per column."""
from dataclasses import dataclass

import numpy as np

from .._options import SCALES as SCALE_METHODS


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
        """(X − offset) / factor, or X unchanged for ``'none'``."""
        if self.method == "none":
            return X
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
    if method == "standard":
        offset, factor = X.mean(axis=0), X.std(axis=0)
    else:
        offset = X.min(axis=0)
        factor = X.max(axis=0) - offset
    factor = np.where(factor > 0, factor, 1.0)
    return Scaler(method, offset, factor)
