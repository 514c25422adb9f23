"""The Dask route (``kkmeans_cli/distributed``): a LocalCluster of worker processes on the
loopback interface, small data, compared with the fit and predict of one process."""
import json
import os
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

from helpers import LOOPBACK, ROOT, loopback_cluster, mixture as _mixture, run, write_csv
from kkmeans_cli.errors import DataError
from kkmeans_cli.model.estimator import KernelKMeans


import dask.array as da  # noqa: E402
from distributed import LocalCluster  # noqa: E402

from kkmeans_cli.distributed.fit import predict_on_cluster  # noqa: E402
from kkmeans_cli.distributed.readers import open_data  # noqa: E402


@pytest.fixture(scope="module")
def client():
    yield from loopback_cluster(2)


def mixture(n=5000, d=4, k=4, seed=0, spread=1.5):
    """This file's data: overlapping clusters (centres in [-6, 6]^d, spread 1.5)."""
    return _mixture(n, d, k, seed, box=6.0, std=spread)


def one_process(X, **kw):
    return KernelKMeans(approx="nystroem", n_threads=1, **{"kernel": "rbf", **kw}).fit(X)


def assert_same_fit(est, ref):
    np.testing.assert_array_equal(est.labels_, ref.labels_)
    assert est.inertia_ == pytest.approx(ref.inertia_, rel=1e-9)
    assert est.n_iter_ == ref.n_iter_
    assert est.kernel_.gamma == pytest.approx(ref.kernel_.gamma, rel=1e-12)
    if ref.kernel_.offset is None:
        assert est.kernel_.offset is None
    else:   # the column means, summed through the chunks in order: bitwise
        np.testing.assert_array_equal(est.kernel_.offset, ref.kernel_.offset)
    np.testing.assert_array_equal(est.landmarks_, ref.landmarks_)
    np.testing.assert_allclose(est.centers_, ref.centers_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(est.fit_stats_["restart_inertias"],
                               ref.fit_stats_["restart_inertias"], rtol=1e-9)


FITS = [dict(n_clusters=6, n_landmarks=50),   # the default restarts (spectral, k-means++)
        dict(n_clusters=5, n_init=3, init="random", n_landmarks=40, nystroem_rank=12),
        dict(n_clusters=3, n_init=2, kernel="laplacian", gamma="scale", n_landmarks=30)]


@pytest.mark.parametrize("params", FITS)
def test_same_result_as_one_process(client, tmp_path, params):
    """2 workers, 3 chunks of 2048 rows: the labels, objective, centres, iterations and every
    completed restart's objective of the fit in one process."""
    X = mixture()
    np.save(tmp_path / "x.npy", X)
    ref = one_process(X, random_state=7, **params)
    data = open_data(client, str(tmp_path / "x.npy")).aligned(client, 2048)
    est = KernelKMeans(approx="nystroem", random_state=7, cluster=client, **{"kernel": "rbf", **params}).fit(data)
    assert est.fit_stats_["cluster"]["chunks"] == 3
    assert_same_fit(est, ref)
    assert est.fit_stats_["start_kinds"] == ref.fit_stats_["start_kinds"]
    # predict on the cluster gives the fit's labels, in input order
    futures = predict_on_cluster(est.nystroem_model(), data, client, rows=2048)
    np.testing.assert_array_equal(np.concatenate(client.gather(futures)), ref.labels_)


def test_readers_give_the_same_fit(client, tmp_path):
    """HDF5, Zarr, a glob of CSV files, a glob of .npy files and a Dask array: the fit of
    the rows in the same order."""
    import h5py
    import zarr

    X = np.round(mixture(n=4500, seed=3), 4)
    params = dict(n_clusters=3, n_init=2, n_landmarks=30, random_state=1)
    ref = one_process(X, **params)
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f["group/data"] = X
    z = zarr.open(str(tmp_path / "x.zarr"), mode="w", shape=X.shape, chunks=(1000, 4),
                  dtype="f8")
    z[:] = X
    (tmp_path / "csv").mkdir()
    (tmp_path / "npy").mkdir()
    for i, (i0, i1) in enumerate([(0, 1333), (1333, 3900), (3900, 4500)]):
        write_csv(tmp_path / "csv" / f"part{i}.csv", X[i0:i1])
        np.save(tmp_path / "npy" / f"part{i}.npy", X[i0:i1])
    specs = [str(tmp_path / "x.h5") + ":/group/data", str(tmp_path / "x.zarr"),
             str(tmp_path / "csv" / "part*.csv"), str(tmp_path / "npy" / "*.npy")]
    for spec in specs:
        data = open_data(client, spec)
        assert (data.n, data.d) == X.shape, spec
        est = KernelKMeans(approx="nystroem", cluster=client, **{"kernel": "rbf", **params}).fit(
            data.aligned(client, 2048))
        assert est.fit_stats_["cluster"]["chunks"] == 3
        np.testing.assert_array_equal(est.labels_, ref.labels_, err_msg=spec)
        assert est.inertia_ == pytest.approx(ref.inertia_, rel=1e-9)
    est = KernelKMeans(approx="nystroem", cluster=client, **{"kernel": "rbf", **params}).fit(
        da.from_array(X, chunks=(2048, 4)))
    np.testing.assert_array_equal(est.labels_, ref.labels_)


def test_api_with_client_and_dask_array(client):
    """``KernelKMeans(cluster=client).fit(dask_array)`` is the cluster route."""
    X = mixture(n=2500, seed=5)
    params = dict(n_clusters=4, n_init=3, n_landmarks=30, random_state=2)
    ref = one_process(X, **params)
    est = KernelKMeans(approx="nystroem", cluster=client, **{"kernel": "rbf", **params}).fit(
        da.from_array(X, chunks=(400, 4)))
    np.testing.assert_array_equal(est.labels_, ref.labels_)
    assert est.inertia_ == pytest.approx(ref.inertia_, rel=1e-9)
    np.testing.assert_array_equal(est.predict(X), ref.labels_)


def test_a_cluster_fit_after_a_dataframe_fit_keeps_no_feature_names(client, tmp_path):
    """A cluster fit runs no validate_data: a fit on a DataFrame before left its
    feature_names_in_, so predict of the new 3 columns warned, or refused their names. Now
    dropped; and a cluster fit that fails (a null HDF5 dataspace: one process's message,
    not 'unexpected TypeError') leaves the fit before whole."""
    import h5py
    import pandas as pd

    X = mixture(n=600, d=2, seed=3)
    frame = pd.DataFrame(X, columns=["a", "b"])
    est = KernelKMeans(3, kernel="rbf", approx="nystroem", n_landmarks=30, random_state=0,
                       cluster=client).fit(frame.to_numpy())
    est.set_params(cluster=None).fit(frame)
    assert list(est.feature_names_in_) == ["a", "b"]
    with h5py.File(tmp_path / "e.h5", "w") as f:
        f["e"] = h5py.Empty("f8")
    with pytest.raises(DataError, match=r"e\.h5:/e: holds no array \(an empty dataspace\)"):
        est.set_params(cluster=client).fit(str(tmp_path / "e.h5"))
    assert list(est.feature_names_in_) == ["a", "b"] and est.n_features_in_ == 2
    X3 = mixture(n=600, d=3, seed=4)
    est.fit(da.from_array(X3, chunks=(200, 3)))
    assert est.n_features_in_ == 3 and not hasattr(est, "feature_names_in_")
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # it warned 'fitted with feature names'
        np.testing.assert_array_equal(est.predict(X3), est.labels_)


def test_killing_a_worker_mid_fit_gives_the_same_result(client, tmp_path):
    X = mixture(n=7000, d=3, k=6, seed=11, spread=2.5)
    np.save(tmp_path / "x.npy", X)
    params = dict(n_clusters=6, n_init=1, init="random", n_landmarks=40, random_state=4)
    ref = one_process(X, **params)
    assert ref.n_iter_ >= 2   # a pass on all data after the kill
    pids = client.run(os.getpid)
    killed = []

    def progress(done, total, what):
        # after the first Lloyd pass on all data: the worker's features and labels are lost
        if what.startswith("Lloyd on all data") and done == 1 and not killed:
            victim = sorted(pids.values())[0]
            os.kill(victim, signal.SIGKILL)
            killed.append(victim)

    data = open_data(client, str(tmp_path / "x.npy")).aligned(client, 2048)
    est = KernelKMeans(approx="nystroem", cluster=client, **{"kernel": "rbf", **params})
    est.fit(data, progress=progress)
    assert killed
    assert_same_fit(est, ref)
    # the nanny starts a new worker; the scheduler may list the dead one for a moment
    from distributed.comm.core import CommClosedError

    deadline = time.perf_counter() + 60
    while True:
        try:
            now = client.run(os.getpid)
            if killed[0] not in now.values() and len(now) == 2:
                break
        except CommClosedError:
            pass
        assert time.perf_counter() < deadline, "the killed worker was not replaced"
        time.sleep(0.5)


# -- the command line --------------------------------------------------------------------------
def _free_port():
    import socket

    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def _one_error_line(result, *needles):
    """The error is one line, the last on stderr (before it at most the cluster's address)."""
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("kkmeans: error: "), result.stderr
    assert all(line.startswith("Dask cluster tcp://127.0.0.1:") for line in lines[:-1])
    for needle in needles:
        assert needle in lines[-1]


def test_cli_fit_on_a_scheduler_equals_one_process(client, tmp_path):
    X = mixture(n=4500, seed=8)
    np.save(tmp_path / "x.npy", X)
    common = ["-k", "4", "--kernel", "rbf", "--approx", "nystroem", "--landmarks", "40", "--n-init", "4",
              "--seed", "3", "--threads", "1"]
    one = run(["fit", "--kernel", "rbf", tmp_path / "x.npy", *common, "-o", tmp_path / "one.npz"])
    assert one.exit_code == 0, one.stderr
    dist = run(["fit", "--kernel", "rbf", tmp_path / "x.npy", *common, "-o", tmp_path / "dask.npz",
                "--scheduler", client.scheduler.address, "--chunk-rows", "2000",
                "--summary", tmp_path / "s.json"])
    assert dist.exit_code == 0, dist.stderr
    assert dist.stdout == one.stdout
    assert "Dask cluster tcp://127.0.0.1:" in dist.stderr
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["cluster"]["workers"] >= 1   # (a worker restarted by its nanny may lag)
    assert summary["cluster"]["chunks"] == 3   # 2000 rows rounded up to 2048
    a, b = np.load(tmp_path / "one.npz"), np.load(tmp_path / "dask.npz")
    np.testing.assert_array_equal(a["labels"], b["labels"])
    np.testing.assert_allclose(a["centers"], b["centers"], rtol=1e-9, atol=1e-12)
    # the same through a YAML config
    (tmp_path / "run.yaml").write_text(f"scheduler: {client.scheduler.address}\n"
                                       f"chunk_rows: 4096\n")
    conf = run(["fit", tmp_path / "x.npy", *common, "--no-model", "--config",
                tmp_path / "run.yaml"])
    assert conf.exit_code == 0, conf.stderr
    assert conf.stdout == one.stdout


def test_cli_predict_glob_on_local_cluster_equals_one_process(tmp_path):
    """``kkmeans predict model.npz 'parts/*.csv' --cluster local:2`` (a LocalCluster of its
    own) prints the labels of the one-process predict, in input order."""
    X = np.round(mixture(n=5000, seed=9), 4)
    write_csv(tmp_path / "all.csv", X)
    (tmp_path / "parts").mkdir()
    for i, (i0, i1) in enumerate([(0, 700), (700, 3500), (3500, 5000)]):
        write_csv(tmp_path / "parts" / f"p{i}.csv", X[i0:i1])
    fit = run(["fit", "--kernel", "rbf", tmp_path / "all.csv", "-k", "4", "--approx", "nystroem", "--landmarks",
               "40", "--n-init", "2", "--threads", "1", "-o", tmp_path / "model.npz"])
    assert fit.exit_code == 0, fit.stderr
    one = run(["predict", tmp_path / "model.npz", tmp_path / "all.csv"])
    assert one.exit_code == 0, one.stderr
    dist = run(["predict", tmp_path / "model.npz", str(tmp_path / "parts" / "*.csv"),
                "--cluster", "local:2"])
    assert dist.exit_code == 0, dist.stderr
    assert dist.stdout == one.stdout
    assert len(dist.stdout.splitlines()) == 5000
    out = run(["predict", tmp_path / "model.npz", str(tmp_path / "parts" / "*.csv"),
               "--cluster", "local:2", "--labels", tmp_path / "labels.txt"])
    assert out.exit_code == 0, out.stderr
    assert (tmp_path / "labels.txt").read_text() == one.stdout


def test_unreachable_scheduler_is_one_line_exit_1_no_output(tmp_path, monkeypatch):
    X = mixture(n=300)
    np.save(tmp_path / "x.npy", X)
    monkeypatch.setenv("KKMEANS_CONNECT_TIMEOUT", "2")
    address = f"tcp://{LOOPBACK}:{_free_port()}"
    t0 = time.perf_counter()
    result = run(["fit", "--kernel", "rbf", tmp_path / "x.npy", "-k", "3", "--approx", "nystroem",
                  "--scheduler", address, "-o", tmp_path / "m.npz", "--labels",
                  tmp_path / "l.txt"])
    assert result.exit_code == 1
    _one_error_line(result, f"cannot reach the Dask scheduler at {address} within 2 s")
    assert result.stdout == ""
    assert sorted(os.listdir(tmp_path)) == ["x.npy"]
    assert time.perf_counter() - t0 < 30
    # a scheduler file naming it: the same
    (tmp_path / "sched.json").write_text(json.dumps({"address": address}))
    result = run(["predict", tmp_path / "m.npz", tmp_path / "x.npy", "--scheduler",
                  tmp_path / "sched.json"])
    assert result.exit_code == 1   # the model is missing: found before any connection
    _one_error_line(result, "m.npz")


def test_scheduler_without_workers_is_one_line_exit_1(tmp_path, monkeypatch):
    X = mixture(n=300)
    np.save(tmp_path / "x.npy", X)
    monkeypatch.setenv("KKMEANS_CONNECT_TIMEOUT", "2")
    empty = LocalCluster(n_workers=0, processes=True, host=LOOPBACK,
                         dashboard_address=f"{LOOPBACK}:0", silence_logs=50)
    try:
        (tmp_path / "sched.json").write_text(json.dumps({"address":
                                                         empty.scheduler_address}))
        result = run(["fit", "--kernel", "rbf", tmp_path / "x.npy", "-k", "3", "--approx", "nystroem",
                      "--scheduler", tmp_path / "sched.json", "-o", tmp_path / "m.npz"])
    finally:
        empty.close()
    assert result.exit_code == 1
    _one_error_line(result, "has no worker")
    assert not (tmp_path / "m.npz").exists()


def test_bad_data_on_a_worker_is_one_line_exit_1(client, tmp_path):
    X = mixture(n=3000)
    X[2777, 2] = np.nan
    np.save(tmp_path / "x.npy", X)
    result = run(["fit", "--kernel", "rbf", tmp_path / "x.npy", "-k", "3", "--approx", "nystroem",
                  "--scheduler", client.scheduler.address, "-o", tmp_path / "m.npz"])
    assert result.exit_code == 1
    _one_error_line(result, "x.npy: row 2778, column 3: missing value (NaN)")
    assert not (tmp_path / "m.npz").exists()


@pytest.mark.parametrize("args, message", [
    (["--cluster", "local:2"], "add --approx nystroem"),
    (["--approx", "nystroem", "--cluster", "remote"], "expected local or local:N"),
    (["--approx", "nystroem", "--cluster", "local:0"], "at least one worker"),
    (["--approx", "nystroem", "--cluster", "local", "--scheduler", "tcp://127.0.0.1:1"],
     "not both"),
    (["--approx", "nystroem", "--cluster", "local", "--scale", "standard"],
     "--scale cannot be used with a cluster"),
    (["--approx", "nystroem", "--cluster", "local", "--refine", "hartigan"],
     "--refine hartigan cannot be used with a cluster"),
    (["--approx", "nystroem", "--scheduler", "no-such-file"], "expected tcp://HOST:PORT"),
])
def test_usage_errors_exit_2(tmp_path, args, message):
    np.save(tmp_path / "x.npy", mixture(n=100))
    result = run(["fit", "--kernel", "rbf", tmp_path / "x.npy", "-k", "3", *args, "-o", tmp_path / "m.npz"])
    assert result.exit_code == 2, result.stderr
    _one_error_line(result, message)
    assert not (tmp_path / "m.npz").exists()


def test_cluster_without_dask_says_how_to_install(tmp_path, monkeypatch):
    """Dask not installed (simulated: importing it fails): one line naming the extra."""
    np.save(tmp_path / "x.npy", mixture(n=100))
    for name in ("dask", "distributed"):
        monkeypatch.setitem(sys.modules, name, None)   # `import dask` raises ImportError
    result = run(["fit", "--kernel", "rbf", tmp_path / "x.npy", "-k", "3", "--approx", "nystroem", "--cluster",
                  "local:2", "-o", tmp_path / "m.npz"])
    assert result.exit_code == 1
    _one_error_line(result, "pip install 'kkmeans-cli[dask]'")
    assert not (tmp_path / "m.npz").exists()
    with pytest.raises(Exception, match=r"pip install 'kkmeans-cli\[dask\]'"):
        KernelKMeans(kernel="rbf", approx="nystroem", cluster="local:2").fit(mixture(n=100))


def test_import_and_help_never_load_dask():
    code = ("import sys, kkmeans_cli, kkmeans_cli.cli\n"
            "from click.testing import CliRunner\n"
            "CliRunner().invoke(kkmeans_cli.cli.cli, ['fit', '--help'])\n"
            "from kkmeans_cli import KernelKMeans\n"
            "import numpy as np\n"
            "KernelKMeans(3, kernel='rbf', approx='nystroem', n_init=1).fit(np.random.default_rng(0)"
            ".normal(size=(50, 2)))\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('dask', 'distributed', 'zarr')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_per_chunk_sums_move_fewer_bytes_same_labels(client, tmp_path):
    """``per_chunk_sums``: each chunk adds its blocks before sending (k × s per chunk, not
    per 2048 rows); the additions are grouped differently, so the objective is equal to
    rounding and the labels the same (no point is that close to a tie here)."""
    from kkmeans_cli.distributed.fit import fit_on_cluster
    from kkmeans_cli.model.params import fit_rngs

    X = mixture(n=9000, seed=4)
    np.save(tmp_path / "x.npy", X)
    params = dict(n_clusters=4, n_init=3, n_landmarks=30, random_state=5)
    ref = one_process(X, **params)
    data = open_data(client, str(tmp_path / "x.npy"))
    runs = {}
    for mode in (False, True):
        est = KernelKMeans(approx="nystroem", **{"kernel": "rbf", **params})
        result = fit_on_cluster(data, client, est.get_params(), fit_rngs(5), rows=4096,
                                per_chunk_sums=mode)
        runs[mode] = result
        np.testing.assert_array_equal(result.labels, ref.labels_)
        assert result.inertia == pytest.approx(ref.inertia_, rel=1e-9)
    k, s = 4, runs[True].nystroem.rank
    chunks = runs[True].fit_stats["cluster"]["chunks"]
    assert chunks == 3
    per_chunk = chunks * (k * s + k + 1 + 1) * 8
    assert runs[True].fit_stats["cluster"]["bytes_per_pass"] == per_chunk
    blocks = -(-9000 // 2048)
    assert runs[False].fit_stats["cluster"]["bytes_per_pass"] == blocks * (k * s + k + 2) * 8
