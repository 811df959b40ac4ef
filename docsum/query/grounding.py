"""Grounding, for the offline engine: a question that names things (a
company, a person, a year, a quarter) is answered only from documents that
mention them (see docsum.models.abstain.question_names). Without it the offline
engine answered "Acme, Q1 2023" from Acme's Q2 filing and "the airspeed of a
heron" from railway minutes."""

from __future__ import annotations

import re
from typing import Any

from docsum.lexical import STOPWORDS
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
from docsum.models.hops import is_chained
from docsum.query.linking import (
    GROUNDING_LOOKAHEAD,
    answered_beside,
    bridged,
    file_key,
    kind_of,
    linked,
    read_nodes,
)
from docsum.query.postprocess import StepReport
from docsum.query.retrieve import Candidate, Retrieval, SummaryCorpus, documents_about, passes_floor
from docsum.store.base import DocumentStore

_FISCAL = re.compile(r"\bfiscal\b|\bFY\s?\d", re.IGNORECASE)
# Retrievers whose unchosen candidates are ranked by a score the floor can
# judge (LLM choice ranks only what it picked).
RANKED_RETRIEVERS = ("fused", "bm25", "embedding")


def grounded(
    store: DocumentStore,
    question: str,
    found: Retrieval,
    by_doc: dict[str, list[Any]],
    top_k: int,
    floor: float | None,
    corpus: SummaryCorpus | None = None,
) -> tuple[list[Candidate], dict[str, list[Any]], StepReport | None]:
    """Offline, the documents that can hold the answer to a question that
    names things (the module's docstring says why).

    A document's coverage is which of the question's names and figures it
    mentions (file name, title or text). When some document covers them all,
    those are kept, with chosen documents that mention none of them (the other
    hop of a question such as "what did Brindle & Daughter pay", answered in
    minutes that never name the bakery). Otherwise, for a question without a
    period, the documents together must cover every name and figure (the
    hops of a multi-hop question, "the Harbor Act of 1871" among them); a
    period (a quarter such as "Q1 2023", a half, a fiscal year) must sit in
    one document with every name ("Acme, Q3 2023" is not answered by another
    company's Q3 filing that mentions Acme), or there is no answer. The embedding
    retriever's next candidates above the floor may take the place of chosen documents.
    Returns the kept documents, their nodes, and the step report (None when
    the question names nothing)."""
    names = question_names(question) or _spelled_titles(question, [*found.chosen, *found.candidates])
    if not names:
        return found.chosen, by_doc, None
    quoting = _quoting(store, question, found, by_doc, top_k)
    if quoting:
        return _settled(found, quoting, by_doc, f"the question quotes {', '.join(c.path for c in quoting)}")
    pool = _grounding_pool(store, found, by_doc, top_k, floor)
    titles = {d.doc_id: f"{d.path} {d.title}" for d in store.get_documents([c.doc_id for c in pool])}
    known = {c.doc_id: _keys_of(c, titles, by_doc) for c in pool}  # read once: the hop checks read them again
    cover = _coverage(question, names, pool, known)
    once = _stated_once(store, names, pool, known, cover, found.candidates, corpus)
    for doc_id, stated in once.items():
        cover[doc_id] |= stated
    full = [c for c in pool if cover[c.doc_id] == set(names)]
    for c in full:
        if once.get(c.doc_id):
            # The answer is read where the name is said.
            by_doc[c.doc_id] = _passages_naming(by_doc.get(c.doc_id, []), once[c.doc_id])
    if full:
        kept = _with_other_hops(names, full, found, cover, by_doc, titles, known)[:top_k]
        note = f"needs {', '.join(names)}; {len(full)} candidate(s) mention all"
    else:
        union = set().union(*cover.values()) if cover else set()
        periods = [n for n in names if is_period(n)]
        if union != set(names) or periods:
            return [], by_doc, _uncovered(names, periods, union, found)
        chosen_cover = set().union(*(cover[k.doc_id] for k in found.chosen))
        refills = [c for c in pool if c not in found.chosen and cover[c.doc_id] - chosen_cover]
        kept = (refills + list(found.chosen))[:top_k]
        note = f"needs {', '.join(names)}; no single document mentions all, together they do"
    if is_chained(question) and found.retriever in RANKED_RETRIEVERS and not answered_beside(question, kept, by_doc):
        kept, taken = linked(store, names, kept, found, by_doc, floor, top_k, corpus)
        if taken:
            note += f"; a hop further: {', '.join(c.path for c in taken)}"
    return _settled(found, kept, by_doc, note + _replaced(found, kept))


def _grounding_pool(
    store: DocumentStore, found: Retrieval, by_doc: dict[str, list[Any]], top_k: int, floor: float | None
) -> list[Candidate]:
    """The chosen documents, then (for a ranked retriever) the next candidates
    above the floor that may take their place, with every one's nodes read."""
    pool = list(found.chosen)
    if found.retriever in RANKED_RETRIEVERS:
        chosen_ids = {c.doc_id for c in pool}
        further = [c for c in found.candidates if c.doc_id not in chosen_ids and passes_floor(c, floor)]
        pool += further[: GROUNDING_LOOKAHEAD * top_k]
    read_nodes(store, by_doc, [c.doc_id for c in pool])
    return pool


