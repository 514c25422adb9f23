"""Stage 5: how good a clustering is (silhouette, centre-based measures) and which k (sweep)."""
