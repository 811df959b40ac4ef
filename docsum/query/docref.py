"""Which stored document a person means by what they typed (`docsum show`,
`docsum remove`): an id or a unique id prefix, the path as typed from the
current folder, the stored path (relative to its build root), or the start
of a file name (`greenhouse` for greenhouse_plan.docx)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from docsum.errors import ConfigError
from docsum.ingest.ocr import ORIGIN_NONE, ORIGIN_OCR
from docsum.sanitize import clean_name
from docsum.store.base import DocumentStore
from docsum.store.records import DocumentRecord

# A shorter prefix of a 12-character id would match too much by chance.
MIN_ID_PREFIX = 4


def find_documents(store: DocumentStore, ref: str, cwd: Path | None = None) -> list[DocumentRecord]:
    """Candidates for `ref`, the most specific rule that matches first:
    the exact id; the path as typed, from `cwd` (root/path of a stored
    document); the store's own rules (stored path, a unique path suffix); a
    unique id prefix. More than one candidate means ambiguous. The records
    come without their vectors (what `show` and `remove` need holds none)."""
    ref = ref.strip()
    if not ref:
        return []
    exact = [d for d in store.find_documents(ref, with_embeddings=False) if d.doc_id == ref]
    if exact:
        return exact
    typed = _typed_path_matches(store, ref, cwd or Path.cwd())
    if typed:
        return typed
    stored = store.find_documents(ref, with_embeddings=False)
    if stored:
        return stored
    if len(ref) >= MIN_ID_PREFIX and all(c in "0123456789abcdef" for c in ref.lower()):
        by_id = [d for d in store.iter_documents(with_summaries=False) if d.doc_id.startswith(ref.lower())]
        if by_id:
            return by_id
    return _name_prefix_matches(store, ref)


def _name_prefix_matches(store: DocumentStore, ref: str) -> list[DocumentRecord]:
    """The documents whose file name, or stored path, starts with `ref`
    (case ignored): what a person types who remembers only how a name begins.
    They are then read by id (the scan reads no summary)."""
    start = ref.lower()
    ids = [
        d.doc_id
        for d in store.iter_documents(with_summaries=False)
        if os.path.basename(d.path).lower().startswith(start) or d.path.lower().startswith(start)
    ]
    return store.get_documents(ids) if ids else []


def _typed_path_matches(store: DocumentStore, ref: str, cwd: Path) -> list[DocumentRecord]:
    """The document whose root/path is `ref` taken from `cwd`, with and
    without resolving symlinks (the build root was stored as given, resolved)."""
    typed = Path(os.path.expanduser(ref))
    if not typed.is_absolute():
        typed = cwd / typed
    seen: set[str] = set()
    found: list[DocumentRecord] = []
    for candidate in (os.path.normpath(typed), str(typed.resolve())):
        if candidate in seen:
            continue
        seen.add(candidate)
        for doc in store.find_documents(candidate, with_embeddings=False):
            if doc.doc_id not in {d.doc_id for d in found}:
                found.append(doc)
    return found


def find_one(store: DocumentStore, ref: str, listing: str = "`docsum summaries`") -> DocumentRecord:
    """The one document `ref` names; ConfigError when none or several do
    (`listing` says where the person can see what there is; several are
    listed as candidates, up to MAX_CANDIDATES of them)."""
    matches = find_documents(store, ref)
    if not matches:
        raise ConfigError(f"no document {ref!r} in {store.label}; see {listing}")
    if len(matches) > 1:
        shown = matches[:MAX_CANDIDATES]
        names = ", ".join(f"{clean_name(d.path)} ({d.doc_id}, in {clean_name(d.root)})" for d in shown)
        more = f" and {len(matches) - len(shown)} more" if len(matches) > len(shown) else ""
        raise ConfigError(
            f"{ref!r} matches {len(matches)} documents: {names}{more}; give a longer name, the path with its folder, or the id"
        )
    return matches[0]


# Candidates an ambiguous name lists (the rest are counted).
MAX_CANDIDATES = 10


def document_details(store: DocumentStore, record: DocumentRecord) -> tuple[dict[str, Any], list[int]]:
    """What `docsum show --json` prints of a document, and the pages its nodes cover."""
    nodes = store.nodes_for([record.doc_id])[record.doc_id]
    data = {
        "doc_id": record.doc_id,
        "path": record.path,
        "root": record.root,
        "title": record.title,
        "kind": record.kind,
        "nodes": len(nodes),
        "pages": record.page_count,
        # Each page's text origin: "t" text layer, "o" OCR, "-" unreadable ('' if not known).
        "page_origins": record.page_origins,
        "ocr_pages": record.page_origins.count(ORIGIN_OCR),
        "unreadable_pages": record.page_origins.count(ORIGIN_NONE),
        "tokens": record.token_count,
        "summary_model": record.summary_model,
        "updated_at": record.updated_at,
        "summary": record.summary,
    }
    return data, sorted({p for n in nodes for p in n.pages})
