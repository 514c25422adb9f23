"""The Dask route against hostile use: malformed addresses and settings are usage errors at
once (before Dask connects or starts anything), the data get the checks of a fit in one
process with the same messages, and Ctrl-C, SIGTERM, a bad part or a scheduler that goes away
end the command with one line, no traceback and no output left. A LocalCluster on the loopback
interface; the cases that need the command's own cluster or signals run as subprocesses."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from helpers import LOOPBACK, kkmeans_command, loopback_cluster, run, start_kkmeans, write_csv
from kkmeans_cli.errors import TooFewDistinctPointsError, UsageError, ValueRangeError
from kkmeans_cli.model.estimator import KernelKMeans

from distributed import LocalCluster  # noqa: E402

NYSTROEM = ["--kernel", "rbf", "--approx", "nystroem", "--landmarks", "30", "--n-init", "2"]


@pytest.fixture(scope="module")
def client():
    yield from loopback_cluster(1)


@pytest.fixture
def never_connect(monkeypatch):
    """Fail the test if the command connects to or starts a cluster."""
    from kkmeans_cli.distributed import cluster

    def refuse(*args, **kwargs):
        raise AssertionError("a cluster was reached before the usage error")

    monkeypatch.setattr(cluster, "_connect", refuse)
    monkeypatch.setattr(cluster, "_start_local", refuse)


def _one_line(result, code, needle):
    assert result.exit_code == code, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kkmeans: error: "), result.stderr
    assert needle in lines[0], lines[0]


def _points(tmp_path, n=400, seed=0):
    X = np.random.default_rng(seed).normal(size=(n, 3))
    np.save(tmp_path / "x.npy", X)
    return X


# -- 16. addresses, the timeout: usage errors before any connection -----------------------------
@pytest.mark.parametrize("address, needle", [
    ("tcp://127.0.0.1:abc", "'tcp://127.0.0.1:abc': port 'abc' is not a number in 1..65535"),
    ("tcp://", "'tcp://': no host"),
    ("tcp://127.0.0.1", "'tcp://127.0.0.1': no port; expected tcp://127.0.0.1:PORT"),
    (":99999", "':99999': no host"),
    ("127.0.0.1:99999", "port '99999' is not a number in 1..65535"),
    ("tcp://127.0.0.1:0", "port '0' is not a number in 1..65535"),
    ("tcp://127.0.0.1:８７８６", "is not a number in 1..65535"),
    ("inproc://x", "an inproc:// scheduler lives inside another process"),
    ("http://127.0.0.1:8787/status", "is a web address (the dashboard's?)"),
    ("gopher://127.0.0.1:70", "unknown scheme gopher://"),
    ("tcp://127.0.0.1:8786/x", "expected tcp://HOST:PORT"),
    ("ucx://127.0.0.1:8786", "a ucx:// scheduler needs the ucx-py package"),
    ("256.1.1.1:8786", "host '256.1.1.1' is not an IPv4 address (four numbers 0..255"),
    (" ", "Invalid value for '--scheduler': '': empty; expected tcp://HOST:PORT or a "
          "scheduler file"),
    ("tcp://1.2.3.4.5:8786", "host '1.2.3.4.5' is not an IPv4 address"),
    ("tls://127.0.0.1:8786", "a tls:// scheduler needs a CA file and a client certificate, "
                             "and Dask's configuration names none"),
])
def test_a_malformed_scheduler_address_is_a_usage_error_at_once(tmp_path, never_connect,
                                                                  monkeypatch, address, needle):
    import importlib.util

    find_spec = importlib.util.find_spec   # a machine without ucx-py, wherever the test runs
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "ucp" else find_spec(name, *a))
    _points(tmp_path)
    for command in (["fit", tmp_path / "x.npy", "-k", "3", *NYSTROEM, "--no-model"],
                    ["predict", tmp_path / "x.npy", tmp_path / "x.npy"]):
        result = run(command + ["--scheduler", address, "--labels", tmp_path / "l.txt"])
        _one_line(result, 2, needle)
    assert sorted(os.listdir(tmp_path)) == ["x.npy"]


def test_a_tls_address_is_taken_when_dask_names_its_certificates():
    import dask.config

    from kkmeans_cli.distributed.cluster import parse_scheduler

    with dask.config.set({"distributed.comm.tls.ca-file": "ca.pem",
                          "distributed.comm.tls.client.cert": "client.pem"}):
        assert parse_scheduler("tls://127.0.0.1:8786") == ("address", "tls://127.0.0.1:8786")
    with dask.config.set({"distributed.comm.tls.ca-file": "ca.pem"}):
        with pytest.raises(UsageError, match="a tls:// scheduler needs a CA file"):
            parse_scheduler("tls://127.0.0.1:8786")
    # the DASK_* variables the message names count too (Dask spells their keys ca_file)
    env = dict(os.environ, DASK_DISTRIBUTED__COMM__TLS__CA_FILE="ca.pem",
               DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT="client.pem")
    code = ("from kkmeans_cli.distributed.cluster import parse_scheduler; "
            "print(parse_scheduler('tls://127.0.0.1:8786'))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "('address', 'tls://127.0.0.1:8786')\n"
    assert parse_scheduler("tcp://255.255.255.255:1") == ("address", "tcp://255.255.255.255:1")
    assert parse_scheduler("127.1:8786") == ("address", "tcp://127.1:8786")  # 127.0.0.1
    assert parse_scheduler("node-7.example:8786") == ("address", "tcp://node-7.example:8786")


def test_a_folder_as_scheduler_file_and_config_values_are_checked_too(tmp_path, never_connect):
    _points(tmp_path)
    result = run(["fit", tmp_path / "x.npy", "-k", "3", *NYSTROEM, "--scheduler", tmp_path])
    _one_line(result, 2, f"{tmp_path}: is a folder, not a scheduler file")
    (tmp_path / "run.yaml").write_text("scheduler: tcp://127.0.0.1\ncluster: local\n")
    result = run(["fit", tmp_path / "x.npy", "-k", "3", *NYSTROEM, "--config",
                  tmp_path / "run.yaml"])
    _one_line(result, 2, f"config {tmp_path / 'run.yaml'}: key 'scheduler': 'tcp://127.0.0.1'"
                         f": no port")
    (tmp_path / "run.yaml").write_text("cluster: 2\n")
    result = run(["fit", tmp_path / "x.npy", "-k", "3", *NYSTROEM, "--config",
                  tmp_path / "run.yaml"])
    _one_line(result, 2, "key 'cluster': '2': expected local or local:N")


@pytest.mark.parametrize("content, needle", [
    ('{"address": "tcp://127.0.0.1"}', "the scheduler file's address 'tcp://127.0.0.1': no port"),
    ("{not json", "not a Dask scheduler file (JSONDecodeError"),
    ('{"other": 1}', "not a Dask scheduler file (KeyError"),
])
def test_a_scheduler_file_that_cannot_work_is_a_usage_error(tmp_path, never_connect, content,
                                                             needle):
    """As the same address typed is (exit 2, before any connection); it was exit 1."""
    _points(tmp_path)
    (tmp_path / "s.json").write_text(content)
    result = run(["fit", tmp_path / "x.npy", "-k", "3", *NYSTROEM, "--no-model",
                  "--scheduler", tmp_path / "s.json"])
    _one_line(result, 2, needle)


@pytest.mark.parametrize("where", [["--cluster", "local:2"],
                                   ["--scheduler", "tcp://127.0.0.1:1"]])
def test_a_missing_data_file_is_said_before_any_cluster(tmp_path, never_connect, where):
    """The client reads DATA's header: a missing file was said after a local cluster had
    started (its dashboard line first) or never, after 13 s waiting for a scheduler."""
    result = run(["fit", tmp_path / "none.npy", "-k", "3", *NYSTROEM, "--no-model", *where])
    _one_line(result, 1, f"{tmp_path / 'none.npy'}: no such file")
    _points(tmp_path)
    fit = run(["fit", tmp_path / "x.npy", "-k", "3", *NYSTROEM, "-o", tmp_path / "m.npz",
               "-q"])
    assert fit.exit_code == 0, fit.stderr
    result = run(["predict", tmp_path / "m.npz", tmp_path / "none.h5:/x", *where])
    _one_line(result, 1, f"{tmp_path / 'none.h5'}: no such file")


def test_an_unreachable_scheduler_a_config_set_says_where_it_came_from(tmp_path, monkeypatch):
    """docs/cli.md: an error found later about an option a config set ends with where it came
    from; 'cannot reach the Dask scheduler' did not (it named no option)."""
    _points(tmp_path)
    monkeypatch.setenv("KKMEANS_CONNECT_TIMEOUT", "1")
    (tmp_path / "c.yaml").write_text("scheduler: tcp://127.0.0.1:1\n")
    result = run(["fit", tmp_path / "x.npy", "-k", "3", *NYSTROEM, "--no-model", "--config",
                  tmp_path / "c.yaml"])
    _one_line(result, 1, "--scheduler: cannot reach the Dask scheduler at tcp://127.0.0.1:1 "
                         "within 1 s")
    assert result.stderr.rstrip().endswith(
        f"(--scheduler is key 'scheduler' of config {tmp_path / 'c.yaml'})"), result.stderr


@pytest.mark.parametrize("value", ["inf", "nan", "0", "-3", "abc", "1e400"])
def test_a_bad_connect_timeout_is_a_usage_error(tmp_path, never_connect, monkeypatch, value):
    _points(tmp_path)
    monkeypatch.setenv("KKMEANS_CONNECT_TIMEOUT", value)
    result = run(["fit", tmp_path / "x.npy", "-k", "3", *NYSTROEM, "--no-model",
                  "--scheduler", "tcp://127.0.0.1:8786"])
    _one_line(result, 2, f"KKMEANS_CONNECT_TIMEOUT={value!r}: expected a positive number of "
                         f"seconds")


# -- 7. worker memory below what a worker needs -----------------------------------------------
@pytest.mark.parametrize("size, shown", [("10M", "10 MiB"), ("1K", "1 KiB"), ("1e3", "1000 B"),
                                         ("150M", "150 MiB")])
def test_a_worker_memory_a_worker_cannot_live_in_is_refused_up_front(tmp_path, never_connect,
                                                                      size, shown):
    _points(tmp_path)
    result = run(["fit", tmp_path / "x.npy", "-k", "3", *NYSTROEM, "--no-model",
                  "--cluster", "local:1", "--worker-memory", size])
    _one_line(result, 2, f"--worker-memory {shown}: a worker needs at least 192 MiB")


def test_the_minimum_counts_one_chunk_and_names_the_way_out():
    from kkmeans_cli.distributed.cluster import check_worker_memory
    from kkmeans_cli.errors import UsageError

    check_worker_memory(None, 10**12)
    check_worker_memory(300 * 2**20, 20 * 2**20, 100_000)
    with pytest.raises(UsageError, match=r"--worker-memory 200 MiB: a worker needs at least "
                                         r"252 MiB, its process \(192 MiB\) and twice one chunk "
                                         r"of 100,000 rows \(30 MiB: .*--chunk-rows"):
        check_worker_memory(200 * 2**20, 30 * 2**20, 100_000)


# -- 17, 15. options the cluster route does not run: refused before connecting -----------------
@pytest.mark.parametrize("args, needle", [
    (["--kernel", "precomputed"], "--kernel precomputed cannot be used with a cluster"),
    (["--kernel", "precomputed-distance"], "--kernel precomputed-distance cannot be used"),
])
def test_a_precomputed_kernel_on_a_cluster_is_an_option_conflict(tmp_path, never_connect,
                                                                  args, needle):
    np.save(tmp_path / "K.npy", np.eye(50))
    for where in (["--cluster", "local:2"], ["--scheduler", "tcp://127.0.0.1:8786"]):
        result = run(["fit", tmp_path / "K.npy", "-k", "2", *NYSTROEM, *args, *where,
                      "--no-model"])
        _one_line(result, 2, needle)
        # without --approx nystroem: the same remedy first, not 'add --approx nystroem'
        # (which would then be refused for the kernel)
        result = run(["fit", tmp_path / "K.npy", "-k", "2", *args, *where, "--no-model"])
        _one_line(result, 2, needle)


def test_predict_with_data_on_a_cluster_is_refused(tmp_path, never_connect):
    X = _points(tmp_path)
    result = run(["fit", tmp_path / "x.npy", "-k", "3", *NYSTROEM, "-o", tmp_path / "m.npz",
                  "-q"])
    assert result.exit_code == 0, result.stderr
    for where in (["--scheduler", "tcp://127.0.0.1:8786"], ["--cluster", "local:1"]):
        result = run(["predict", tmp_path / "m.npz", tmp_path / "x.npy", "--with-data", *where])
        _one_line(result, 2, "--with-data cannot be used with a cluster yet")
        assert result.stdout == ""
    assert X.shape == (400, 3)


def test_data_on_stdin_on_a_cluster_is_a_usage_error_before_connecting(tmp_path, never_connect):
    X = _points(tmp_path)
    result = run(["fit", tmp_path / "x.npy", "-k", "3", *NYSTROEM, "-o", tmp_path / "m.npz",
                  "-q"])
    assert result.exit_code == 0, result.stderr
    text = "".join(f"{a},{b},{c}\n" for a, b, c in X)
    for where in (["--scheduler", "tcp://127.0.0.1:8786"], ["--cluster", "local:1"]):
        for command in (["predict", tmp_path / "m.npz", "-"],
                        ["fit", "-", "-k", "3", *NYSTROEM, "--no-model"]):
            result = run(command + where + ["--labels", tmp_path / "l.txt"], input=text)
            _one_line(result, 2, "DATA on stdin cannot be read by the workers of a cluster")
    assert sorted(os.listdir(tmp_path)) == ["m.npz", "x.npy"]


# -- 13. the checks of one process, on the chunks ------------------------------------------------
def _one_process_error(X, **params):
    with pytest.raises((ValueRangeError, TooFewDistinctPointsError)) as info:
        KernelKMeans(approx="nystroem", n_threads=1, **{"kernel": "rbf", **params}).fit(X)
    return info.value


@pytest.mark.parametrize("case", ["chi2 one negative", "chi2 all negative", "identical rows",
                                  "two distinct in two chunks"])
def test_the_cluster_makes_the_checks_of_one_process(client, tmp_path, case):
    rng = np.random.default_rng(3)
    params = dict(n_clusters=3, n_landmarks=20, n_init=2, random_state=0)
    if case == "chi2 one negative":
        X = np.abs(rng.normal(size=(5000, 3)))
        X[4321, 1] = -0.5
        params["kernel"] = "chi2"
    elif case == "chi2 all negative":
        X = -np.abs(rng.normal(size=(3000, 3))) - 0.1
        params["kernel"] = "chi2"
    elif case == "identical rows":
        X = np.ones((100, 3))
    else:  # one point in each of two chunks of 2048 rows
        X = np.zeros((4096, 3))
        X[2048:] = 1.0
    expected = _one_process_error(X, **params)
    from kkmeans_cli.distributed.readers import from_array

    data = from_array(client, X).aligned(client, 2048)
    with pytest.raises(type(expected)) as info:
        KernelKMeans(approx="nystroem", cluster=client, **{"kernel": "rbf", **params}).fit(data)
    assert str(info.value) == str(expected)
    # the command line says it as in one process
    np.save(tmp_path / "x.npy", X)
    args = ["fit", tmp_path / "x.npy", "-k", "3", *NYSTROEM, "--no-model", "-q"]
    args += ["--kernel", "chi2"] if "chi2" in case else []
    one = run(args)
    dask = run(args + ["--scheduler", client.scheduler.address, "--chunk-rows", "2048"])
    assert one.exit_code == dask.exit_code == 1
    _one_line(dask, 1, one.stderr.strip().removeprefix("kkmeans: error: "))


# -- 10, 21, 8, 3, 9: the command's own cluster, signals, a scheduler that goes away -------------
def _start(args, cwd, **kwargs):
    return start_kkmeans(args, cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True, **kwargs)


def _wait_for_line(proc, prefix, seconds=60):
    """The first stderr line (the cluster's address, printed once it runs)."""
    line = proc.stderr.readline().decode()
    assert line.startswith(prefix), (line, proc.stderr.read())
    return line


def _group_gone(pgid, seconds=30):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_a_bad_part_on_a_local_cluster_is_one_line_without_a_worker_traceback(client,
                                                                             tmp_path):
    (tmp_path / "parts").mkdir()
    X = np.round(np.random.default_rng(1).normal(size=(900, 3)), 4)
    for i in range(3):
        write_csv(tmp_path / "parts" / f"p{i}.csv", X[300 * i:300 * (i + 1)])
    text = (tmp_path / "parts" / "p1.csv").read_text().splitlines()
    text[7] = "nan," + text[7].split(",", 1)[1]
    (tmp_path / "parts" / "p1.csv").write_text("\n".join(text) + "\n")
    (tmp_path / "parts" / "p3.csv").write_text("")
    # The command's own cluster: its workers' logs would reach the command's stderr.
    proc = subprocess.run(kkmeans_command() + [
        "fit", "parts/p[012].csv", "-k", "3", *NYSTROEM, "--cluster", "local:1", "--no-model",
        "-q"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr == ("kkmeans: error: parts/p1.csv: line 8, column 1 ('x0'): missing "
                           "value ('nan'); the cluster route reads every row (clean the data "
                           "first)\n")
    # an empty part, on a running cluster
    result = run(["fit", str(tmp_path / "parts" / "p[023].csv"), "-k", "3", *NYSTROEM,
                  "--scheduler", client.scheduler.address, "--no-model", "-q"])
    _one_line(result, 1, f"{tmp_path / 'parts' / 'p3.csv'}: the file is empty")


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143),
                                          (signal.SIGHUP, 129), (signal.SIGQUIT, 131)])
