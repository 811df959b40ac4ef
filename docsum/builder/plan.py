"""What a build has to do: the folder compared with the store.

Every file found is classified against the document the store holds for it
(unchanged, touched, re-split only, changed or new), vanished documents are
listed for removal unless their folder looks unmounted, and the options are
checked before anything is read. Nothing here calls the LLM or writes the
store; docsum.builder.pipeline does that with the plan made here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from docsum.builder.report import BuildOptions, FileOutcome
from docsum.errors import ConfigError
from docsum.ingest.discover import FoundFile, SkippedFile, discover, exclusion_spec, printable_name
from docsum.ingest.formats import SUPPORTED_SUFFIXES
from docsum.ingest.ocr import wanted as ocr_wanted
from docsum.models.llm import LLM
from docsum.models.prompts import (
    DOCUMENT_SUMMARY_PROMPT,
    KIND_DOCUMENT_SUMMARY,
    SUMMARY_LANGUAGE_SUFFIX,
    PromptTemplate,
)
from docsum.store.base import DocumentStore
from docsum.store.records import StoredFile, make_doc_id
from docsum.userfiles import open_regular

SPLITTER_VERSION = "1"
READ_BLOCK = 1 << 20


def _fingerprint(parts: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def summary_template_for(options: BuildOptions) -> tuple[PromptTemplate, str]:
    """The summary prompt and query for these options."""
    # Its own kind: the offline engine writes a document summary for it, and
    # a question-focused answer (which may decline) for tree_summarize.
    template = (options.summary_template or DOCUMENT_SUMMARY_PROMPT).with_kind(KIND_DOCUMENT_SUMMARY, "summary")
    query = options.summary_query
    if options.summary_language:
        query = query.rstrip() + SUMMARY_LANGUAGE_SUFFIX.format(language=options.summary_language)
    return template, query


def fingerprints(llm: LLM, options: BuildOptions) -> tuple[str, str]:
    meta = llm.metadata
    template, query = summary_template_for(options)
    split_fp = _fingerprint(
        {
            "v": SPLITTER_VERSION,
            "size": options.chunk_size,
            "overlap": options.chunk_overlap,
            "tok": meta.tokenizer.name,
        }
    )
    summary_fp = _fingerprint(
        {
            "engine": meta.engine,
            "engine_version": getattr(llm, "version", ""),
            "model": meta.model,
            "template": template.template,
            "system": template.system,
            "query": query,
            "window": meta.context_window,
            "output": meta.num_output,
            "embed": meta.embed_model,
            "index_text": 2,  # what is embedded: file name + title + summary
        }
    )
    return split_fp, summary_fp


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with os.fdopen(open_regular(path), "rb") as fh:
        while block := fh.read(READ_BLOCK):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class Work:
    found: FoundFile
    doc_id: str
    existing: StoredFile | None
    size: int
    mtime_ns: int
    # True: the content and the summary settings are unchanged, only the node
    # split is not: re-split and keep the stored summary (no LLM call).
    resplit_only: bool = False
    # The opened file must lie under this folder (a symlink swapped in after
    # discovery is not followed out of the tree); None: no such check.
    inside: Path | None = None


@dataclass
class Plan:
    todo: list[Work]
    to_remove: list[StoredFile]
    known: list[FileOutcome]  # unchanged, skipped and discovery failures
    skipped: dict[str, int]
    skipped_entries: list[SkippedFile]
    touched: list[tuple[str, int, int]]  # (doc_id, size, mtime_ns): same content, new stat
    roots: set[str]  # folders whose vanished documents and failures are pruned
    seen: set[tuple[str, str]]  # (root, relpath) of every file found
    protected: set[str]  # folders and files nothing below which may be pruned


class Reconciler:
    """Compares the folders of `options` with what `store` holds."""

    def __init__(self, store: DocumentStore, options: BuildOptions, split_fp: str, summary_fp: str) -> None:
        self.store = store
        self.options = options
        self.split_fp = split_fp
        self.summary_fp = summary_fp

    async def reconcile(self) -> Plan:
        """Split the folder into work to do, documents to remove, and outcomes
        already known (unchanged files, skipped symlinks, discovery errors).

        Walking and hashing run off the event loop, so SIGINT/SIGTERM stay
        responsive while thousands of touched files are re-hashed."""
        discovery = await asyncio.to_thread(
            discover,
            self.options.paths,
            follow_symlinks=self.options.follow_symlinks,
            exclude=self.options.exclude,
            images=ocr_wanted(self.options.ocr),
        )
        # Keyed by (root, path), the key a found file has: its doc id (a hash
        # of both) is computed only for files that have work to do.
        stored = {(d.root, d.path): d for d in self.store.stored_files()}
        todo: list[Work] = []
        known: list[FileOutcome] = []
        touched: list[tuple[str, int, int]] = []
        seen: set[tuple[str, str]] = set()
        for err in discovery.errors:
            known.append(FileOutcome(err.path, "failed", err.reason))
        for path, reason in discovery.skipped:
            known.append(FileOutcome(path, "skipped", reason))
        where = _StoredRoots(stored)
        given_dirs = {str(p.resolve()) for p in self.options.paths if p.is_dir()}
        root_names: dict[int, str] = {}  # a walk's files share their root object: its name once per root
        for found in discovery.files:
            walked = root_names.get(id(found.root))
            if walked is None:
                walked = root_names[id(found.root)] = str(found.root)
            # Files found by walking a given folder must still be inside it
            # when opened (README Guarantee 8); a file named directly is read
            # wherever its symlink leads, as is everything with --follow-symlinks.
            inside = found.root if not self.options.follow_symlinks and walked in given_dirs else None
            keyed = where.canonical(found, walked)
            root = walked if keyed is found else str(keyed.root)
            found = keyed
            key = (root, found.relpath)
            seen.add(key)
            try:
                st = found.stat if found.stat is not None else os.stat(found.path)
            except OSError as exc:
                known.append(FileOutcome(found.relpath, "failed", f"cannot stat: {exc.strerror or exc}"))
                continue
            existing = stored.get(key)
            state = self._compare(existing, st) if existing is not None else "changed"
            if state == "same size":
                state = await self._compare_content(existing, found.path, st)  # type: ignore[arg-type]
            if state in ("unchanged", "touched"):
                known.append(FileOutcome(found.relpath, "unchanged"))
                if state == "touched":
                    touched.append((existing.doc_id, st.st_size, st.st_mtime_ns))  # type: ignore[union-attr]
                continue
            doc_id = existing.doc_id if existing is not None else make_doc_id(root, found.relpath)
            todo.append(
                Work(
                    found, doc_id, existing, st.st_size, st.st_mtime_ns, resplit_only=state == "resplit", inside=inside
                )
            )
        # Only folders given to this build are pruned: building another folder
        # into the same store must not wipe the first one, and a file named
        # directly (`docsum build folder/a.txt`) must not remove its siblings.
        roots = {str(p.resolve()) for p in self.options.paths if p.is_dir()}
        # What the walk could not see is not gone: an unreadable folder, a
        # link to a share that is not mounted (see docsum.ingest.discover).
        protected = set(discovery.protected)
        to_remove = []
        if self.options.prune:
            vanished = [d for key, d in stored.items() if key not in seen and lies_inside(d.root, d.path, roots)]
            protected |= self._guard_empty(discovery.empty_folders, vanished, known)
            to_remove = [d for d in vanished if not lies_inside(d.root, d.path, protected)]
        skipped = {
            "hidden": discovery.skipped_hidden,
            "unsupported": discovery.skipped_unsupported,
            "excluded": discovery.skipped_excluded,
            "symlinks": len(discovery.skipped),
        }
        return Plan(todo, to_remove, known, skipped, discovery.skipped_files, touched, roots, seen, protected)

    def _guard_empty(self, empty_folders: list[str], vanished: list[StoredFile], known: list[FileOutcome]) -> set[str]:
        """Folders that are empty now although the store holds documents from
        them: an unmounted share or a failed sync looks exactly like this, and
        pruning would throw away every summary paid for.  Nothing below them is
        removed and each is reported as failed (exit 3) unless the options say
        emptying them is wanted (``prune_empty``)."""
        if self.options.prune_empty or not vanished:
            return set()
        guarded: set[str] = set()
        for folder in sorted(empty_folders, key=len):  # outermost first: one line per empty tree
            if lies_inside(folder, "", guarded):
                continue
            held = sum(1 for d in vanished if lies_inside(d.root, d.path, {folder}))
            if held:
                guarded.add(folder)
                known.append(
                    FileOutcome(
                        folder,
                        "failed",
                        (
                            f"no document found in this folder but the store holds {held} from it; nothing removed "
                            "(an unmounted share?); pass --prune-empty to remove them"
                        ),
                    )
                )
        return guarded

    def _compare(self, doc: StoredFile, st: os.stat_result) -> str:
        """unchanged | touched (same content, new mtime) | resplit (only the
        split settings changed) | changed (content or summary settings), or
        "same size" when only the content can tell (`_compare_content`)."""
        if doc.summary_fingerprint != self.summary_fp or doc.size != st.st_size:
            return "changed"
        if doc.mtime_ns != st.st_mtime_ns:
            return "same size"  # a touch, a copy, a checkout
        return "resplit" if doc.split_fingerprint != self.split_fp else "unchanged"

    async def _compare_content(self, doc: StoredFile, path: Path, st: os.stat_result) -> str:
        """Same size, new mtime: the content's hash decides (off the event loop)."""
        try:
            if await asyncio.to_thread(sha256_of, path) != doc.sha256:
                return "changed"
        except OSError:
            return "changed"  # the build reports why it cannot be read
        return "resplit" if doc.split_fingerprint != self.split_fp else "touched"

    # -- doing it -----------------------------------------------------------


