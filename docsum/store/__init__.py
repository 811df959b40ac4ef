"""Where documents, summaries, nodes and calls are kept: one interface (base), a local SQLite file
(sqlite, the default; sqlite_schema) and a shared PostgreSQL database (postgres; pgschema, pgclaims,
pgvector), the statements both run (sqlbase), with the vector file and the build lock.

Kept empty so importing one module of the package imports nothing else."""