def test_a_signal_during_a_local_cluster_run_is_one_line(tmp_path, signum, code):
    """Ctrl-C, Ctrl-\\ and a terminal's hang-up reach the whole process group (the workers
    and multiprocessing's resource tracker too); SIGTERM the command alone. Either way: one
    line, 128 + the signal, no traceback of a worker or of the tracker, no output, no worker
    left behind. The labels go to a FIFO nobody reads: the run cannot end before the
    signal."""
    _points(tmp_path, n=3000)
    result = run(["fit", tmp_path / "x.npy", "-k", "3", *NYSTROEM, "-o", tmp_path / "m.npz",
                  "-q", "--labels", "/dev/null"])
    assert result.exit_code == 0
    os.mkfifo(tmp_path / "labels.fifo")
    proc = _start(["predict", "m.npz", "x.npy", "--cluster", "local:2", "--chunk-rows", "1024",
                   "--labels", "labels.fifo"], tmp_path)
    _wait_for_line(proc, "Dask cluster tcp://127.0.0.1:")
    time.sleep(0.3)
    if signum == signal.SIGTERM:
        proc.send_signal(signum)
    else:
        os.killpg(proc.pid, signum)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    name = "" if signum == signal.SIGINT else f" ({signal.Signals(signum).name})"
    assert err.decode() == f"kkmeans: interrupted{name}\n"
    assert sorted(os.listdir(tmp_path)) == ["labels.fifo", "m.npz", "x.npy"]
    assert _group_gone(proc.pid), "a worker process outlived the command"