class _StoredRoots:
    """Keys a found file the way the store already knows it.

    A document is keyed by (build root, path below it). Building `docs` and
    later `docs/sub` (or the other way round, or naming one file) reaches the
    same files from different roots; keyed naively they would be stored, paid
    for and retrieved twice. A file is therefore keyed under a stored root
    that contains it: the one that already holds it, else the outermost."""

    def __init__(self, keys: Collection[tuple[str, str]]) -> None:
        self.keys = keys  # (root, path) of every stored document
        # Outermost first: "/a" sorts before "/a/b".
        self.roots = sorted({root for root, _ in keys}, key=lambda r: (len(PurePosixPath(r).parts), r))
        # Per build root, the stored roots that can contain its files (see
        # _plan). Path arithmetic once per root, string operations per file:
        # at 100,000 files the per-file PurePosixPath work took seconds.
        self._plans: dict[str, list[tuple[str, str, bool]]] = {}

    def _plan(self, base: str) -> list[tuple[str, str, bool]]:
        """(stored root, prefix, below) in outermost-first order for every
        stored root on the same branch as `base`: a root containing `base`
        keys base's file `rel` as prefix + rel; a root inside `base` (below)
        holds the files whose rel starts with prefix, keyed without it."""
        here = PurePosixPath(base)
        plan = []
        for root in self.roots:
            if here.is_relative_to(root):
                up = here.relative_to(root).as_posix()
                plan.append((root, "" if up == "." else up + "/", False))
            elif PurePosixPath(root).is_relative_to(here):
                plan.append((root, PurePosixPath(root).relative_to(here).as_posix() + "/", True))
        return plan

    def canonical(self, found: FoundFile, base: str) -> FoundFile:
        """`found` (whose root is named `base`), or the same file keyed as
        the store knows it."""
        plan = self._plans.get(base)
        if plan is None:
            plan = self._plans[base] = self._plan(base)
        candidates = []
        for root, prefix, below in plan:
            if below:
                if not found.relpath.startswith(prefix):
                    continue
                rel = found.relpath[len(prefix) :]
            else:
                rel = prefix + found.relpath
            if (root, rel) in self.keys:
                return (
                    found
                    if (root, rel) == (base, found.relpath)
                    else dataclasses.replace(found, root=Path(root), relpath=rel)
                )
            candidates.append((root, rel))
        if (base, found.relpath) in self.keys or not candidates:
            return found
        root, rel = candidates[0]
        return dataclasses.replace(found, root=Path(root), relpath=rel)


