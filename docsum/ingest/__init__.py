"""Ingest: find the files of a folder, read each into text (PDF, HTML, Word, plain text) in worker
processes, and cut the text into token-sized nodes.

Kept empty so importing one module of the package imports nothing else."""
