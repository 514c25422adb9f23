"""What predictions read, built from a fitted model's state: one record for
``KernelKMeans.predict``/``transform`` and for ``kkmeans predict`` on a model file, which
never builds the estimator (so it imports no scikit-learn).

:func:`predictor` turns the fitted arrays into the record of the model's kind: an
``ExactModel`` (``kernels/predict.py``: kernel rows against the training points) or a
``NystroemModel`` (``kernels/nystroem.py``: the features of the landmarks' map);
:func:`nearest` labels new points with either.
"""
import numpy as np

from ..kernels.functions import resolve_dtype
from ..kernels.graph_fit import GraphModel, labels_and_distances
from ..kernels.nystroem import NystroemModel
from ..kernels.nystroem import nearest as nystroem_nearest
from ..kernels.predict import ExactModel
from ..kernels.predict import nearest as exact_nearest


def predictor(params, *, kernel, labels, sample_weight, inner_sums, cluster_weights,
              n_features, X_fit=None, psd=None, ncut=None, nystroem=None, graph=None):
    """The record predictions read, from the estimator's ``params`` (``approx``,
    ``objective``, ``dtype``) and the fitted arrays; ``ncut``, ``nystroem`` and ``graph``
    are the fit's ``NcutState``, ``NystroemState`` and ``GraphState``
    (``engine/records.py``) when it has them. A graph fit's record is its ``GraphModel``
    (``kernels/graph_fit.py``), or None for an affinity given as is (no coordinates)."""
    if graph is not None:
        return graph.model
    if params["approx"] == "nystroem":
        return NystroemModel(kernel=kernel, landmarks=nystroem.landmarks,
                             transform=nystroem.transform, centers=nystroem.centers,
                             cluster_weights=cluster_weights, inner_sums=inner_sums,
                             dtype=nystroem.dtype, n_features=n_features,
                             n_train=len(labels), total_weight=float(np.sum(sample_weight)))
    return ExactModel(kernel=kernel, X_fit=X_fit, labels=np.asarray(labels).astype(np.int32),
                      sample_weight=sample_weight, inner_sums=inner_sums,
                      cluster_weights=cluster_weights, n_features=n_features,
                      dtype=resolve_dtype(params["dtype"]), psd=psd,
                      ncut=ncut if params["objective"] == "ncut" else None)


def predictor_of(result, params):
    """:func:`predictor` of a ``FitResult`` (e.g. a model file's)."""
    return predictor(params, kernel=result.kernel, labels=result.labels,
                     sample_weight=result.sample_weight, inner_sums=result.inner_sums,
                     cluster_weights=result.cluster_weights, n_features=result.n_features,
                     X_fit=result.X_fit, psd=result.psd, ncut=result.ncut,
                     nystroem=result.nystroem, graph=result.graph)


def no_graph_coordinates():
    """Why a model fitted on a given affinity graph labels no new points."""
    return ("this model was fitted on an affinity graph given as is (a sparse precomputed "
            "matrix): it has no coordinates to place new points in the graph; fit the points "
            "with kernel='knn' to predict new ones")


def nearest(model, X, kernel_diag=None, want_distances=False, n_threads=1):
    """Labels (intp) of the nearest centre of each row of X and, when ``want_distances``,
    the squared feature-space distances to every centre (else None). A graph model places a
    new point by its affinity row to the training nodes, or by the Gaussian mixture whose
    labels its fit kept, its "distances" then the mixture's costs (``kernels/graph_fit.py``,
    ``labels_and_distances``)."""
    if model is None:
        raise ValueError(no_graph_coordinates())
    if isinstance(model, GraphModel):
        labels, dist = labels_and_distances(model, X, n_threads, want_distances)
        return labels.astype(np.intp), dist
    if isinstance(model, NystroemModel):
        return nystroem_nearest(model, X, want_distances, n_threads)
    return exact_nearest(model, X, kernel_diag, want_distances, n_threads)

