"""Following a chained question's hops, for grounding: a question that
reaches its answer through something it does not name ("the first president
of the country where X was born") is answered from the documents about the
bridges, the names the documents about its own names say beside them.
Retrieval ranks a hop's document low (it shares few of the question's
words), so without this the offline engine never sees it and can only
decline."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from docsum.layout import answer_units
from docsum.lexical import sentences
from docsum.models.abstain import DocumentKeys, TextKeys, is_figure, phrase_key
from docsum.models.hops import GENERAL_DOCUMENTS, bridges_in, stated_whole
from docsum.models.prose import document_kind
from docsum.query.retrieve import Candidate, Retrieval, SummaryCorpus, documents_about, passes_floor
from docsum.store.base import DocumentStore

# How many further candidates (times --top-k) grounding may read beyond the
# retriever's choice: to replace chosen documents that cannot hold the
# answer, to find a quoted passage, and for the bridges they mention.
GROUNDING_LOOKAHEAD = 3
# Rounds of following bridges: hop 2's document, then hop 3's.
MAX_LINK_ROUNDS = 2
# Bridges looked up in the whole store, in the order the sentences name them.
MAX_LOOKUPS = 8
# Documents read per bridge looked up.
LOOKUP_DEPTH = 3
# Sentences of the full documents read for bridges: the head of a long text
# names what it is about.
MAX_BRIDGE_SENTENCES = 400
# Sentences of a hop's document read for its bridges.
MAX_HOP_SENTENCES = 60


def read_nodes(store: DocumentStore, by_doc: dict[str, list[Any]], doc_ids: list[str]) -> None:
    """Read into `by_doc` the nodes of those documents it does not hold yet."""
    missing = [d for d in doc_ids if d not in by_doc]
    if missing:
        by_doc.update(store.nodes_for(missing))


def kind_of(candidate: Candidate) -> str | None:
    """The kind of document its summary opens with ("a quarterly report
    filed on SEC Form 10-Q"), if it says."""
    return document_kind(candidate.summary.strip().split("\n", 1)[0])


def file_key(path: str) -> str:
    """A file's name, without folder or extension, as a name key."""
    return phrase_key(PurePath(path).stem.replace("_", " "))


def answered_beside(question: str, kept: list[Candidate], by_doc: dict[str, list[Any]]) -> bool:
    """Some sentence of the kept documents states the answer where it stands
    (docsum.models.hops.stated_whole): a question read as chained may be a
    plain one that describes its subject ("Vell's sister Ada took his violin
    back to Northwind wrapped in what?"), and a hop further would only
    bring in unrelated documents."""
    return stated_whole(question, [u for c in kept for r in by_doc.get(c.doc_id, []) for u in answer_units(r.text)])


def bridged(
    names: list[str],
    full: list[Candidate],
    hops: list[Candidate],
    by_doc: dict[str, list[Any]],
    titles: dict[str, str],
    known: dict[str, DocumentKeys],
) -> list[Candidate]:
    """The second-hop candidates that continue from the first: each names
    something the documents about everything say beside the question's names
    ("… published by the Society for Quiet Studies"). One that
    names none of it (Veldra's first president) answers another question."""
    wanted = [n for n in names if not is_figure(n)]
    # Every sentence of a document whose title names them all (the bakery's
    # history names the railway's auction without naming the bakery), those
    # naming them in any other.
    bridges: list[str] = []
    for c in full:
        text = "\n".join(r.text for r in by_doc.get(c.doc_id, []))
        titled = all(TextKeys(titles.get(c.doc_id, c.path)).count(n) for n in wanted)
        bridges = bridge_keys(wanted, [text], also=bridges, most=MAX_BRIDGE_SENTENCES, every=titled)
    # A name many of the candidates mention (their country's) links nothing
    # in particular (a church in one state is no hop from a peak in another)
    # unless the hop is about it (Treaties_of_the_Northern_Union.txt).
    general = {b for b in bridges if sum(1 for k in known.values() if k.body.count(b)) >= GENERAL_DOCUMENTS}
    return [
        c
        for c in hops
        if any(known[c.doc_id].body.count(b) and (b not in general or known[c.doc_id].name.count(b)) for b in bridges)
    ]


@dataclass
class _Reader:
    """The candidates' texts and titles as linking reads them, nodes read on
    demand and each bridge looked up in the store once (a later round reads
    the earlier bridges again)."""

    store: DocumentStore
    by_doc: dict[str, list[Any]]
    titles: dict[str, TextKeys]
    corpus: SummaryCorpus | None
    looked: dict[str, list[Candidate]] = field(default_factory=dict)

    def read(self, doc_ids: list[str]) -> None:
        read_nodes(self.store, self.by_doc, doc_ids)

    def text_of(self, cand: Candidate) -> str:
        return "\n".join(r.text for r in self.by_doc.get(cand.doc_id, []))

    def about(self, cand: Candidate, keys: list[str]) -> bool:
        """Its file name or title names one of `keys`."""
        return any(self.titles.get(cand.doc_id, TextKeys(cand.path)).count(b) for b in keys)

    def lookup(self, bridge: str) -> list[Candidate]:
        if bridge not in self.looked:
            found = documents_about(self.corpus, bridge, LOOKUP_DEPTH) if self.corpus is not None else []
            self.looked[bridge] = found
        return self.looked[bridge]


def linked(
    store: DocumentStore,
    names: list[str],
    kept: list[Candidate],
    found: Retrieval,
    by_doc: dict[str, list[Any]],
    floor: float | None,
    top_k: int,
    corpus: SummaryCorpus | None = None,
) -> tuple[list[Candidate], list[Candidate]]:
    """For a chained question (docsum.models.hops.is_chained): the documents
    about the bridges (the names the kept documents' sentences about the
    question's names say beside them: "Society for Quiet Studies"),
    taken from the retriever's candidates above the floor in place of kept
    documents that name none of the question's names and are about no
    bridge. Returns the kept documents and those taken in."""
    wanted = [n for n in names if not is_figure(n)]
    passing = [c for c in found.candidates if passes_floor(c, floor)]
    if not wanted or not passing:
        return kept, []
    titles = {d.doc_id: TextKeys(f"{d.path} {d.title}") for d in store.get_documents([c.doc_id for c in passing])}
    reader = _Reader(store, by_doc, titles, corpus)
    kept_ids = {c.doc_id for c in kept}
    anchors = _anchors(wanted, kept, reader)
    bridges = bridge_keys(wanted, [reader.text_of(c) for c in anchors])
    # Another document of the anchors' kind (another 10-Q) is about another
    # company or period, never the next hop.
    kinds = {kind_of(c) for c in anchors} - {None}
    passing = [c for c in passing if c.doc_id in kept_ids or kind_of(c) not in kinds]
    # Kept documents that are about a bridge stay, as do the anchors; the
    # others make room.
    keep = [c for c in kept if c in anchors or reader.about(c, bridges)]
    # Read for the bridges they mention: the next few candidates (their
    # text, not only their title: "Stillness" names the Society for
    # Quiet Studies' first president).
    near = [c for c in passing if c.doc_id not in kept_ids][: GROUNDING_LOOKAHEAD * top_k]
    reader.read([c.doc_id for c in near])
    taken = _follow(reader, bridges, passing, near, kept_ids, kinds, top_k - len(keep))
    if not taken:
        return kept, []
    rest = [c for c in kept if c not in keep]
    return (keep + taken + rest)[:top_k], taken


def _anchors(wanted: list[str], kept: list[Candidate], reader: _Reader) -> list[Candidate]:
    """The kept documents naming the most of the question's names (one
    naming only "Journal" beside one naming "Journal" and "Quiet Studies" is
    another journal's)."""
    named = {c.doc_id: sum(1 for n in wanted if TextKeys(reader.text_of(c)).count(n)) for c in kept}
    most = max(named.values(), default=0)
    return [c for c in kept if most and named[c.doc_id] == most]


def _follow(
    reader: _Reader,
    bridges: list[str],
    passing: list[Candidate],
    near: list[Candidate],
    kept_ids: set[str],
    kinds: set[str | None],
    room: int,
) -> list[Candidate]:
    """Up to `room` hop documents, one a round: a candidate about a bridge,
    else the store's document named for one, else a near candidate whose
    text names one. Each round continues from the last hop's document."""
    taken: list[Candidate] = []
    for _ in range(MAX_LINK_ROUNDS):
        if room <= 0 or not bridges:
            break
        fresh = [c for c in passing if c.doc_id not in kept_ids and c not in taken]
        pick = (
            [c for c in fresh if reader.about(c, bridges)][:1]
            or _looked_up(reader.lookup, bridges, kept_ids | {c.doc_id for c in taken}, kinds)
            or [c for c in near if c in fresh and any(TextKeys(reader.text_of(c)).count(b) for b in bridges)][:1]
        )
        if not pick:
            break
        taken += pick
        room -= 1
        reader.read([pick[0].doc_id])
        # Hop 3 continues from hop 2's document: what it is about and names.
        bridges = bridge_keys([], [reader.text_of(pick[0])], also=bridges)
    return taken


def _looked_up(
    lookup: Callable[[str], list[Candidate]],
    bridges: list[str],
    taken: set[str],
    kinds: set[str | None],
) -> list[Candidate]:
    """The first document of the store whose file name is a bridge's name
    ("Veldra.txt"; "North_Harlow_Westmark.txt" for "North Harlow") or
    something of it ("History_of_Westmark.txt", "Fishing_laws_of_Carrow.txt"),
    none of those `taken` already nor of the anchors' `kinds`. A name that
    only holds the bridge is about something else: "Embassy of the
    Northern Union" is an embassy. A bridge's own document beats a later
    bridge's "… of" one."""
    partial: list[Candidate] = []
    for bridge in bridges[:MAX_LOOKUPS]:
        for cand in lookup(bridge)[:LOOKUP_DEPTH]:
            if cand.doc_id in taken or kind_of(cand) in kinds:
                continue
            name = file_key(cand.path)
            if f"{name} ".startswith(f"{bridge} "):
                return [cand]
            if name.endswith(f" of {bridge}") and not partial:
                partial = [cand]
    return partial


def _overlap(key: str, name: str) -> bool:
    """One name key holds the other, whole words."""
    return f" {key} " in f" {name} " or f" {name} " in f" {key} "


def bridge_keys(
    wanted: list[str],
    texts: list[str],
    also: list[str] | None = None,
    most: int = MAX_HOP_SENTENCES,
    every: bool = False,
) -> list[str]:
    """Bridges (name keys) of the first `most` sentences of `texts` that name
    one of `wanted` (all of them when `every` or without `wanted`), none of
    them part of one of `wanted` or holding one: "Mara" and "Mara J.
    Quinn Congressional Papers" lead nowhere new from "Mara J. Quinn"."""
    out = list(also or [])
    for text in texts:
        for sentence in sentences(text)[:most]:
            if wanted and not every and not any(TextKeys(sentence).count(n) for n in wanted):
                continue
            for key in bridges_in(sentence):
                if len(key) >= 4 and key not in out and not any(_overlap(key, n) for n in wanted):
                    out.append(key)
    return out
