"""`docsum config show`: the engine that will answer, and every setting
with where its value came from (registered on the app by cli.main)."""

from __future__ import annotations

import dataclasses

from docsum.errors import DocsumError, ExitCode
from docsum.settings import CONFIG_SHOW

from .common import Common, examples, with_common

CONFIG_SHOW_EXAMPLES = examples(
    ("docsum config show", "Which engine answers and why, and every setting with its source."),
    ("docsum config show --base-url http://127.0.0.1:11434/v1", "What a command with that flag would use."),
)


@with_common(CONFIG_SHOW)
def config_show(*, common: Common) -> int:
    """Which engine will answer and why, then every effective setting and
    where its value came from (flag, environment, config file or default).
    Secrets are never shown."""
    from docsum.config import config_file_path, describe_embedder, describe_engine, engine_choice
    from docsum.locations import display_location, is_postgres
    from docsum.settings import as_typed

    rows = common.settings.describe()
    location = common.store_path()
    store = display_location(location)
    search = _vector_search(location)
    config = config_file_path()
    embedder = describe_embedder(common.settings)
    limits = common.settings.limits
    engine, why = describe_engine(common.settings)
    if common.json:
        common.env.out_json(
            {
                "engine": {"answers_with": engine, "because": why},
                "store": store,
                "store_backend": "postgresql" if is_postgres(location) else "sqlite",
                "vector_search": search,
                "embedder": embedder,
                "config_file": str(config),
                "config_file_exists": config.is_file(),
                "limits": dataclasses.asdict(limits),
                "settings": rows,
            }
        )
        return ExitCode.OK
    common.env.out(f"engine = {engine}: {why}")
    common.env.out(
        f"config file = {config}{'' if config.is_file() else '  (not found; defaults and environment apply)'}"
    )
    common.env.out(f"store = {store}")
    common.env.out(f"vector search = {search}")
    common.env.out(f"embedder = {embedder}")
    # The offline engine sends no request: only its own limits apply.
    requests = "" if engine_choice(common.settings) == "extractive" else f"{limits.requests} LLM requests, "
    common.env.out(
        f"limits = {requests}{limits.documents} documents and {limits.questions} questions "
        f"at once, {limits.embed_batch} summaries per embedding request (from concurrency)"
    )
    for row in rows:
        unused = "" if row["used"] else ", not used offline"
        common.env.out(f"{row['name']} = {as_typed(row['value'])}  ({row['source']}{unused})")
    return ExitCode.OK


def _vector_search(location: object) -> str:
    """How `docsum ask` will score summary vectors with this store."""
    from docsum.locations import is_postgres
    from docsum.store.opening import open_store, store_exists

    if not is_postgres(location):  # type: ignore[arg-type]
        return "in this process, from the SQLite store"
    try:
        if not store_exists(location):  # type: ignore[arg-type]
            return "unknown until the store exists (run `docsum build`)"
        with open_store(location, create=False, readonly=True) as store:  # type: ignore[arg-type]
            return store.search_description()
    except DocsumError as exc:
        return f"unknown: {exc}"
