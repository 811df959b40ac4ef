"""Where documents, summaries, nodes and calls are kept: one interface (base), a local SQLite file
(sqlite, the default) and a shared PostgreSQL database (postgres), with the vector file and the build lock.

Kept empty so importing one module of the package imports nothing else."""
