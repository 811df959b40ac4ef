"""The commands that read or change stored documents: `docsum summaries`,
`docsum show` and `docsum remove` (registered on the app by cli.main)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated

import typer

from docsum.errors import ExitCode
from docsum.sanitize import clean_name
from docsum.settings import REMOVE, SHOW, SUMMARIES

from .common import Common, examples, with_common

if TYPE_CHECKING:
    from docsum.store.base import DocumentStore
    from docsum.store.records import DocumentRecord


def _open_existing(common: Common, *, readonly: bool = True) -> DocumentStore:
    from docsum.store.opening import open_store

    return open_store(common.existing_store(), create=False, readonly=readonly)


SUMMARIES_EXAMPLES = examples(
    ("docsum summaries", "One line per document: id, path, first line of its summary."),
    ("docsum summaries --json | jq -r '.[].path'", "Every stored path, for a script."),
)


@with_common(SUMMARIES)
def summaries(*, common: Common) -> int:
    """List the documents in the store: id, path and the first line of each summary."""
    # Streamed from the store row by row: memory stays flat at any size.
    with _open_existing(common) as store:
        docs = store.iter_documents()
        if common.json:
            common.env.out_json_array(
                {
                    "doc_id": d.doc_id,
                    "path": d.path,
                    "root": d.root,
                    "title": d.title,
                    "pages": d.page_count,
                    "tokens": d.token_count,
                    "summary": d.summary,
                }
                for d in docs
            )
            return ExitCode.OK
        common.env.out_lines(
            f"{d.doc_id}  {clean_name(d.path)}  {clean_name(_first_line(d.summary)[:160])}" for d in docs
        )
    return ExitCode.OK


def _first_line(text: str) -> str:
    stripped = text.strip()
    return stripped.splitlines()[0] if stripped else ""


def _find(store: DocumentStore, ref: str) -> DocumentRecord:
    from docsum.query.docref import find_one

    return find_one(store, ref)


# The DOC argument of show and remove (docsum.query.docref says how it is matched).
DocArgument = Annotated[
    str,
    typer.Argument(
        metavar="DOC",
        help="The document: its id (or the start of it), its path, or the start of its file name.",
        show_default=False,
    ),
]


SHOW_EXAMPLES = examples(
    ("docsum show storm_wren", "The document whose file name starts with storm_wren (candidates if several do)."),
    ("docsum show 3f2a9c", "The document with this id (or id prefix)."),
)


@with_common(SHOW)
def show(
    doc: DocArgument,
    *,
    common: Common,
) -> int:
    """Show one document's whole summary, with its node count and pages."""
    from docsum.ingest.ocr import PageCounts
    from docsum.query.docref import document_details

    with _open_existing(common) as store:
        record = _find(store, doc)
        data, pages = document_details(store, record)
    if common.json:
        common.env.out_json(data)
        return ExitCode.OK
    env = common.env
    env.out(f"{clean_name(record.path)}  ({record.doc_id})")
    env.out(f"title: {clean_name(record.title)}")
    env.out(
        f"nodes: {data['nodes']}  pages: {record.page_count or '-'}{'  (' + str(pages[0]) + '-' + str(pages[-1]) + ')' if pages else ''}  tokens: {record.token_count}"
    )
    read_by_ocr = PageCounts.of(record.page_origins).describe()
    if read_by_ocr:
        env.out(f"read: {read_by_ocr}")
    env.out("")
    env.out(record.summary)
    return ExitCode.OK


REMOVE_EXAMPLES = examples(
    (
        "docsum remove drafts/old_notes.txt",
        "Delete that document; the next build adds it back if the file is still there.",
    ),
    ("echo 'drafts/' >> ./reports/.docsumignore", "Keep a file or folder out of every build for good."),
)


@with_common(REMOVE)
def remove(
    doc: DocArgument,
    *,
    common: Common,
) -> int:
    """Delete one document (its summary and nodes) from the store. The next
    build adds it back while its file is there: a line in the folder's
    .docsumignore keeps it out for good (the command prints that line)."""
    with _open_existing(common, readonly=False) as store:
        record = _find(store, doc)
        store.remove_document(record.doc_id)
    if common.json:
        common.env.out_json({"removed": {"doc_id": record.doc_id, "path": record.path}})
    else:
        common.env.out(f"removed {clean_name(record.path)} ({record.doc_id})")
    from docsum.ingest.discover import IGNORE_FILE

    # A build reconciles the store with the folder: without this a removed file comes back.
    ignore = os.path.join(record.root, IGNORE_FILE) if record.root else f"{IGNORE_FILE} in its folder"
    common.env.info(
        f"docsum: note: the next build adds it back while the file is there; "
        f"to keep it out for good, add the line {clean_name('/' + record.path)} to {clean_name(ignore)}"
    )
    return ExitCode.OK
