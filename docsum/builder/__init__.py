"""Building the store from folders: the pipeline (reconcile, parse, summarize,
store) and the batching of summary embeddings.

Kept empty so importing one module of the package imports nothing else."""
