"""Grounding, for the offline engine: a question that names things (a
company, a person, a year, a quarter) is answered only from documents that
mention them (see docsum.models.abstain.question_names). Without it the offline
engine answered "Intel, Q1 2023" from Intel's Q2 filing and "an unladen
swallow" from railway minutes."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import PurePath
from typing import Any

from docsum.layout import answer_units
from docsum.lexical import STOPWORDS, sentences
from docsum.models.abstain import (
    DocumentKeys,
    TextKeys,
    document_keys,
    either_names,
    is_figure,
    is_period,
    missing_names,
    phrase_key,
    question_names,
    subject_names,
)
from docsum.models.hops import GENERAL_DOCUMENTS, bridges_in, is_chained, stated_whole
from docsum.models.prose import document_kind
from docsum.query.postprocess import StepReport
from docsum.query.retrieve import Candidate, Retrieval, SummaryCorpus, documents_about, passes_floor
from docsum.store.base import DocumentStore

_FISCAL = re.compile(r"\bfiscal\b|\bFY\s?\d", re.IGNORECASE)
# How many further candidates (times --top-k) grounding may look at to
# replace chosen documents that cannot hold the answer.
GROUNDING_LOOKAHEAD = 3
# Retrievers whose unchosen candidates are ranked by a score the floor can
# judge (LLM choice ranks only what it picked).
RANKED_RETRIEVERS = ("fused", "bm25", "embedding")


def grounded(  # noqa: C901 (listed when the check came in: simplify, then drop this)
    store: DocumentStore,
    question: str,
    found: Retrieval,
    by_doc: dict[str, list[Any]],
    top_k: int,
    floor: float | None,
    corpus: SummaryCorpus | None = None,
) -> tuple[list[Candidate], dict[str, list[Any]], StepReport | None]:
    """Offline, answer only from documents that can hold the answer to a
    question that names things (docsum.models.abstain.question_names): without this
    the offline engine answered "Intel, Q1 2023" from Intel's Q2 filing and
    "an unladen swallow" from railway minutes.

    A document's coverage is which of the question's names and figures it
    mentions (file name, title or text). When some document covers them all,
    those are kept, with chosen documents that mention none of them (the other
    hop of a question such as "what did Brindle & Daughter pay", answered in
    minutes that never name the bakery). Otherwise, for a question without a
    period, the documents together must cover every name and figure (the
    hops of a multi-hop question, "the Judiciary Act of 1869" among them); a
    period (a quarter such as "Q1 2023", a half, a fiscal year) must sit in
    one document with every name ("Microsoft, Q3 2023" is not answered by
    NVIDIA's Q3 filing that mentions Microsoft), or there is no answer. The embedding retriever's
    next candidates above the floor may take the place of chosen documents.
    Returns the kept documents, their nodes, and the step report (None when
    the question names nothing)."""
    names = question_names(question) or _spelled_titles(question, [*found.chosen, *found.candidates])
    if not names:
        return found.chosen, by_doc, None
    quoting = _quoting(store, question, found, by_doc, top_k)
    if quoting:
        for cand in found.candidates:
            cand.chosen = cand in quoting
        note = f"the question quotes {', '.join(c.path for c in quoting)}"
        return quoting, by_doc, StepReport("grounding", len(found.chosen), len(quoting), note=note)
    # A period must sit in one document with every name; a bare year may be
    # one hop's ("the Judiciary Act of 1869") like any other name.
    periods = [n for n in names if is_period(n)]
    subjects = subject_names(question)
    fiscal = bool(_FISCAL.search(question))  # "fiscal 2024": a company's own year, not the file name's
    either = either_names(question, names)
    pool = list(found.chosen)
    if found.retriever in RANKED_RETRIEVERS:
        chosen_ids = {c.doc_id for c in pool}
        further = [c for c in found.candidates if c.doc_id not in chosen_ids and passes_floor(c, floor)]
        pool += further[: GROUNDING_LOOKAHEAD * top_k]
    need = [c.doc_id for c in pool if c.doc_id not in by_doc]
    if need:
        by_doc.update(store.nodes_for(need))
    titles = {d.doc_id: f"{d.path} {d.title}" for d in store.get_documents([c.doc_id for c in pool])}
    cover: dict[str, set[str]] = {}
    known: dict[str, DocumentKeys] = {}  # read once: the second-hop check below reads them again
    for cand in pool:
        keys = known[cand.doc_id] = document_keys(
            cand.doc_id,
            titles.get(cand.doc_id, cand.path),
            cand.summary,
            "\n".join(r.text for r in by_doc.get(cand.doc_id, [])),
        )
        covered = set(names) - set(missing_names(names, keys, subjects, fiscal))
        for group in either:
            if covered & group:
                covered |= group
        cover[cand.doc_id] = covered
    once = _stated_once(store, names, pool, known, cover, found.candidates, corpus)
    for doc_id, stated in once.items():
        cover[doc_id] |= stated
    full = [c for c in pool if cover[c.doc_id] == set(names)]
    for c in full:
        if once.get(c.doc_id):
            # The answer is read where the name is said.
            by_doc[c.doc_id] = _passages_naming(by_doc.get(c.doc_id, []), once[c.doc_id])
    kept: list[Candidate]
    if full:
        # The documents about everything named come first; a chosen one that
        # names none of it may be the other hop (minutes that never name the
        # bakery), unless it is the same kind of document as one that does
        # (another company's 10-Q) or the retriever chose none that does:
        # then it is about something else.
        kinds = {_kind(c) for c in full} - {None}
        hops = [
            c
            for c in found.chosen
            if not cover[c.doc_id] and _kind(c) not in kinds and any(f in found.chosen for f in full)
        ]
        if hops:
            hops = _bridged(names, full, hops, by_doc, titles, known)
        kept = (full + hops)[:top_k]
        note = f"needs {', '.join(names)}; {len(full)} candidate(s) mention all"
    else:
        union = set().union(*cover.values()) if cover else set()
        if union != set(names) or periods:
            missing = [n for n in names if n not in union]
            why = (
                f"missing: {', '.join(missing)}"
                if missing
                else f"no one document holds {', '.join(periods)} with every name"
            )
            report = StepReport(
                "grounding",
                len(found.chosen),
                0,
                note=f"no candidate document covers {', '.join(names)} ({why})",
                emptied=True,
            )
            return [], by_doc, report
        else:
            refills = [
                c
                for c in pool
                if c not in found.chosen and cover[c.doc_id] - set().union(*(cover[k.doc_id] for k in found.chosen))
            ]
            kept = (refills + list(found.chosen))[:top_k]
            note = f"needs {', '.join(names)}; no single document mentions all, together they do"
    if is_chained(question) and found.retriever in RANKED_RETRIEVERS and not _answered_beside(question, kept, by_doc):
        kept, linked = _linked(store, names, kept, found, by_doc, floor, top_k, corpus)
        if linked:
            note += f"; a hop further: {', '.join(c.path for c in linked)}"
    for cand in found.candidates:
        cand.chosen = cand in kept
    dropped = [c for c in found.chosen if c not in kept]
    added = [c.path for c in kept if c not in found.chosen]
    if dropped:
        note += f"; dropped {len(dropped)} chosen document(s)"
    if added:
        note += f"; took {', '.join(added)} instead"
    return kept, by_doc, StepReport("grounding", len(found.chosen), len(kept), note=note)


def _bridged(
    names: list[str],
    full: list[Candidate],
    hops: list[Candidate],
    by_doc: dict[str, list[Any]],
    titles: dict[str, str],
    known: dict[str, DocumentKeys],
) -> list[Candidate]:
    """The second-hop candidates that continue from the first: each names
    something the documents about everything say beside the question's names
    ("… published by the American Psychological Association"). One that
    names none of it (Djibouti's first president) answers another question."""
    wanted = [n for n in names if not is_figure(n)]
    # Every sentence of a document whose title names them all (the bakery's
    # history names the railway's auction without naming the bakery), those
    # naming them in any other.
    bridges: list[str] = []
    for c in full:
        text = "\n".join(r.text for r in by_doc.get(c.doc_id, []))
        titled = all(TextKeys(titles.get(c.doc_id, c.path)).count(n) for n in wanted)
        bridges = _bridge_keys(wanted, [text], also=bridges, most=MAX_BRIDGE_SENTENCES, every=titled)
    # A name many of the candidates mention ("United States") links nothing
    # in particular (a church in Ohio is no hop from a peak in Colorado)
    # unless the hop is about it (Treaties_of_the_European_Union.txt).
    general = {b for b in bridges if sum(1 for k in known.values() if k.body.count(b)) >= GENERAL_DOCUMENTS}
    return [
        c
        for c in hops
        if any(known[c.doc_id].body.count(b) and (b not in general or known[c.doc_id].name.count(b)) for b in bridges)
    ]


# A question this long (in words) that a document's text holds word for word
# quotes it.
QUOTE_MIN_WORDS = 12


def _quoting(
    store: DocumentStore, question: str, found: Retrieval, by_doc: dict[str, list[Any]], top_k: int
) -> list[Candidate]:
    """The candidates whose text holds the question word for word, when it is
    long enough to be a quotation: a passage copied from a stored document is
    answered from it, whatever it names (Intel's filing quoting a ruling on
    Apple, a table's row of figures)."""
    wanted = TextKeys(question).sequence
    if len(wanted) < QUOTE_MIN_WORDS:
        return []
    pool = [*found.chosen, *(c for c in found.candidates if c not in found.chosen)][: (GROUNDING_LOOKAHEAD + 1) * top_k]
    need = [c.doc_id for c in pool if c.doc_id not in by_doc]
    if need:
        by_doc.update(store.nodes_for(need))
    quoting = []
    for cand in pool:
        if any(_holds_run(TextKeys(r.text).sequence, wanted) for r in by_doc.get(cand.doc_id, [])):
            quoting.append(cand)
    return quoting[:top_k]


def _holds_run(sequence: list[str], wanted: list[str]) -> bool:
    """`wanted` occurs in `sequence` as consecutive keys."""
    first, n = wanted[0], len(wanted)
    return any(sequence[i : i + n] == wanted for i, key in enumerate(sequence) if key == first)


def _stated_once(
    store: DocumentStore,
    names: list[str],
    pool: list[Candidate],
    known: dict[str, DocumentKeys],
    cover: dict[str, set[str]],
    candidates: list[Candidate],
    corpus: SummaryCorpus | None,
) -> dict[str, set[str]]:
    """The names each candidate of `pool` states (once is enough) beyond
    what it covers, when no document is about them and with them it covers
    every name.

    A long article about many things states most of what it holds once ("the
    French army liberated Warsaw in 1806" in 6,000 words on the city; Japan's
    solar research centre in an article on solar energy), and a one-page scan
    states its date once: that is still stated. A name some document is
    named for, by its file name or title (among the pool, the retriever's
    candidates and the store's best summaries for the name: a company's own
    filings, a report named for its quarter), is left to that document, so a
    passing mention in another company's filing never answers for it. Not by
    its summary: an extractive summary quotes the names its sentences hold
    ("French" in a composer's), which says little of what the document is
    about; nor by how often a long text says it."""
    stated = {c.doc_id: {n for n in names if n not in cover[c.doc_id] and _states(known[c.doc_id], n)} for c in pool}
    wanted = set().union(*stated.values()) if stated else set()
    if not wanted:
        return {}
    claimed = {n for n in wanted if any(known[c.doc_id].name.has_all(n) for c in pool)}
    others = [*candidates, *_about_lookup(corpus, sorted(wanted - claimed))] if wanted - claimed else []
    for d in store.get_documents(list(dict.fromkeys(c.doc_id for c in others))):
        named = TextKeys(f"{d.path} {d.title}")
        claimed |= {n for n in wanted if n not in claimed and named.has_all(n)}
    # Only where it completes the document's cover: one name stated in passing
    # beside another document's subject joins no hops ("Orvik is a customer"
    # in Brenna's report answers nothing about Orvik's 2023).
    return {
        doc_id: said
        for doc_id, said in stated.items()
        if said and not (said & claimed) and cover[doc_id] | said == set(names)
    }


def _states(keys: DocumentKeys, name: str) -> bool:
    """The document says `name` at least once (or its file name or title has its words)."""
    return bool(keys.body.count(name) or keys.name.has_all(name))


# Documents whose summaries rank best for a name, read to tell whether some
# document in the store is about it.
ABOUT_LOOKUP = 5


def _about_lookup(corpus: SummaryCorpus | None, names: list[str]) -> list[Candidate]:
    """The documents of the whole store whose summaries rank best for each
    name alone: the question's candidates may leave out the one about it."""
    if corpus is None:
        return []
    return [c for n in names if not is_figure(n) for c in documents_about(corpus, n, ABOUT_LOOKUP)]


def _passages_naming(rows: list[Any], names: set[str]) -> list[Any]:
    """The passages that state the names a document is not about: the answer
    is read where they are said (all of them if one passage says them all,
    else those that say any)."""
    keyed = [(r, TextKeys(r.text)) for r in rows]
    every = [r for r, keys in keyed if all(keys.count(n) for n in names)]
    return every or [r for r, keys in keyed if any(keys.count(n) for n in names)] or rows


def _kind(candidate: Candidate) -> str | None:
    """The kind of document its summary opens with ("a quarterly report
    filed on SEC Form 10-Q"), if it says."""
    return document_kind(candidate.summary.strip().split("\n", 1)[0])


# Sentences of the full documents read for bridges: the head of a long text
# names what it is about.
MAX_BRIDGE_SENTENCES = 400


def _answered_beside(question: str, kept: list[Candidate], by_doc: dict[str, list[Any]]) -> bool:
    """Some sentence of the kept documents states the answer where it stands
    (docsum.models.hops.stated_whole): a question read as chained may be a
    plain one that describes its subject ("Chopin's sister Ludwika took his
    heart back to Warsaw preserved in what?"), and a hop further would only
    bring in unrelated documents."""
    return stated_whole(question, [u for c in kept for r in by_doc.get(c.doc_id, []) for u in answer_units(r.text)])


# Rounds of following bridges: hop 2's document, then hop 3's.
MAX_LINK_ROUNDS = 2


def _linked(  # noqa: C901 (listed when the check came in: simplify, then drop this)
    store: DocumentStore,
    names: list[str],
    kept: list[Candidate],
    found: Retrieval,
    by_doc: dict[str, list[Any]],
    floor: float | None,
    top_k: int,
    corpus: SummaryCorpus | None = None,
) -> tuple[list[Candidate], list[Candidate]]:
    """For a question that reaches its answer through something it does not
    name (docsum.models.hops.is_chained): the documents about the bridges
    (the names the kept documents' sentences about the question's names say
    beside them: "American Psychological Association"), taken from the
    retriever's candidates above the floor in place of kept documents that
    name none of the question's names and are about no bridge. Retrieval
    ranks the hop-2 document low, for it shares few of the question's words
    ("first president"), so without this the engine never sees it and can
    only decline. Returns the kept documents and those taken in."""
    wanted = [n for n in names if not is_figure(n)]
    passing = [c for c in found.candidates if passes_floor(c, floor)]
    if not wanted or not passing:
        return kept, []
    titles = {d.doc_id: TextKeys(f"{d.path} {d.title}") for d in store.get_documents([c.doc_id for c in passing])}
    kept_ids = {c.doc_id for c in kept}

    def text_of(cand: Candidate) -> str:
        return "\n".join(r.text for r in by_doc.get(cand.doc_id, []))

    # Anchors: the kept documents naming the most of the question's names
    # (one naming only "Journal" beside one naming "Journal" and "Quiet
    # Studies" is another journal's).
    named = {c.doc_id: sum(1 for n in wanted if TextKeys(text_of(c)).count(n)) for c in kept}
    most = max(named.values(), default=0)
    anchors = [c for c in kept if most and named[c.doc_id] == most]
    bridges = _bridge_keys(wanted, [text_of(c) for c in anchors])
    # Another document of the anchors' kind (another 10-Q) is about another
    # company or period, never the next hop.
    kinds = {_kind(c) for c in anchors} - {None}
    passing = [c for c in passing if c.doc_id in kept_ids or _kind(c) not in kinds]

    def about(c: Candidate, keys: list[str]) -> bool:
        return any(titles.get(c.doc_id, TextKeys(c.path)).count(b) for b in keys)

    # Kept documents that are about a bridge stay, as do the anchors; the
    # others make room.
    keep = [c for c in kept if c in anchors or about(c, bridges)]
    room = top_k - len(keep)
    # Read for the bridges they mention: the next few candidates (their
    # text, not only their title: "Adolescence" names the American
    # Psychological Association's first president).
    near = [c for c in passing if c.doc_id not in kept_ids][: GROUNDING_LOOKAHEAD * top_k]
    missing = [c.doc_id for c in near if c.doc_id not in by_doc]
    if missing:
        by_doc.update(store.nodes_for(missing))
    linked: list[Candidate] = []
    # A later round reads the earlier bridges again: each is looked up once.
    looked: dict[str, list[Candidate]] = {}

    def lookup(bridge: str) -> list[Candidate]:
        if bridge not in looked:
            looked[bridge] = documents_about(corpus, bridge, LOOKUP_DEPTH) if corpus is not None else []
        return looked[bridge]

    for _ in range(MAX_LINK_ROUNDS):
        if room <= 0 or not bridges:
            break
        fresh = [c for c in passing if c.doc_id not in kept_ids and c not in linked]
        pick = (
            [c for c in fresh if about(c, bridges)][:1]
            or _looked_up(lookup, bridges, kept_ids | {c.doc_id for c in linked}, kinds)
            or [c for c in near if c in fresh and any(TextKeys(text_of(c)).count(b) for b in bridges)][:1]
        )
        if not pick:
            break
        linked += pick
        room -= 1
        if pick[0].doc_id not in by_doc:
            by_doc.update(store.nodes_for([pick[0].doc_id]))
        # Hop 3 continues from hop 2's document: what it is about and names.
        bridges = _bridge_keys([], [text_of(pick[0])], also=bridges)
    if not linked:
        return kept, []
    rest = [c for c in kept if c not in keep]
    return (keep + linked + rest)[:top_k], linked


# Bridges looked up in the whole store, in the order the sentences name them.
MAX_LOOKUPS = 8
# Documents read per bridge looked up.
LOOKUP_DEPTH = 3


def _looked_up(
    lookup: Callable[[str], list[Candidate]],
    bridges: list[str],
    taken: set[str],
    kinds: set[str | None],
) -> list[Candidate]:
    """The first document of the store whose file name is a bridge's name
    ("Somalia.txt"; "West_Chicago_Illinois.txt" for "West Chicago") or
    something of it ("History_of_Mississippi.txt", "Alcohol_laws_of_Indiana.txt"),
    none of those `taken` already nor of the anchors' `kinds`. A name that
    only holds the bridge is about something else: "Consulate General of the
    United States" is a consulate. A bridge's own document beats a later
    bridge's "… of" one."""
    partial: list[Candidate] = []
    for bridge in bridges[:MAX_LOOKUPS]:
        for cand in lookup(bridge)[:LOOKUP_DEPTH]:
            if cand.doc_id in taken or _kind(cand) in kinds:
                continue
            name = _file_key(cand.path)
            if f"{name} ".startswith(f"{bridge} "):
                return [cand]
            if name.endswith(f" of {bridge}") and not partial:
                partial = [cand]
    return partial


# A one-word file name spelled in a question is a name only this long
# ("coffee", not "war").
MIN_TITLE_WORD = 4


def _spelled_titles(question: str, candidates: list[Candidate]) -> list[str]:
    """The names of a question written all in lower case ("what state is
    directly west of north dakota"), which `question_names` cannot see: the
    file names of candidates it spells out, whole or by their first two
    words or more ("north dakota" for North_Dakota.txt, "monster truck" for
    Monster_Trucks_film.txt). A question with a capital letter names its own."""
    if question != question.lower():
        return []
    asked = f" {phrase_key(question)} "
    names: list[str] = []
    for cand in candidates:
        words = _file_key(cand.path).split()
        shortest = min(2, len(words))  # a one-word file name may be spelt whole
        for n in range(len(words), shortest - 1, -1):  # the longest first
            key = " ".join(words[:n])
            if (
                f" {key} " in asked
                and key not in names
                and not all(w in STOPWORDS for w in words[:n])
                and (n > 1 or len(key) >= MIN_TITLE_WORD)
            ):
                names.append(key)
                break
    return names


def _file_key(path: str) -> str:
    """A file's name, without folder or extension, as a name key."""
    return phrase_key(PurePath(path).stem.replace("_", " "))


# Sentences of a hop's document read for its bridges: the head of a long
# text names what it is about.
MAX_HOP_SENTENCES = 60


def _overlap(key: str, name: str) -> bool:
    """One name key holds the other, whole words."""
    return f" {key} " in f" {name} " or f" {name} " in f" {key} "


def _bridge_keys(
    wanted: list[str],
    texts: list[str],
    also: list[str] | None = None,
    most: int = MAX_HOP_SENTENCES,
    every: bool = False,
) -> list[str]:
    """Bridges (name keys) of the first `most` sentences of `texts` that name
    one of `wanted` (all of them when `every` or without `wanted`), none of
    them part of one of `wanted` or holding one: "Harris" and "Harris W.
    Fawell Congressional Papers" lead nowhere new from "Harris W. Fawell"."""
    out = list(also or [])
    for text in texts:
        for sentence in sentences(text)[:most]:
            if wanted and not every and not any(TextKeys(sentence).count(n) for n in wanted):
                continue
            for key in bridges_in(sentence):
                if len(key) >= 4 and key not in out and not any(_overlap(key, n) for n in wanted):
                    out.append(key)
    return out
