"""Build the Cython engine: the sources under ext/, each built to its module in the package.

ext/ is organised by the stage each source serves (ext/engine/, ext/kernels/, ext/measures/,
as the package is: docs/architecture.md); ``ext/engine/_lloyd.pyx`` builds
``kkmeans_cli.engine._lloyd``, so imports name the package module and ``build_ext --inplace``
puts the compiled module beside the Python that drives it.

OpenMP is used when the C compiler accepts it: a tiny OpenMP program is compiled and linked
first. When that fails the extensions are built serially and a warning says so (the results
are identical, only slower).
"""
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import warnings

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

# The modules built, by their name in the package; the source of ``engine._lloyd`` is
# ext/engine/_lloyd.pyx. engine/ (iterations), kernels/ (the kernel matrix), measures/
# (silhouette).
EXT = "ext"
MODULES = [
    "engine._openmp",
    "engine._lloyd",
    "engine._hartigan",
    "engine._elkan",
    "engine._features",
    "engine._graph",
    "engine._mixture",
    "kernels._kernel_matrix",
    "kernels._knn_graph",
    "measures._silhouette",
]

OPENMP_TEST = r"""
#include <omp.h>
int main(void) {
    int n = 0;
    #pragma omp parallel reduction(+:n)
    n += 1;
    return n > 0 ? 0 : 1;
}
"""


def _openmp_flags():
    """Return (compile_args, link_args) for OpenMP, or None when the compiler lacks it."""
    if os.environ.get("KKMEANS_NO_OPENMP"):
        return None
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    cc = cc.split()
    if sys.platform == "darwin":
        candidates = [(["-Xpreprocessor", "-fopenmp"], ["-lomp"])]
    elif sys.platform == "win32":
        return (["/openmp"], [])
    else:
        candidates = [(["-fopenmp"], ["-fopenmp"])]
    tmp = tempfile.mkdtemp()
    try:
        src = os.path.join(tmp, "omp_test.c")
        with open(src, "w") as f:
            f.write(OPENMP_TEST)
        for cflags, lflags in candidates:
            cmd = cc + cflags + [src, "-o", os.path.join(tmp, "omp_test")] + lflags
            try:
                res = subprocess.run(cmd, capture_output=True, timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                continue
            if res.returncode == 0:
                return cflags, lflags
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return None


def _extensions():
    flags = _openmp_flags()
    if flags is None:
        warnings.warn(
            "kkmeans-cli: the C compiler does not support OpenMP; building the engine "
            "serially (same results, one thread).",
            stacklevel=1,
        )
        print("WARNING: building kkmeans-cli without OpenMP (serial engine)", file=sys.stderr)
        cflags, lflags = [], []
    else:
        cflags, lflags = flags
    # -fno-math-errno lets gcc vectorise sqrt (silhouette); no IEEE result changes.
    opt = [] if sys.platform == "win32" else ["-O3", "-fno-math-errno"]
    exts = [
        Extension(
            f"kkmeans_cli.{name}",
            [os.path.join(EXT, *name.split(".")) + ".pyx"],
            # the C headers beside each source (_omp_compat.h, _rbf_sums.h)
            include_dirs=[np.get_include(), os.path.join(EXT, name.split(".")[0])],
            extra_compile_args=opt + cflags,
            extra_link_args=lflags,
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        )
        for name in MODULES
    ]
    return cythonize(
        exts,
        # the .pxd files cimported by name (ext/engine/_common.pxd, ``from _common cimport``)
        include_path=[os.path.join(EXT, "engine")],
        compiler_directives={"language_level": "3", "boundscheck": False,
                             "wraparound": False, "cdivision": True,
                             "initializedcheck": False},
    )


setup(ext_modules=_extensions())
