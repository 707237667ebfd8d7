"""Run records on disk: the one reader and writer, statistics over samples, GPU state
descriptions, and comparing two records."""
