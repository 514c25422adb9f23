/* OpenMP when the build has it, a serial stand-in otherwise. */
#ifndef KKMEANS_OMP_COMPAT_H
#define KKMEANS_OMP_COMPAT_H
#ifdef _OPENMP
#include <omp.h>
#define KKMEANS_OPENMP 1
#else
#define KKMEANS_OPENMP 0
static int omp_get_max_threads(void) { return 1; }
#endif
#endif
