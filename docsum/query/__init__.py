"""`docsum ask` and `docsum eval`: pick documents by their summaries, post-process their nodes and
synthesize an answer.

Kept empty so importing one module of the package imports nothing else."""
