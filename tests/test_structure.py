"""The package's import structure: no cycles, no private names across modules, a fast --help.

The graph counts every import, also the ones inside functions (a cycle through a deferred
import is still a cycle: it only moves the failure to run time). Cython extension modules
(``_lloyd``, ``_elkan``, ...) are private modules of their subpackage; importing them from a
sibling subpackage is allowed, importing a private *name* out of another module is not. Their
sources are under ``ext/``, one folder per stage: ``ext/engine/_lloyd.pyx`` is the module
``kkmeans_cli.engine._lloyd`` (docs/architecture.md).
"""
import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kkmeans_cli

PACKAGE = Path(kkmeans_cli.__file__).parent
EXT = Path(__file__).resolve().parent.parent / "ext"
ROOT = "kkmeans_cli"


def _modules():
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join([ROOT] + parts)
        mods[name] = path
    return mods


def _extension_modules():
    """Modules built from ``ext/`` (ext/engine/_lloyd.pyx is kkmeans_cli.engine._lloyd)."""
    names = set()
    for path in EXT.rglob("*.pyx"):
        rel = path.relative_to(EXT).with_suffix("")
        names.add(".".join([ROOT] + list(rel.parts)))
    return names


def _resolve(module, path, node):
    """Absolute name of the module a ``from ... import`` reads from."""
    if node.level == 0:
        return node.module or ""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    parts = package.split(".")
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    base = ".".join(parts)
    return f"{base}.{node.module}" if node.module else base


def _imports(mods, extensions):
    """(edges, private) where edges maps a module to the package modules it imports."""
    known = set(mods) | extensions
    edges = {m: set() for m in mods}
    private = []
    for module, path in mods.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith(ROOT) and alias.name in known:
                        edges[module].add(alias.name)
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(module, path, node)
                if not source.startswith(ROOT):
                    continue
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    if sub in known:  # a submodule
                        edges[module].add(sub)
                        continue
                    edges[module].add(source)
                    if (alias.name.startswith("_") and not alias.name.startswith("__")
                            and source != module):
                        private.append(f"{module} imports {alias.name} from {source}")
    return edges, private


def _cycles(edges):
    """Every elementary cycle found by depth-first search (each reported once)."""
    found, state = [], {}

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in edges:
                continue
            if state.get(nxt) == 1:
                found.append(stack[stack.index(nxt):] + [nxt])
            elif state.get(nxt) is None:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if state.get(node) is None:
            visit(node, [])
    return found


def _package_edges(edges):
    """The same graph without the edges from a package's ``__init__`` to its own modules and
    from a module to the package that contains it (re-exports, not dependencies)."""
    out = {}
    for module, targets in edges.items():
        out[module] = {t for t in targets
                       if not t.startswith(module + ".") and not module.startswith(t + ".")}
    return out


def test_no_import_cycles():
    mods = _modules()
    edges, _ = _imports(mods, _extension_modules())
    cycles = _cycles(_package_edges(edges))
    assert cycles == [], "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_private_names_across_modules():
    mods = _modules()
    _, private = _imports(mods, _extension_modules())
    assert private == [], "\n".join(private)


def test_the_graph_is_read_correctly():
    """The checks above would pass vacuously if the parser saw no imports: it sees known ones."""
    mods = _modules()
    edges, _ = _imports(mods, _extension_modules())
    assert "kkmeans_cli.engine._lloyd" in edges["kkmeans_cli.engine.lloyd"]
    assert "kkmeans_cli.errors" in edges["kkmeans_cli.kernels.psd"]
    assert "kkmeans_cli.model.estimator" in edges["kkmeans_cli.cli.fit"]
    # and the cycle finder finds a planted cycle
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_every_ext_source_is_built_to_its_package_module():
    """Each source under ext/ is compiled to the module of its stage in the package (setup.py),
    and no Cython source is left in the package."""
    names = _extension_modules()
    assert "kkmeans_cli.engine._lloyd" in names and "kkmeans_cli.measures._silhouette" in names
    for name in sorted(names):
        module = importlib.import_module(name)
        assert Path(module.__file__).parent == PACKAGE.joinpath(*name.split(".")[1:-1]), name
    assert list(PACKAGE.rglob("*.pyx")) == [] and list(PACKAGE.rglob("*.pxd")) == []


def test_help_imports_no_numerical_stack():
    """``kkmeans --help`` stays quick: it loads neither NumPy nor scikit-learn nor the engine."""
    code = (
        "import sys\n"
        "from kkmeans_cli.cli import cli\n"
        "try:\n"
        "    cli.main(['--help'], standalone_mode=False)\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('numpy', 'scipy', 'sklearn', 'dask', 'h5py', 'matplotlib'))\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    env = dict(os.environ)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "HEAVY []" in res.stderr, res.stderr


@pytest.mark.parametrize("approx", ["none", "nystroem"])
def test_predict_and_info_import_no_scikit_learn(tmp_path, approx):
    """``kkmeans predict`` and ``kkmeans info`` of a model file load neither scikit-learn nor
    SciPy (for an exact model; the Nyström engine's products use SciPy's BLAS) nor the other
    libraries they do not need, and predict gives the estimator's labels. Measured in a
    subprocess of the real command, with ``-X importtime``."""
    from helpers import blobs, run, write_csv

    X, _ = blobs(n=300, d=3, k=3)
    data = write_csv(tmp_path / "X.csv", X)
    fitted = run(["fit", data, "-k", "3", "-o", tmp_path / "m.npz", "--approx", approx, "-q",
                  "--threads", "1", "--n-init", "2"])
    assert fitted.exit_code == 0, fitted.stderr
    never = {"sklearn", "pandas", "h5py", "matplotlib", "dask", "pyarrow", "rich"}
    if approx == "none":
        never |= {"scipy"}
    for args in (["predict", "m.npz", "X.csv"], ["info", "m.npz"]):
        res = subprocess.run([sys.executable, "-X", "importtime", "-m", "kkmeans_cli", *args],
                             capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert res.returncode == 0, res.stderr
        imported = {line.split("|")[-1].strip().split(".")[0]
                    for line in res.stderr.splitlines() if line.startswith("import time:")}
        assert "numpy" in imported or args[0] == "info"
        assert not imported & never, (args, sorted(imported & never))
    predicted = subprocess.run([sys.executable, "-m", "kkmeans_cli", "predict", "m.npz",
                                "X.csv"], capture_output=True, text=True, cwd=tmp_path,
                               timeout=120)
    assert predicted.stdout == fitted.stdout
