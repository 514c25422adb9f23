"""Stage 1 of the data flow: data in (CSV, NPY, HDF5, stdin), run configs, scaling, and outputs
written whole or not at all."""
