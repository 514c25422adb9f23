"""Plain helpers of the tests: running ``kkmeans``, the data the tests make, and the checks
every refusal shares. Fixtures are in ``conftest.py``, brute-force NumPy references in
``reference.py`` (tests/README.md says which file is the home of which test)."""
import os
import shutil
import signal
import subprocess
import sys

import numpy as np
from click.testing import CliRunner

from kkmeans_cli.cli import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# One thread keeps the tests quick on a busy 2-core machine; results do not depend on it.
FAST = ["--threads", "1", "--n-init", "3"]
# What an existing output file holds before a command that must leave it alone.
OLD = b"OLD CONTENT\n"


# -- running kkmeans --------------------------------------------------------------------------
def kkmeans_command():
    """``kkmeans`` on PATH, else ``python -m kkmeans_cli``."""
    exe = shutil.which("kkmeans")
    return [exe] if exe else [sys.executable, "-m", "kkmeans_cli"]


#: The signals a test sends; a child starts with their default actions whatever pytest's were
#: (a background job or ``nohup`` starts pytest with SIGINT, SIGQUIT or SIGHUP ignored, and an
#: ignored disposition survives exec: kkmeans rightly keeps it, and the test's signal is lost).
TEST_SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM)


def start_kkmeans(args, cwd, preexec_fn=None, **kwargs):
    """``kkmeans ARGS`` as a child process with the default action for every signal a test
    sends (then ``preexec_fn``, e.g. one that ignores a signal as ``nohup`` would)."""
    def child():
        for signum in TEST_SIGNALS:
            signal.signal(signum, signal.SIG_DFL)
        if preexec_fn is not None:
            preexec_fn()
    return subprocess.Popen(kkmeans_command() + [str(a) for a in args], cwd=cwd,
                            preexec_fn=child, **kwargs)


def run(args, input=None, env=None):
    """Run ``kkmeans ARGS`` in-process through click's CliRunner (stdout and stderr apart)."""
    return CliRunner().invoke(cli, [str(a) for a in args], input=input, env=env,
                              catch_exceptions=False)


def run_process(args, cwd, input=None, env=None):
    """Run ``kkmeans ARGS`` as a real subprocess."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run(kkmeans_command() + [str(a) for a in args], cwd=cwd, input=input,
                          capture_output=True, text=True, env=full_env, timeout=120)


def run_shell(line, cwd):
    """Run a shell line in bash where ``kkmeans`` is the installed command."""
    exe = shutil.which("kkmeans")
    prefix = "" if exe else f'kkmeans() {{ "{sys.executable}" -m kkmeans_cli "$@"; }}\n'
    return subprocess.run(["bash", "-o", "pipefail", "-c", prefix + line], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


# -- data -------------------------------------------------------------------------------------
def blobs(n=60, d=2, k=3, seed=0):
    """Well-separated blobs (centres uniform in [-10, 10], spread 0.5, labels i mod k, rounded
    to 4 decimals) and their true labels."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-10, 10, size=(k, d))
    y = np.arange(n) % k
    X = centres[y] + rng.normal(scale=0.5, size=(n, d))
    return np.round(X, 4), y


def sklearn_blobs(n, d=3, k=3, seed=0, std=1.5, positive=False):
    """scikit-learn's ``make_blobs`` (k centres, spread ``std``) and its labels; |X| when
    ``positive`` (chi2 wants non-negative data)."""
    from sklearn.datasets import make_blobs

    X, y = make_blobs(n, n_features=d, centers=k, cluster_std=std, random_state=seed)
    return (np.abs(X) if positive else X), y


def gaussian(n, d, seed=0, positive=False, decimals=None):
    """Standard normal noise, no clusters; |X| when ``positive``; rounded to ``decimals`` when
    given (so a text file holds the values exactly)."""
    X = np.random.default_rng(seed).normal(size=(n, d))
    X = np.abs(X) if positive else X
    return X if decimals is None else np.round(X, decimals)


def mixture(n, d, k, seed=0, box=8.0, std=1.0):
    """A Gaussian mixture: k centres uniform in [-box, box]^d, each point from a centre drawn at
    random, spread ``std`` (clusters may overlap or be empty)."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-box, box, size=(k, d))
    return centres[rng.integers(0, k, size=n)] + rng.normal(scale=std, size=(n, d))


def three_rings(n, noise, seed):
    """(X, y): three concentric rings (radii 1, ⅔, ⅓; n/3 points each at uniform angles,
    Gaussian noise of standard deviation ``noise``), standardized; the draws of
    ``benchmarks/bench_graph.py``'s rings."""
    rng = np.random.RandomState(seed)
    X = []
    for radius in (1.0, 2 / 3, 1 / 3):
        t = rng.uniform(0, 2 * np.pi, n // 3)
        X.append(radius * np.c_[np.cos(t), np.sin(t)]
                 + rng.normal(scale=noise, size=(n // 3, 2)))
    X = np.vstack(X)
    return (X - X.mean(axis=0)) / X.std(axis=0), np.repeat(np.arange(3), n // 3)


def square_grid(side, copies=1):
    """Points of a square grid (every distance ties with many others), each ``copies`` times."""
    g = np.arange(side, dtype=float)
    return np.repeat(np.array([(x, y) for x in g for y in g]), copies, axis=0)


# -- files ------------------------------------------------------------------------------------
def write_csv(path, X, header=True, delimiter=",", fmt="%.4f"):
    """Write X as delimited text: a header line x0,x1,... when ``header`` is True, those names
    when it is a sequence of names, none when False; each value as ``fmt``."""
    with open(path, "w") as f:
        if header is True:
            f.write(delimiter.join(f"x{j}" for j in range(X.shape[1])) + "\n")
        elif header:
            f.write(delimiter.join(header) + "\n")
        for row in X:
            f.write(delimiter.join(fmt % v for v in row) + "\n")
    return str(path)


def labels_of(text):
    """Labels printed one per line."""
    return np.array([int(line) for line in text.split()])


def listing(folder):
    """The names in a folder, sorted."""
    return sorted(os.listdir(folder))


# -- refusals ---------------------------------------------------------------------------------
def assert_one_error_line(result, *needles, code=None):
    """A refusal: stderr is one ``kkmeans: error:`` line holding every needle, with no
    traceback, no "unexpected" error and no warning; nothing on stdout; the exit code ``code``
    when given (of ``run`` or ``run_process``). Returns the line."""
    if code is not None:
        exit_code = result.returncode if hasattr(result, "returncode") else result.exit_code
        assert exit_code == code, result.stderr
    assert result.stdout == "", result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kkmeans: error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert "Traceback" not in result.stderr and "unexpected" not in result.stderr
    assert "Warning" not in result.stderr
    return lines[0]


LOOPBACK = "127.0.0.1"


def loopback_cluster(n_workers):
    """A Dask LocalCluster of single-threaded worker processes on the loopback interface and
    a client of it, for a module-scoped fixture: ``yield from loopback_cluster(2)``."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                           host=LOOPBACK, dashboard_address=f"{LOOPBACK}:0", silence_logs=50)
    client = Client(cluster, set_as_default=False)
    try:
        yield client
    finally:
        client.close()
        cluster.close()