def _keys_of(cand: Candidate, titles: dict[str, str], by_doc: dict[str, list[Any]]) -> DocumentKeys:
    """A candidate's names as grounding reads them: file name and title, summary, text."""
    text = "\n".join(r.text for r in by_doc.get(cand.doc_id, []))
    return document_keys(cand.doc_id, titles.get(cand.doc_id, cand.path), cand.summary, text)


def _coverage(
    question: str, names: list[str], pool: list[Candidate], known: dict[str, DocumentKeys]
) -> dict[str, set[str]]:
    """Which of the question's names each candidate mentions; a period must
    sit with every name, and one of "A or B" stands for both."""
    subjects = subject_names(question)
    fiscal = bool(_FISCAL.search(question))  # "fiscal 2024": a company's own year, not the file name's
    either = either_names(question, names)
    cover: dict[str, set[str]] = {}
    for cand in pool:
        covered = set(names) - set(missing_names(names, known[cand.doc_id], subjects, fiscal))
        for group in either:
            if covered & group:
                covered |= group
        cover[cand.doc_id] = covered
    return cover


def _with_other_hops(
    names: list[str],
    full: list[Candidate],
    found: Retrieval,
    cover: dict[str, set[str]],
    by_doc: dict[str, list[Any]],
    titles: dict[str, str],
    known: dict[str, DocumentKeys],
) -> list[Candidate]:
    """The documents about everything named first; a chosen one that names
    none of it may be the other hop (minutes that never name the bakery),
    unless it is the same kind of document as one that does (another
    company's 10-Q) or the retriever chose none that does: then it is about
    something else."""
    kinds = {kind_of(c) for c in full} - {None}
    if not any(f in found.chosen for f in full):
        return full
    hops = [c for c in found.chosen if not cover[c.doc_id] and kind_of(c) not in kinds]
    if hops:
        hops = bridged(names, full, hops, by_doc, titles, known)
    return full + hops


def _uncovered(names: list[str], periods: list[str], union: set[str], found: Retrieval) -> StepReport:
    """The report of a question no candidate (nor all of them together) covers."""
    missing = [n for n in names if n not in union]
    why = f"missing: {', '.join(missing)}" if missing else f"no one document holds {', '.join(periods)} with every name"
    note = f"no candidate document covers {', '.join(names)} ({why})"
    return StepReport("grounding", len(found.chosen), 0, note=note, emptied=True)


def _replaced(found: Retrieval, kept: list[Candidate]) -> str:
    """What grounding dropped from the retriever's choice and took instead."""
    dropped = [c for c in found.chosen if c not in kept]
    added = [c.path for c in kept if c not in found.chosen]
    note = f"; dropped {len(dropped)} chosen document(s)" if dropped else ""
    return note + (f"; took {', '.join(added)} instead" if added else "")


def _settled(
    found: Retrieval, kept: list[Candidate], by_doc: dict[str, list[Any]], note: str
) -> tuple[list[Candidate], dict[str, list[Any]], StepReport]:
    """Mark the kept candidates chosen and report the step."""
    for cand in found.candidates:
        cand.chosen = cand in kept
    return kept, by_doc, StepReport("grounding", len(found.chosen), len(kept), note=note)


# A question this long (in words) that a document's text holds word for word
# quotes it.
QUOTE_MIN_WORDS = 12


def _quoting(
    store: DocumentStore, question: str, found: Retrieval, by_doc: dict[str, list[Any]], top_k: int
) -> list[Candidate]:
    """The candidates whose text holds the question word for word, when it is
    long enough to be a quotation: a passage copied from a stored document is
    answered from it, whatever it names (one company's filing quoting a
    ruling on another, a table's row of figures)."""
    wanted = TextKeys(question).sequence
    if len(wanted) < QUOTE_MIN_WORDS:
        return []
    pool = [*found.chosen, *(c for c in found.candidates if c not in found.chosen)][: (GROUNDING_LOOKAHEAD + 1) * top_k]
    read_nodes(store, by_doc, [c.doc_id for c in pool])
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
    Westmark army took Harlow in 1806" in 6,000 words on the city; a country's
    research centre in an article on a field of science), and a one-page scan
    states its date once: that is still stated. A name some document is
    named for, by its file name or title (among the pool, the retriever's
    candidates and the store's best summaries for the name: a company's own
    filings, a report named for its quarter), is left to that document, so a
    passing mention in another company's filing never answers for it. Not by
    its summary: an extractive summary quotes the names its sentences hold
    (a composer's nationality), which says little of what the document is
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


# A one-word file name spelled in a question is a name only this long
# ("coffee", not "war").
MIN_TITLE_WORD = 4


def _spelled_titles(question: str, candidates: list[Candidate]) -> list[str]:
    """The names of a question written all in lower case ("what state is
    directly west of north vellmar"), which `question_names` cannot see: the
    file names of candidates it spells out, whole or by their first two
    words or more ("north vellmar" for North_Vellmar.txt, "iron kettle" for
    Iron_Kettles_film.txt). A question with a capital letter names its own."""
    if question != question.lower():
        return []
    asked = f" {phrase_key(question)} "
    names: list[str] = []
    for cand in candidates:
        words = file_key(cand.path).split()
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
