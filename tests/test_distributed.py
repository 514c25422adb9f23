"""The Dask route (``kkmeans_cli/distributed``): a LocalCluster of worker processes on the
loopback interface, small data, compared with the fit and predict of one process."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from cli_helpers import ROOT, run, write_csv
from kkmeans_cli.estimator import KernelKMeans


import dask.array as da  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

from kkmeans_cli.distributed.fit import fit_on_cluster, predict_on_cluster  # noqa: E402
from kkmeans_cli.distributed.readers import open_data  # noqa: E402

LOOPBACK = "127.0.0.1"


@pytest.fixture(scope="module")
def client():
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host=LOOPBACK,
                           dashboard_address=f"{LOOPBACK}:0", silence_logs=50)
    c = Client(cluster, set_as_default=False)
    yield c
    c.close()
    cluster.close()


def mixture(n=3000, d=4, k=4, seed=0, spread=1.5):
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-6, 6, size=(k, d))
    X = centres[rng.integers(0, k, size=n)] + rng.normal(scale=spread, size=(n, d))
    return X


def one_process(X, **kw):
    return KernelKMeans(approx="nystroem", n_threads=1, **kw).fit(X)


def assert_same_fit(est, ref):
    np.testing.assert_array_equal(est.labels_, ref.labels_)
    assert est.inertia_ == pytest.approx(ref.inertia_, rel=1e-9)
    assert est.n_iter_ == ref.n_iter_
    assert est.kernel_.gamma == pytest.approx(ref.kernel_.gamma, rel=1e-12)
    np.testing.assert_array_equal(est.landmarks_, ref.landmarks_)
    np.testing.assert_allclose(est.centers_, ref.centers_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(est.fit_stats_["restart_inertias"],
                               ref.fit_stats_["restart_inertias"], rtol=1e-9)


FITS = [dict(n_clusters=4, n_init=1, init="k-means++", refine="none", n_landmarks=50),
        dict(n_clusters=5, n_init=3, init="random", refine="none", n_landmarks=40),
        dict(n_clusters=3, n_init=1, kernel="laplacian", gamma="scale", n_landmarks=30,
             refine="none")]


@pytest.mark.parametrize("params", FITS)
def test_same_result_as_one_process(client, tmp_path, params):
    X = mixture()
    np.save(tmp_path / "x.npy", X)
    ref = one_process(X, random_state=7, **params)
    data = open_data(client, str(tmp_path / "x.npy"), chunk_rows=700)
    assert len(data.bounds) == 5
    est = fit_on_cluster(KernelKMeans(approx="nystroem", random_state=7, **params), data,
                         client)
    assert_same_fit(est, ref)
    # predict on the cluster gives the fit's labels, in input order
    futures = predict_on_cluster(est, data, client)
    np.testing.assert_array_equal(np.concatenate(client.gather(futures)), ref.labels_)


def test_readers_give_the_same_fit(client, tmp_path):
    """HDF5, Zarr, a glob of CSV files, a glob of .npy files and a Dask array: the fit of
    the rows in the same order."""
    import h5py
    import zarr

    X = np.round(mixture(n=1200, seed=3), 4)
    params = dict(n_clusters=3, n_init=1, refine="none", n_landmarks=30, random_state=1)
    ref = one_process(X, **params)
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f["group/data"] = X
    z = zarr.open(str(tmp_path / "x.zarr"), mode="w", shape=X.shape, chunks=(500, 4),
                  dtype="f8")
    z[:] = X
    (tmp_path / "csv").mkdir()
    (tmp_path / "npy").mkdir()
    for i, (i0, i1) in enumerate([(0, 333), (333, 900), (900, 1200)]):
        write_csv(tmp_path / "csv" / f"part{i}.csv", X[i0:i1])
        np.save(tmp_path / "npy" / f"part{i}.npy", X[i0:i1])
    specs = [str(tmp_path / "x.h5") + ":/group/data", str(tmp_path / "x.zarr"),
             str(tmp_path / "csv" / "part*.csv"), str(tmp_path / "npy" / "*.npy")]
    for spec in specs:
        data = open_data(client, spec, chunk_rows=None if "*" in spec else 400)
        assert (data.n, data.d) == X.shape, spec
        est = fit_on_cluster(KernelKMeans(approx="nystroem", **params), data, client)
        np.testing.assert_array_equal(est.labels_, ref.labels_, err_msg=spec)
        assert est.inertia_ == pytest.approx(ref.inertia_, rel=1e-9)
    est = fit_on_cluster(KernelKMeans(approx="nystroem", **params),
                         da.from_array(X, chunks=(250, 4)), client)
    np.testing.assert_array_equal(est.labels_, ref.labels_)


def test_api_with_client_and_dask_array(client):
    """``KernelKMeans(cluster=client).fit(dask_array)`` is the cluster route."""
    X = mixture(n=1500, seed=5)
    params = dict(n_clusters=4, n_init=1, refine="none", n_landmarks=30, random_state=2)
    ref = one_process(X, **params)
    est = KernelKMeans(approx="nystroem", cluster=client, **params).fit(
        da.from_array(X, chunks=(400, 4)))
    np.testing.assert_array_equal(est.labels_, ref.labels_)
    assert est.inertia_ == pytest.approx(ref.inertia_, rel=1e-9)
    np.testing.assert_array_equal(est.predict(X), ref.labels_)


def test_killing_a_worker_mid_fit_gives_the_same_result(client, tmp_path):
    X = mixture(n=4000, d=3, k=6, seed=11, spread=2.5)
    np.save(tmp_path / "x.npy", X)
    params = dict(n_clusters=6, n_init=1, init="random", refine="none", n_landmarks=40,
                  random_state=4)
    ref = one_process(X, **params)
    assert ref.n_iter_ >= 4   # enough iterations to kill a worker in the middle
    pids = client.run(os.getpid)
    killed = []

    def progress(stage, **info):
        if stage == "iteration" and info["iteration"] == 2 and not killed:
            victim = sorted(pids.values())[0]
            os.kill(victim, signal.SIGKILL)
            killed.append(victim)

    data = open_data(client, str(tmp_path / "x.npy"), chunk_rows=500)
    est = fit_on_cluster(KernelKMeans(approx="nystroem", **params), data, client,
                         progress=progress)
    assert killed
    assert_same_fit(est, ref)
    client.wait_for_workers(2, timeout=60)
    assert killed[0] not in client.run(os.getpid).values()  # the nanny started a new one