def test_a_scheduler_that_goes_away_is_one_line(tmp_path):
    cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host=LOOPBACK,
                           dashboard_address=f"{LOOPBACK}:0", silence_logs=50)
    try:
        np.save(tmp_path / "x.npy", np.random.default_rng(4).normal(size=(300_000, 4)))
        proc = _start(["fit", "x.npy", "-k", "4", *NYSTROEM, "-o", "m.npz", "--scheduler",
                       cluster.scheduler_address, "--chunk-rows", "2048"], tmp_path)
        _wait_for_line(proc, "Dask cluster tcp://127.0.0.1:")
        time.sleep(0.5)
    finally:
        cluster.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    lines = err.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"kkmeans: error: the Dask cluster at {cluster.scheduler_address} went away during the "
        f"run"), err
    assert sorted(os.listdir(tmp_path)) == ["x.npy"]


def test_ctrl_c_on_a_running_scheduler_is_one_line(client, tmp_path):
    np.save(tmp_path / "x.npy", np.random.default_rng(5).normal(size=(300_000, 4)))
    proc = _start(["fit", "x.npy", "-k", "4", *NYSTROEM, "-o", "m.npz", "--scheduler",
                   client.scheduler.address, "--chunk-rows", "2048"], tmp_path)
    _wait_for_line(proc, "Dask cluster tcp://127.0.0.1:")
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.decode() == "kkmeans: interrupted\n"
    assert sorted(os.listdir(tmp_path)) == ["x.npy"]


