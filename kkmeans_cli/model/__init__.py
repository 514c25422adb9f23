"""Orchestration and fitted state: the KernelKMeans estimator, the memory plan, the model file."""
