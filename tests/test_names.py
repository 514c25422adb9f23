"""Names in the words: every module, function or file that a docstring, a comment, the README
or docs/ names exists, so the words follow the code when it moves.

Three forms are resolved: dotted names from the package root (``kkmeans_cli.model.params``),
Python files (``engine/lloyd.py``, ``lloyd.py``, ``benchmarks/bench_fit.py``) and, in double
backquotes, a module's short name and one of its attributes (``functions.check_range``).
Cython sources are named by the module they build, so they are not checked as files here.
"""
import ast
import importlib
import importlib.util
import re
from pathlib import Path

import kkmeans_cli

PACKAGE = Path(kkmeans_cli.__file__).parent
ROOT = PACKAGE.parent
EXT = ROOT / "ext"

DOTTED = re.compile(r"\bkkmeans_cli(?:\.[A-Za-z_]\w*)+")
PYFILE = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[\w-]+\.py)\b")
SHORT = re.compile(r"``([a-z_]\w*)\.([A-Za-z_]\w*)(?:\.\w+)*(?:\(\))?``")
#: Short names that are also the names of other libraries (Dask's ``distributed``).
AMBIGUOUS = {"distributed"}


def _texts():
    """(where, text) of every docstring and comment of the package, the README and docs/."""
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                 ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    yield f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 1)}", doc
        for i, line in enumerate(source.split("\n"), 1):
            if "#" in line:
                yield f"{path.relative_to(ROOT)}:{i}", line[line.index("#"):]
    for path in sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]:
        yield str(path.relative_to(ROOT)), path.read_text()


def _python_files():
    files = list(PACKAGE.rglob("*.py")) + list((ROOT / "tests").glob("*.py"))
    return files + list((ROOT / "benchmarks").glob("*.py")) + [ROOT / "setup.py"]


def _module_names():
    """Short name → dotted names of the package's modules (Python, and Cython built from
    ``ext/``: ext/engine/_lloyd.pyx is kkmeans_cli.engine._lloyd)."""
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.setdefault(parts[-1], []).append(".".join(parts))
    for path in EXT.rglob("*.pyx"):
        parts = ["kkmeans_cli"] + list(path.relative_to(EXT).with_suffix("").parts)
        names.setdefault(parts[-1], []).append(".".join(parts))
    return names


def _resolves(dotted):
    """Whether ``dotted`` is a module of the package or an attribute of one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _has(module, attr):
    obj = importlib.import_module(module)
    return hasattr(obj, attr) or (hasattr(obj, "__path__") and importlib.util.find_spec(
        f"{module}.{attr}") is not None)


def test_dotted_names_resolve():
    stale = sorted({(where, m.group(0)) for where, text in _texts()
                    for m in DOTTED.finditer(text) if not _resolves(m.group(0))})
    assert stale == [], "\n".join(f"{where}: {name}" for where, name in stale)


def test_python_files_named_exist():
    names = {path.name for path in _python_files()}

    def exists(path):
        if "/" not in path:
            return path in names
        return (ROOT / path).exists() or (PACKAGE / path).exists()

    stale = sorted({(where, m.group(1)) for where, text in _texts()
                    for m in PYFILE.finditer(text) if not exists(m.group(1))})
    assert stale == [], "\n".join(f"{where}: {name}" for where, name in stale)


def test_short_module_names_resolve():
    """``module.attribute`` in double backquotes, where ``module`` is a module of the package:
    the attribute exists (fitted attributes such as ``estimator.kernel_`` and file names such
    as ``_hartigan.pyx`` are not module attributes and are left alone)."""
    modules = _module_names()
    stale = set()
    for where, text in _texts():
        for m in SHORT.finditer(text):
            module, attr = m.group(1), m.group(2)
            if (module not in modules or module in AMBIGUOUS or attr.endswith("_")
                    or attr in ("py", "pyx", "pxd", "h")):
                continue
            if not any(_has(full, attr) for full in modules[module]):
                stale.add((where, m.group(0)))
    assert sorted(stale) == [], "\n".join(f"{where}: {name}" for where, name in sorted(stale))


def test_the_checks_see_names():
    """The checks would pass vacuously if nothing were found: they find known names."""
    texts = "\n".join(text for _, text in _texts())
    assert "kkmeans_cli.model.estimator.KernelKMeans" in {
        m.group(0) for m in DOTTED.finditer(texts)}
    assert "engine/lloyd.py" in {m.group(1) for m in PYFILE.finditer(texts)}
    assert not _resolves("kkmeans_cli.params.validate_params")
    assert _resolves("kkmeans_cli.model.params.validate_params")


def _layout_rows(text):
    """{first cell: row} of the README's layout table (rows whose path cell names a folder of
    the package or of ext/, or top-level modules)."""
    rows = {}
    for line in text.split("\n"):
        if line.startswith("| `kkmeans_cli/") or line.startswith("| `ext/"):
            first = line.split("|")[1]
            rows[first] = line
    return rows


def _modules():
    """(folder, file name) of every module and compiled source a newcomer meets: the package's
    Python modules (``__init__``/``__main__``/``_version`` aside) and ext/'s sources."""
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name in ("__init__.py", "__main__.py", "_version.py"):
            continue
        yield path.parent.relative_to(ROOT).as_posix(), path.name
    for path in sorted(EXT.rglob("*")):
        if path.suffix in (".pyx", ".pxd", ".h"):
            yield path.parent.relative_to(ROOT).as_posix(), path.name


def test_the_readme_layout_table_names_every_module():
    """Every module sits in the README layout table's row of its folder (top-level modules in
    the row that names them), so the table a newcomer reads first follows the code."""
    rows = _layout_rows((ROOT / "README.md").read_text())
    missing = []
    for folder, name in _modules():
        if folder == "kkmeans_cli":
            found = any(f"`{name}`" in row or f"`kkmeans_cli/{name}`" in row
                        for row in rows.values())
        else:
            found = any(f"`{name}`" in row for first, row in rows.items()
                        if f"`{folder}/`" in first)
        if not found:
            missing.append(f"{folder}/{name}")
    assert not missing, f"not in the README's layout table: {missing}"


def test_the_architecture_document_names_every_module():
    """docs/architecture.md's layout lists every module and compiled source."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    missing = [f"{folder}/{name}" for folder, name in _modules()
               if not re.search(rf"(?<![\w.]){re.escape(name)}\b", text)]
    assert not missing, f"not in docs/architecture.md: {missing}"
