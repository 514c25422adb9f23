"""Helpers of the command-line tests: small data files and two ways of running ``kkmeans``."""
import os
import shutil
import subprocess
import sys

import numpy as np
from click.testing import CliRunner

from kkmeans_cli.cli import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# One thread keeps the tests quick on a busy 2-core machine; results do not depend on it.
FAST = ["--threads", "1", "--n-init", "3"]


def kkmeans_command():
    """``kkmeans`` on PATH, else ``python -m kkmeans_cli``."""
    exe = shutil.which("kkmeans")
    return [exe] if exe else [sys.executable, "-m", "kkmeans_cli"]


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


def blobs(n=60, d=2, k=3, seed=0):
    """Well-separated blobs and their true labels."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-10, 10, size=(k, d))
    y = np.arange(n) % k
    X = centres[y] + rng.normal(scale=0.5, size=(n, d))
    return np.round(X, 4), y


def write_csv(path, X, header=True, delimiter=","):
    """Write X as delimited text (a header x0,x1,... when asked)."""
    with open(path, "w") as f:
        if header:
            f.write(delimiter.join(f"x{j}" for j in range(X.shape[1])) + "\n")
        for row in X:
            f.write(delimiter.join(f"{v:.4f}" for v in row) + "\n")
    return str(path)


def labels_of(text):
    """Labels printed one per line."""
    return np.array([int(line) for line in text.split()])
