"""The Dask route's entry points for ``KernelKMeans(cluster=...)`` or a Dask array as X
(``model/estimator.py`` imports this module only then, so Dask is imported only then). They
take the estimator's parameters and records, and return records: nothing here reads or
writes an estimator."""
import contextlib

import numpy as np

from ..progress import progress_adapter
from . import require_dask
from .cluster import open_client
from .fit import fit_on_cluster, predict_on_cluster
from .readers import open_data


@contextlib.contextmanager
def client_for(cluster):
    """A Client for ``cluster``: a ``Client`` as it is; ``'local[:N]'`` a LocalCluster on
    127.0.0.1 for the call; ``'tcp://…'`` or a scheduler file a connection; None the
    current default client of ``distributed`` (e.g. one made with ``Client(...)``)."""
    require_dask()
    if cluster is None:
        from distributed import get_client

        try:
            client = get_client()
        except ValueError:
            raise ValueError("a Dask array as X needs a Dask cluster: pass cluster=Client(...) "
                             "or cluster='local:N', or create a distributed.Client first") \
                from None
        yield client
        return
    if isinstance(cluster, str) and not cluster.startswith("local"):
        with open_client(scheduler=cluster) as client:
            yield client
        return
    with open_client(cluster) as client:
        yield client


def _chunked(client, X):
    if isinstance(X, str):
        return open_data(client, X)
    return X


def fit(X, sample_weight, params, rngs, progress=None):
    """A fit on a cluster: X a Dask array, a NumPy array (sent in chunks), a file path (read
    by the workers) or ``readers.ChunkedData``; ``params`` the estimator's validated
    parameters (``cluster`` among them), ``rngs`` its (gamma, fit) generators, ``progress``
    the fit's callback (``progress.py``). Returns the ``FitResult``."""
    if sample_weight is not None:
        raise ValueError("sample_weight is not supported on a Dask cluster yet")
    with client_for(params.get("cluster")) as client:
        return fit_on_cluster(_chunked(client, X), client, params, rngs,
                              progress=_progress(progress, params["max_iter"]))


def _progress(callback, max_iter):
    """The stages of a fit on a cluster told to ``callback`` (``progress.py``): the starts
    on the sample and every Lloyd pass on all data."""
    report = progress_adapter(callback, stages=True)
    if report is None:
        return None

    def progress(stage, **info):
        if stage == "iteration":
            report(info["iteration"], max_iter,
                   f"Lloyd on all data (completion {info['restart'] + 1}), objective "
                   f"{info['objective']:.6g}, moved {info['moved']:,}; iteration")
        elif stage == "start":
            report(info["done"], info["total"], "starts on the sample")
    return progress


def predict(model, X, cluster=None):
    """Labels of X (a Dask array or a file path) computed on the cluster, as an ndarray
    (``model``: the fitted ``kernels.nystroem.NystroemModel``)."""
    with client_for(cluster) as client:
        futures = predict_on_cluster(model, _chunked(client, X), client)
        return np.concatenate(client.gather(futures)).astype(np.intp)
