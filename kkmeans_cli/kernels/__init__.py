"""Stage 2: what the kernel matrix K is and where its values come from (kernel functions,
precomputed matrices and their PSD repairs, in-memory / blocked / lazy kernel sources, Nyström
features)."""
