"""Stages 3-4: from a start to a converged labelling, arrays in and arrays out (starts, Lloyd,
Elkan, Hartigan, the embedding solver, the explicit-feature engine and its sampled restarts,
the Cython kernels and the thread pools)."""
