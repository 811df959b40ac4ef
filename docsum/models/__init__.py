"""The language models docsum talks to: the OpenAI-compatible client, the offline engine, the offline
embedder, token counting and every prompt.

Kept empty so importing one module of the package imports nothing else."""
