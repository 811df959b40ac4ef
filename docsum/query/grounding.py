"""Grounding, for the offline engine: a question that names things (a
company, a person, a year, a quarter) is answered only from documents that
mention them (see docsum.models.abstain.question_names). Without it the offline
engine answered "Intel, Q1 2023" from Intel's Q2 filing and "an unladen
swallow" from railway minutes."""

from __future__ import annotations

from typing import Any

from docsum.models.abstain import document_keys, is_period, missing_names, question_names, subject_names
from docsum.query.postprocess import StepReport
from docsum.query.retrieve import Candidate, Retrieval, passes_floor
from docsum.store.base import DocumentStore

# How many further candidates (times --top-k) grounding may look at to
# replace chosen documents that cannot hold the answer.
GROUNDING_LOOKAHEAD = 3
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
    names = question_names(question)
    if not names:
        return found.chosen, by_doc, None
    # A period must sit in one document with every name; a bare year may be
    # one hop's ("the Judiciary Act of 1869") like any other name.
    periods = [n for n in names if is_period(n)]
    subjects = subject_names(question)
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
    for cand in pool:
        keys = document_keys(
            cand.doc_id,
            titles.get(cand.doc_id, cand.path),
            cand.summary,
            "\n".join(r.text for r in by_doc.get(cand.doc_id, [])),
        )
        cover[cand.doc_id] = set(names) - set(missing_names(names, keys, subjects))
    full = [c for c in pool if cover[c.doc_id] == set(names)]
    kept: list[Candidate]
    if full:
        kept = [c for c in pool if cover[c.doc_id] == set(names) or (c in found.chosen and not cover[c.doc_id])][:top_k]
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
        refills = [
            c
            for c in pool
            if c not in found.chosen and cover[c.doc_id] - set().union(*(cover[k.doc_id] for k in found.chosen))
        ]
        kept = (refills + list(found.chosen))[:top_k]
        note = f"needs {', '.join(names)}; no single document mentions all, together they do"
    for cand in found.candidates:
        cand.chosen = cand in kept
    dropped = [c for c in found.chosen if c not in kept]
    added = [c.path for c in kept if c not in found.chosen]
    if dropped:
        note += f"; dropped {len(dropped)} chosen document(s)"
    if added:
        note += f"; took {', '.join(added)} instead"
    return kept, by_doc, StepReport("grounding", len(found.chosen), len(kept), note=note)
