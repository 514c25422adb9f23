"""The README's examples are what the program prints.

Every ```` ```console ```` block of README.md is a sequence of ``$ command`` lines, each followed
by the output it shows. The commands run in order, in bash, in a copy of ``examples/`` and
``configs/`` (``kkmeans`` is this package), with stderr and stdout together as a terminal shows
them, and each output is compared with the README's. The README states the only differences
allowed: ``…`` stands for text left out (a line of its own: any number of lines; inside a line:
any text), timings may differ (a number followed by `` s`` and the sweep table's ``s`` column),
runs of spaces compare equal, and an engine built without OpenMP names itself where the README
shows ``1 of 2 threads: fewer than 2,000 points``. The prose claims about the bundled moons are
checked below too.
"""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import reference as ref
from helpers import ROOT
from kkmeans_cli import KernelKMeans
from kkmeans_cli.engine import _openmp

README = os.path.join(ROOT, "README.md")
ELLIPSIS = "…"
THREADS_SHOWN = "1 of 2 threads: fewer than 2,000 points"
THREADS_SERIAL = "1 thread: engine built without OpenMP"
_TIMING = re.compile(r"\b\d+(?:\.\d+)?(?:e[-+]?\d+)? s\b")
# A row of the sweep table: [*] k inertia silhouette simpl-sil CH DB iter seconds, or on a
# graph [*][^] k objective ncut cut-ratio silhouette eigengap iter seconds
_SWEEP_ROW = re.compile(r"^((?:[*^]+ )?\d+(?: \S+){6}) \d+\.\d+$")