def lies_inside(root: str, relpath: str, folders: set[str]) -> bool:
    """Whether the stored file root/relpath lies in one of `folders`."""
    location = PurePosixPath(root, relpath)
    return any(location.is_relative_to(folder) for folder in folders)


def check_build_options(options: BuildOptions) -> None:
    """Everything about the options that can be wrong, before anything is
    read, locked or pruned (docsum.config.build_options checks them too, so
    the command line reports them before it says anything else)."""
    _check_paths(options.paths)
    exclusion_spec(options.exclude, "--exclude")  # a bad pattern is exit 2 now, not a failed walk


def _check_paths(paths: list[Path]) -> None:
    """A PATH that does not exist is a usage error, reported before anything
    is read, locked or pruned (an unmounted share must not look like an
    empty folder)."""
    if not paths:
        raise ConfigError("give at least one folder or file to build from")
    missing = [printable_name(str(p)) for p in paths if not os.path.lexists(p)]
    if missing:
        raise ConfigError(f"no such file or directory: {', '.join(missing)}")
    # A file named directly is meant to be read: do not skip it in silence.
    unsupported = [printable_name(str(p)) for p in paths if p.is_file() and p.suffix.lower() not in SUPPORTED_SUFFIXES]
    if unsupported:
        kinds = ", ".join(sorted(SUPPORTED_SUFFIXES))
        raise ConfigError(f"unsupported file type: {', '.join(unsupported)} (docsum reads {kinds})")
