"""The package's structure: folders in layers that import downward only, no cycles, no
private names across modules, deferred imports only where declared, a fast --help, and the
estimator's fitted state written in one place (docs/architecture.md).

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

#: The folders in layers, lowest first; "" holds the top-level modules (errors, _options,
#: _text, _version, memory). A module imports only from its own layer and the layers before
#: it, deferred imports included (docs/architecture.md, "The layers").
LAYERS = ("", "io", "engine", "kernels", "measures", "distributed", "model", "cli")
#: The package's entry points, which import the layer they start: ``import kkmeans_cli``
#: (KernelKMeans on first use), ``python -m kkmeans_cli`` and the ``kkmeans`` console
#: script (the command line).
ENTRY_POINTS = ("kkmeans_cli", "kkmeans_cli.__main__", "kkmeans_cli._entry")
#: Function-level imports of package modules outside the command line (where they keep
#: ``kkmeans --help`` from loading NumPy), each with its reason.
DEFERRED_IMPORTS = {
    ("kkmeans_cli", "kkmeans_cli.model.estimator"):
        "KernelKMeans on first use: kkmeans --help never loads NumPy or scikit-learn",
    ("kkmeans_cli._entry", "kkmeans_cli.cli.app"):
        "the command line loaded with Ctrl-C watched: an interrupted import is one line",
    ("kkmeans_cli.model.estimator", "kkmeans_cli.distributed.api"):
        "the Dask route: Dask is imported only when a fit or predict uses a cluster",
    ("kkmeans_cli.io.readers", "kkmeans_cli.memory"):
        "the available memory is read through the module at each call (a test fixes it)",
    ("kkmeans_cli.kernels.nystroem", "kkmeans_cli.engine.features"):
        "the explicit-feature engine loads SciPy's BLAS: only for a Nyström model",
    ("kkmeans_cli.model.model_file", "kkmeans_cli.kernels.nystroem"):
        "the check of a Nyström map: kkmeans predict of an exact model loads no SciPy",
    ("kkmeans_cli.model.model_file", "kkmeans_cli.model.estimator"):
        "LoadedModel.estimator: kkmeans predict and info of a model need no scikit-learn",
}


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


def _imports(mods, extensions, deferred=None):
    """(edges, private) where edges maps a module to the package modules it imports.
    ``deferred``: a list that receives (module, imported module) of every import inside a
    function or class body."""
    known = set(mods) | extensions
    edges = {m: set() for m in mods}
    private = []
    for module, path in mods.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        top = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            found = set()
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith(ROOT) and alias.name in known:
                        found.add(alias.name)
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(module, path, node)
                if not source.startswith(ROOT):
                    continue
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    if sub in known:  # a submodule
                        found.add(sub)
                        continue
                    found.add(source)
                    if (alias.name.startswith("_") and not alias.name.startswith("__")
                            and source != module):
                        private.append(f"{module} imports {alias.name} from {source}")
            edges[module] |= found
            if deferred is not None and id(node) not in top:
                deferred.extend((module, target) for target in found)
    return edges, private


def _layer(module):
    """The layer (index in ``LAYERS``) of a package module: its folder's."""
    parts = module.split(".")
    folder = parts[1] if len(parts) > 1 and (PACKAGE / parts[1]).is_dir() else ""
    return LAYERS.index(folder)


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
        "('numpy', 'scipy', 'sklearn', 'dask', 'h5py', 'matplotlib', 'pynndescent', "
        "'numba'))\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    env = dict(os.environ)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "HEAVY []" in res.stderr, res.stderr


def test_folders_import_downward_only():
    """Every import, deferred ones included, goes to the module's own layer or a lower one:
    no two folders import each other, and io/, engine/, kernels/, measures/ import nothing
    from distributed/, model/ or cli/."""
    mods = _modules()
    edges, _ = _imports(mods, _extension_modules())
    assert {path.parent.name for path in PACKAGE.glob("*/__init__.py")} == set(LAYERS) - {""}
    upward = sorted(f"{module} ({LAYERS[_layer(module)] or 'top level'}) imports {target} "
                    f"({LAYERS[_layer(target)] or 'top level'})"
                    for module, targets in edges.items() if module not in ENTRY_POINTS
                    for target in targets if _layer(target) > _layer(module))
    assert upward == [], "imports against the layers:\n" + "\n".join(upward)


def test_deferred_imports_only_where_declared():
    """Package modules are imported at the top of a module, except in the command line
    (``kkmeans --help`` stays quick) and where ``DEFERRED_IMPORTS`` says why."""
    mods = _modules()
    deferred = []
    _imports(mods, _extension_modules(), deferred)
    found = sorted({(module, target) for module, target in deferred
                    if not module.startswith(f"{ROOT}.cli")})
    assert found == sorted(DEFERRED_IMPORTS), "\n".join(f"{m} imports {t} in a function"
                                                     for m, t in found)


ESTIMATOR_NAMES = ("est", "estimator")


def test_code_below_the_estimator_never_sees_it():
    """No function of io/, engine/, kernels/, measures/ or distributed/ takes the estimator,
    and no module outside model/ reads or writes an estimator's private attributes."""
    below = ("io", "engine", "kernels", "measures", "distributed")
    found = []
    for module, path in _modules().items():
        folder = LAYERS[_layer(module)]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and folder in below:
                names = [a.arg for a in node.args.args + node.args.kwonlyargs]
                found += [f"{module}.{node.name} takes {name}" for name in names
                          if name in ESTIMATOR_NAMES]
            if (isinstance(node, ast.Attribute) and folder != "model"
                    and isinstance(node.value, ast.Name) and node.value.id in ESTIMATOR_NAMES
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                found.append(f"{module} line {node.lineno}: {node.value.id}.{node.attr}")
    assert found == [], "\n".join(found)


def test_fitted_attributes_are_written_in_one_place():
    """Attributes ending in '_' (the fitted state) are assigned only in
    ``KernelKMeans._set_fitted``, which every route (matrix, blocked, lazy, Nyström, Dask,
    a model file) calls with its FitResult."""
    found = []
    for module, path in _modules().items():
        tree = ast.parse(path.read_text(), filename=str(path))
        owner = {}
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    owner.setdefault(id(node), fn.name)
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            for target in targets:
                bound = target.elts if isinstance(target, ast.Tuple) else [target]
                for t in bound:
                    if (isinstance(t, ast.Attribute) and t.attr.endswith("_")
                            and not t.attr.startswith("_")
                            and owner.get(id(node)) != "_set_fitted"):
                        found.append(f"{module} line {node.lineno}: {t.attr}")
    assert found == [], "\n".join(found)


@pytest.mark.parametrize("approx", ["none", "nystroem"])
def test_predict_and_info_import_no_scikit_learn(tmp_path, approx):
    """``kkmeans predict`` and ``kkmeans info`` of a model file load neither scikit-learn nor
    SciPy (for an exact model; the Nyström engine's products use SciPy's BLAS) nor the other
    libraries they do not need, and predict gives the estimator's labels. Measured in a
    subprocess of the real command, with ``-X importtime``."""
    from helpers import blobs, run, write_csv

    X, _ = blobs(n=300, d=3, k=3)
    data = write_csv(tmp_path / "X.csv", X)
    fitted = run(["fit", "--kernel", "rbf", data, "-k", "3", "-o", tmp_path / "m.npz", "--approx", approx, "-q",
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