def test_a_full_stdout_on_a_cluster_leaves_no_file(client, tmp_path):
    """The cluster's predict writes its labels through the same commit as one process."""
    _points(tmp_path)
    result = run(["fit", tmp_path / "x.npy", "-k", "3", *NYSTROEM, "-o", tmp_path / "m.npz",
                  "-q", "--labels", "/dev/null"])
    assert result.exit_code == 0
    (tmp_path / "old.txt").write_text("OLD\n")
    line = (f"{' '.join(kkmeans_command())} predict m.npz x.npy --scheduler "
            f"{client.scheduler.address} -q > /dev/full")
    proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1
    assert proc.stderr == ("kkmeans: error: cannot write the labels to standard output: No "
                           "space left on device\n")
    assert sorted(os.listdir(tmp_path)) == ["m.npz", "old.txt", "x.npy"]
    if sys.platform == "linux":  # and a reader that goes away: 141, nothing said
        proc = subprocess.Popen(kkmeans_command() + ["predict", "m.npz", "x.npy", "--scheduler",
                                                     client.scheduler.address, "-q"],
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdout.close()
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 141 and err == b""


# -- 14 on a cluster: the model's columns by name; the names a cluster fit stores -------------
def _named(path, names, X):
    with open(path, "w") as f:
        f.write(",".join(names) + "\n")
        for row in X:
            f.write(",".join("" if np.isnan(v) else repr(float(v)) for v in row) + "\n")


@pytest.fixture
def abc_model(tmp_path):
    X = np.random.default_rng(8).normal(size=(300, 3)) + np.repeat(np.eye(3) * 6, 100, axis=0)
    _named(tmp_path / "abc.csv", ["a", "b", "c"], X)
    result = run(["fit", tmp_path / "abc.csv", "-k", "3", *NYSTROEM, "-o", tmp_path / "m.npz",
                  "--labels", tmp_path / "fit.txt", "-q"])
    assert result.exit_code == 0, result.stderr
    return tmp_path, X, (tmp_path / "fit.txt").read_text()


@pytest.mark.parametrize("names", [["c", "b", "a"], ["x", "c", "a", "b"]])
def test_predict_on_a_cluster_takes_the_model_columns_by_name(client, abc_model, names):
    tmp, X, expected = abc_model
    order = {"a": 0, "b": 1, "c": 2}
    x = np.where(np.arange(X.shape[0]) == 7, np.nan, 1.0)  # unused by the model
    cols = np.column_stack([X[:, order[n]] if n in order else x for n in names])
    (tmp / "parts").mkdir()
    _named(tmp / "new.csv", names, cols)
    _named(tmp / "parts" / "p1.csv", names, cols[:120])
    _named(tmp / "parts" / "p2.csv", names, cols[120:])
    for data in (tmp / "new.csv", tmp / "parts" / "*.csv"):
        result = run(["predict", tmp / "m.npz", data, "--scheduler", client.scheduler.address])
        assert result.exit_code == 0, result.stderr
        assert result.stdout == expected
        assert "columns:       a, b, c (the model's, taken by name)" in result.stderr


def test_predict_on_a_cluster_refuses_a_missing_column_as_one_process_does(client, abc_model):
    tmp, X, _ = abc_model
    _named(tmp / "new.csv", ["c", "b", "z"], X[:, ::-1])
    args = ["predict", tmp / "m.npz", tmp / "new.csv", "--labels", tmp / "new.txt", "-q"]
    one = run(args)
    dask = run(args + ["--scheduler", client.scheduler.address])
    assert one.exit_code == 1 and "has no column 'a' of the model" in one.stderr
    assert dask.exit_code == 1 and dask.stderr == one.stderr
    assert not (tmp / "new.txt").exists()
    # beside a text column, which stops the first read: the model's column is still named
    with open(tmp / "text.csv", "w") as f:
        f.write("s,b,a\n" + "".join(f"p{i},{r[1]!r},{r[0]!r}\n" for i, r in enumerate(X)))
    args[2] = tmp / "text.csv"
    one, dask = run(args), run(args + ["--scheduler", client.scheduler.address])
    assert one.exit_code == 1 and "has no column 'c' of the model" in one.stderr
    assert dask.exit_code == 1 and dask.stderr == one.stderr
    assert not (tmp / "new.txt").exists()


def test_a_cluster_fit_stores_the_column_names_and_checks_the_parts(client, abc_model):
    tmp, X, expected = abc_model
    (tmp / "parts").mkdir()
    _named(tmp / "parts" / "p1.csv", ["a", "b", "c"], X[:150])
    _named(tmp / "parts" / "p2.csv", ["a", "b", "c"], X[150:])
    result = run(["fit", tmp / "parts" / "*.csv", "-k", "3", *NYSTROEM, "-o", tmp / "d.npz",
                  "--scheduler", client.scheduler.address, "-q", "--labels", "/dev/null"])
    assert result.exit_code == 0, result.stderr
    assert "features:      3 (a, b, c)" in run(["info", tmp / "d.npz"]).stdout
    _named(tmp / "parts" / "p2.csv", ["a", "c", "b"], X[150:])
    args = ["fit", tmp / "parts" / "*.csv", "-k", "3", *NYSTROEM, "-o", tmp / "e.npz", "-q"]
    one = run(args)
    dask = run(args + ["--scheduler", client.scheduler.address])
    assert one.exit_code == dask.exit_code == 1
    assert dask.stderr == one.stderr == (
        f"kkmeans: error: {tmp / 'parts' / 'p2.csv'}: its columns are a, c, b; "
        f"{tmp / 'parts' / 'p1.csv'} has a, b, c; every file of {tmp / 'parts' / '*.csv'} "
        f"needs the same columns\n")
    assert not (tmp / "e.npz").exists()


def test_the_cluster_report_gives_the_workers_threads(client, tmp_path):
    """The time line of a cluster fit counts the workers' threads, not this process's (its
    --threads does not apply there)."""
    _points(tmp_path)
    result = run(["fit", tmp_path / "x.npy", "-k", "3", *NYSTROEM, "--no-model",
                  "--labels", "/dev/null", "--scheduler", client.scheduler.address])
    assert result.exit_code == 0, result.stderr
    assert result.stderr.rstrip().endswith(" s (on 1 Dask worker, 1 thread in all)")
    assert "of 2 threads" not in result.stderr


@pytest.mark.parametrize("kind", ["truncated", "1-D", "objects", "npz", "not npy"])
def test_a_bad_npy_file_on_a_cluster_is_said_as_in_one_process(client, tmp_path, kind):
    path = tmp_path / "x.npy"
    if kind == "truncated":
        np.save(path, np.ones((450, 3)))
        path.write_bytes(path.read_bytes()[:1000])
    elif kind == "1-D":
        np.save(path, np.ones(10))
    elif kind == "objects":
        np.save(path, np.array([[1, None]], dtype=object), allow_pickle=True)
    elif kind == "npz":
        np.savez(tmp_path / "z.npz", x=np.ones((3, 3)))
        os.replace(tmp_path / "z.npz", path)
    else:
        path.write_bytes(b"hello world")
    args = ["fit", path, "-k", "3", *NYSTROEM, "-o", tmp_path / "m.npz", "-q"]
    one = run(args)
    dask = run(args + ["--scheduler", client.scheduler.address])
    _one_line(one, 1, str(path))
    assert dask.exit_code == 1 and dask.stderr == one.stderr
    assert os.listdir(tmp_path) == ["x.npy"]


def test_predict_on_a_cluster_locates_a_value_out_of_range_as_one_process(client, tmp_path):
    """A value too large for the kernel in the third chunk: the row in the whole data, from
    1, with DATA's name (the workers said 'X row 404, column 1' of their chunk)."""
    _points(tmp_path)
    result = run(["fit", tmp_path / "x.npy", "-k", "3", *NYSTROEM, "-o", tmp_path / "m.npz",
                  "-q", "--labels", "/dev/null"])
    assert result.exit_code == 0
    X = np.random.default_rng(2).normal(size=(5000, 3))
    X[4500, 1] = 1e200
    np.save(tmp_path / "new.npy", X)
    args = ["predict", tmp_path / "m.npz", tmp_path / "new.npy", "--labels", tmp_path / "l.txt",
            "-q"]
    one = run(args)
    dask = run(args + ["--scheduler", client.scheduler.address, "--chunk-rows", "1024"])
    _one_line(one, 1, f"{tmp_path / 'new.npy'}: row 4501, column 2: the value 1e+200 is too "
                      f"large")
    assert dask.exit_code == 1 and dask.stderr == one.stderr
    assert sorted(os.listdir(tmp_path)) == ["m.npz", "new.npy", "x.npy"]


@pytest.mark.parametrize("data, columns, needle", [
    ("x.npy", "5", "index 5 is out of range; x.npy has 3 columns (0-based indexes 0..2)"),
    ("x.npy", "0,0", "column '0' is listed twice; each column can be used once"),
    ("x.npy", "x", "'x' is a name but x.npy is an array, whose columns have no names"),
    ("x.csv", "z", "--columns: x.csv has no column 'z'; its columns are a, b, c"),
    ("dup.csv", "a", "--columns: dup.csv has 2 columns named 'a' (0-based indexes 0, 2)"),
])
def test_bad_columns_on_a_cluster_are_said_as_in_one_process(client, tmp_path, monkeypatch,
                                                             data, columns, needle):
    """A cluster read an array's column twice where one process refuses it, worded its
    --columns errors otherwise, and named a text file by the absolute path its worker read
    instead of DATA as given."""
    monkeypatch.chdir(tmp_path)
    X = _points(tmp_path)
    for name, header in (("x.csv", "a,b,c"), ("dup.csv", "a,b,a")):
        with open(name, "w") as f:
            f.write(header + "\n" + "".join(",".join(map(repr, row)) + "\n" for row in X))
    args = ["fit", data, "--columns", columns, "-k", "3", *NYSTROEM, "-o", "m.npz", "-q"]
    one = run(args)
    dask = run(args + ["--scheduler", client.scheduler.address])
    _one_line(one, 2, needle)
    assert dask.exit_code == 2 and dask.stderr == one.stderr
    assert sorted(os.listdir(tmp_path)) == ["dup.csv", "x.csv", "x.npy"]