def console_blocks(text):
    """[(line number, [(command, [expected output lines])])] of the ```console blocks."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        if lines[i].strip() != "```console":
            i += 1
            continue
        start, i, steps = i + 1, i + 1, []
        while lines[i].strip() != "```":
            line = lines[i]
            if line.startswith("$ "):
                steps.append((line[2:], []))
            else:
                assert steps, f"README.md line {i + 1}: output before any $ command"
                steps[-1][1].append(line)
            i += 1
        blocks.append((start, [(cmd, _trim(out)) for cmd, out in steps]))
        i += 1
    return blocks


def _trim(lines):
    lines = list(lines)
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def normalise(line):
    """Runs of spaces as one, no spaces at the ends, timings as ``<t>``."""
    line = " ".join(line.split())
    match = _SWEEP_ROW.match(line)
    if match:
        line = match.group(1) + " <t>"
    return _TIMING.sub("<t> s", line)


def _line_matches(expected, actual):
    if ELLIPSIS not in expected:
        return expected == actual
    pattern = ".*".join(re.escape(part) for part in expected.split(ELLIPSIS))
    return re.fullmatch(pattern, actual) is not None


def output_matches(expected, actual):
    """Whether the actual lines match the expected ones, a line ``…`` matching any number of
    lines (0 or more)."""
    expected = [normalise(line) for line in expected]
    actual = [normalise(line) for line in actual]

    def match(i, j):
        if i == len(expected):
            return j == len(actual)
        if expected[i] == ELLIPSIS:
            return any(match(i + 1, jj) for jj in range(j, len(actual) + 1))
        return j < len(actual) and _line_matches(expected[i], actual[j]) and match(i + 1, j + 1)

    return match(0, 0)


@pytest.fixture(scope="module")
def readme_text():
    with open(README, encoding="utf-8") as f:
        return f.read()


def test_the_readme_has_checked_examples(readme_text):
    blocks = console_blocks(readme_text)
    commands = [cmd for _, steps in blocks for cmd, _ in steps]
    assert len(blocks) >= 5 and len(commands) >= 9
    for needed in ("kkmeans fit", "kkmeans predict", "kkmeans sweep", "kkmeans info",
                   "--with-data", "--psd-repair lingoes", "--memory-limit"):
        assert any(needed in cmd for cmd in commands), needed


def test_the_matcher_is_strict_where_it_should_be():
    assert output_matches(["a  b", "time: kernel matrix 0.003 s"],
                          ["a b", "time: kernel matrix 1.5 s"])
    assert not output_matches(["0", "0", "2"], ["2", "2", "1"])
    assert output_matches(["x", ELLIPSIS], ["x", "y", "z"])
    assert output_matches(["x", ELLIPSIS], ["x"])
    assert not output_matches(["x", ELLIPSIS, "w"], ["x", "y", "z"])
    assert output_matches(["2,73.0…,0.38…"], ["2,73.0299,0.3813"])
    assert not output_matches(["2,73.0…,0.38…"], ["2,74.0299,0.3813"])
    row = " *   4     19.19       0.5814      0.6903     472   0.6238      1   0.03"
    assert output_matches([row], [row.replace("0.03", "12.50")])
    assert not output_matches([row], [row.replace("   1   0.03", "   2   0.03")])


def test_readme_examples_print_what_the_readme_shows(readme_text, tmp_path):
    for folder in ("examples", "configs"):
        shutil.copytree(os.path.join(ROOT, folder), tmp_path / folder)
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(
        sys.modules["kkmeans_cli"].__file__)))
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("KKMEANS_", "_KKMEANS_"))}
    env.update(OMP_NUM_THREADS="2", COLUMNS="80", PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(filter(None, [package_parent,
                                                        env.get("PYTHONPATH")])))
    prelude = (f'kkmeans() {{ "{sys.executable}" -m kkmeans_cli "$@"; }}\n'
               f'python() {{ "{sys.executable}" "$@"; }}\n')
    failures = []
    for start, steps in console_blocks(readme_text):
        for command, expected in steps:
            result = subprocess.run(["bash", "-c", prelude + "{ " + command + "\n} 2>&1"],
                                    cwd=tmp_path, env=env, capture_output=True, text=True,
                                    timeout=600)
            actual = _trim(result.stdout.splitlines())
            if not _openmp.openmp_enabled():
                expected = [line.replace(THREADS_SHOWN, THREADS_SERIAL) for line in expected]
            if not output_matches(expected, actual):
                failures.append(f"README.md block at line {start}: $ {command}\n"
                                f"--- shown\n" + "\n".join(expected) + "\n--- printed\n"
                                + "\n".join(actual))
    assert not failures, "\n\n".join(failures)


# -- the moons paragraph ("Choosing gamma") ----------------------------------------------------
@pytest.fixture(scope="module")
def moons():
    from sklearn.datasets import make_moons

    X = np.loadtxt(os.path.join(ROOT, "examples", "moons.csv"), delimiter=",", skiprows=1)
    Y, y = make_moons(300, noise=0.06, random_state=0)
    np.testing.assert_allclose(X, np.round(Y, 4), atol=1e-12)  # the file's provenance
    return X, y


def _off(labels, truth):
    """Points in the other moon, for the better of the two matchings of k = 2."""
    wrong = int(np.count_nonzero(labels != truth))
    return min(wrong, labels.size - wrong)


def test_moons_at_gamma_20_one_point_from_the_truth_with_a_lower_objective(moons):
    X, y = moons
    est = KernelKMeans(2, kernel="rbf", gamma=20, random_state=0).fit(X)
    assert _off(est.labels_, y) == 1
    K = ref.kernel_matrix(X, X, "rbf", gamma=20)
    found, truth = ref.objective(K, est.labels_), ref.objective(K, y)
    assert (round(found, 3), round(truth, 3)) == (267.739, 267.742)
    cut = KernelKMeans(2, kernel="rbf", gamma=20, init="random", random_state=0).fit(X)
    assert _off(cut.labels_, y) > 50  # random starts: an optimum that cuts the moons across


def test_moons_at_the_median_gamma_are_far_from_the_optimum(moons):
    X, y = moons
    est = KernelKMeans(2, kernel="rbf", random_state=0).fit(X)
    K = ref.kernel_matrix(X, X, "rbf", gamma=est.gamma_)
    assert round(ref.objective(K, y), 1) == 92.5
    assert round(ref.objective(K, est.labels_), 1) == 71.0


@pytest.mark.parametrize("gamma", [20, 50])
def test_moons_the_normalized_cut_recovers_them_exactly(moons, gamma):
    X, y = moons
    est = KernelKMeans(2, kernel="rbf", gamma=gamma, objective="ncut", random_state=0).fit(X)
    assert _off(est.labels_, y) == 0
