"""The estimator's hooks for the Dask route: ``KernelKMeans(cluster=...)`` or a Dask array
as X (``estimator.py`` calls these only then, so Dask is imported only then)."""
import contextlib

import numpy as np


def is_dask_array(X):
    """Whether X is a ``dask.array.Array`` (checked without importing Dask)."""
    return type(X).__module__.split(".")[0] == "dask" and hasattr(X, "to_delayed")


def wants_cluster(estimator, X):
    return getattr(estimator, "cluster", None) is not None or is_dask_array(X)


@contextlib.contextmanager
def client_for(cluster):
    """A Client for ``cluster``: a ``Client`` as it is; ``'local[:N]'`` a LocalCluster on
    127.0.0.1 for the call; ``'tcp://…'`` or a scheduler file a connection; None the
    current default client of ``distributed`` (e.g. one made with ``Client(...)``)."""
    from . import require_dask
    from .cluster import open_client

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
    from .readers import open_data

    if isinstance(X, str):
        return open_data(client, X)
    return X


def fit(estimator, X, sample_weight, rngs):
    """``KernelKMeans.fit`` on a cluster: X a Dask array, a NumPy array (sent in chunks), a
    file path (read by the workers) or ``readers.ChunkedData``; ``rngs`` the estimator's
    (gamma, fit) generators."""
    from .fit import fit_on_cluster

    if sample_weight is not None:
        raise ValueError("sample_weight is not supported on a Dask cluster yet")
    with client_for(getattr(estimator, "cluster", None)) as client:
        fit_on_cluster(estimator, _chunked(client, X), client, rngs,
                       progress=_progress(estimator))
    return estimator


def _progress(estimator):
    """The estimator's ``progress_callback(done, total, what)`` (three parameters) told of
    the starts on the sample and of every Lloyd pass on all data."""
    callback = getattr(estimator, "progress_callback", None)
    if callback is None:
        return None

    def progress(stage, **info):
        try:
            if stage == "iteration":
                callback(info["iteration"], estimator.max_iter,
                         f"Lloyd on all data (completion {info['restart'] + 1}), objective "
                         f"{info['objective']:.6g}, moved {info['moved']:,}; iteration")
            elif stage == "start":
                callback(info["done"], info["total"], "starts on the sample")
        except TypeError:   # a callback of (done, total): the feature rows only
            pass
    return progress


def predict(estimator, X):
    """Labels of X (a Dask array or a file path) computed on the cluster, as an ndarray."""
    from .fit import predict_on_cluster

    with client_for(getattr(estimator, "cluster", None)) as client:
        futures = predict_on_cluster(estimator, _chunked(client, X), client)
        return np.concatenate(client.gather(futures)).astype(np.intp)
