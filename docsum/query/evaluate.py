"""`docsum eval`: how well summary-first retrieval finds the right documents,
against a plain chunk retriever over the same nodes, and optionally how good
the answers are.

Questions come as JSON lines with `id`, `question`, optional `answer`,
`gold_docs` (file names relative to the built folder) and optional `kind`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from docsum.errors import ConfigError
from docsum.lexical import LEXICAL_EMBED_MODEL
from docsum.locations import StoreLocation, display_location
from docsum.models.extractive import ANSWER_SCORES, ExtractiveLLM, judge_by_overlap
from docsum.models.llm import LLM, track_calls
from docsum.models.localembed import LOCAL_EMBED_MODEL
from docsum.models.prompts import JUDGE_PROMPT
from docsum.query.answermeasures import GradedAnswer, measure
from docsum.query.ask import ask
from docsum.query.corpus import StoreCorpus
from docsum.query.evalreport import (
    AbstentionOutcome,
    AbstentionRates,
    AnswerGrade,
    AnswerSummary,
    AskOutcome,
    EvalReport,
    KindMetrics,
    KindRates,
    Metrics,
    QuestionRow,
    aggregate,
    floor_trade_off,
)
from docsum.query.options import AskOptions
from docsum.query.results import AskResult
from docsum.query.retrieve import retrieve
from docsum.settings import DEFAULT_LIMITS, RETRIEVERS, Limits, check, default
from docsum.store.base import DocumentStore
from docsum.store.evidence import DocumentEvidence
from docsum.store.opening import open_store, store_exists
from docsum.store.records import DocumentRecord
from docsum.userfiles import QUESTIONS_MAX_BYTES, read_regular_text

# A question whose documents do not answer it (SQuAD 2.0's impossible ones):
# `gold_docs` names the documents on its subject, and declining is right.
UNANSWERABLE_KIND = "unanswerable"


@dataclass(frozen=True)
class EvalQuestion:
    id: str
    question: str
    gold_docs: list[str]
    answer: str | None = None
    kind: str = "single"
    aliases: tuple[str, ...] = ()  # other ways to write the answer ("answer_aliases")


def load_questions(path: Path) -> list[EvalQuestion]:
    """Question lines from a JSON-lines file. Anything unusable is a
    ConfigError (exit 2) naming the file and the line, never a crash."""
    out: list[EvalQuestion] = []
    try:
        # utf-8-sig: a byte-order mark (Windows editors write one) is not JSON.
        lines = read_regular_text(path, QUESTIONS_MAX_BYTES, "a questions").splitlines()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read questions ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); questions are JSON lines") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            out.append(_question_from(json.loads(line), number))
        except RecursionError:
            raise ConfigError(f"{path}:{number}: not a question line (nested too deeply)") from None
        except KeyError as exc:
            raise ConfigError(f"{path}:{number}: not a question line (no {exc} field)") from None
        except (ValueError, TypeError) as exc:  # json.JSONDecodeError is a ValueError
            raise ConfigError(f"{path}:{number}: not a question line ({exc})") from None
    if not out:
        raise ConfigError(f"{path}: no questions")
    return out


def _question_from(row: Any, number: int) -> EvalQuestion:
    """One question line, every field's type checked: a wrong type is a
    TypeError naming the field, never a guess at what was meant (a string
    `gold_docs` is refused, not read as a list of one)."""
    if not isinstance(row, dict):
        raise TypeError(f"a JSON object is expected, got {_json_type(row)}")
    question, gold = row["question"], row["gold_docs"]
    if not isinstance(question, str):
        raise TypeError(f"'question' must be a non-empty string, not {_json_type(question)}")
    if not question.strip():
        raise TypeError("'question' is empty")
    _require_strings("gold_docs", gold)
    kind, ident = row.get("kind", "single"), row.get("id", number)
    if not isinstance(kind, str):
        raise TypeError(f"'kind' must be a string, not {_json_type(kind)}")
    if not isinstance(ident, (str, int)) or isinstance(ident, bool):
        raise TypeError(f"'id' must be a string or a number, not {_json_type(ident)}")
    answer = row.get("answer")
    # A gold answer is text: a JSON number has no one spelling to grade
    # against (123, 123.0 and 1.23e2 are one number), so it is refused.
    if answer is not None and not isinstance(answer, str):
        raise TypeError(f"'answer' must be a string, not {_json_type(answer)}")
    aliases = row.get("answer_aliases", [])
    _require_strings("answer_aliases", aliases)
    return EvalQuestion(str(ident), question, list(gold), answer, kind or "single", tuple(aliases))


def _require_strings(field: str, value: Any) -> None:
    """`value` is a JSON list of strings, else a TypeError naming `field`."""
    if not isinstance(value, list):
        raise TypeError(f"'{field}' must be a list of strings, not {_json_type(value)}")
    for item in value:
        if not isinstance(item, str):
            raise TypeError(f"'{field}' must be a list of strings, not a list holding {_json_type(item)}")


def _json_type(value: Any) -> str:
    """The JSON name of a value's type, for a message about an input line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return "an object" if isinstance(value, dict) else type(value).__name__


def retrieval_metrics(ranked: list[str], gold: set[str], k: int) -> Metrics:
    """recall@k, precision@k, reciprocal rank within the top k, and all-found
    for one question."""
    top = ranked[:k]
    hits = len(gold & set(top))
    # MRR@k: a gold document ranked below k counts as not found, like recall@k.
    rr = next((1.0 / (i + 1) for i, d in enumerate(top) if d in gold), 0.0)
    return Metrics(
        recall=hits / len(gold) if gold else 0.0,
        precision=hits / len(top) if top else 0.0,
        mrr=rr,
        all_found=1.0 if gold and gold <= set(top) else 0.0,
    )


class _Resolver:
    """Maps a gold file name to a stored document: exact relative path, else
    file name, else file stem (so `x.pdf` gold matches a stored `x.txt`)."""

    def __init__(self, docs: list[DocumentRecord]) -> None:
        self.by_path = {d.path: d.doc_id for d in docs}
        self.by_name: dict[str, str] = {}
        self.by_stem: dict[str, str] = {}
        for d in docs:
            name = Path(d.path).name
            self.by_name.setdefault(name, d.doc_id)
            self.by_stem.setdefault(Path(name).stem, d.doc_id)

    def __call__(self, gold: str) -> str | None:
        return self.by_path.get(gold) or self.by_name.get(Path(gold).name) or self.by_stem.get(Path(gold).stem)


async def chunk_baseline_scores(
    llm: LLM, store: DocumentStore, docs: list[DocumentRecord], questions: list[str], evidence: DocumentEvidence
) -> tuple[list[str], np.ndarray]:
    """Score every node against every question: BM25 offline (the lexical
    scorer; also with the local embedder, which would see only the first 256
    word pieces of a node and take minutes to embed them all), the server's
    embeddings when the summaries were embedded by it. Returns the node →
    document map and a (questions × nodes) score matrix."""
    model = next((d.embedding_model for d in docs if d.embedding_model), LEXICAL_EMBED_MODEL)
    if model in (LEXICAL_EMBED_MODEL, LOCAL_EMBED_MODEL) or llm.metadata.embed_model != model:
        owners = [evidence.doc_ids[i] for i in evidence.node_owner.tolist()]
        rows = [evidence.node_scores(q) for q in questions]
        return owners, np.vstack(rows) if owners else np.zeros((len(questions), 0))
    nodes = store.nodes_for([d.doc_id for d in docs])
    owners = [d.doc_id for d in docs for _ in nodes[d.doc_id]]
    texts = [n.text for d in docs for n in nodes[d.doc_id]]
    node_vecs = await llm.aembed(texts)
    query_vecs = await llm.aembed(questions)
    return owners, query_vecs @ node_vecs.T


def rank_documents_by_nodes(owners: list[str], scores: np.ndarray) -> list[str]:
    """Documents ordered by their best node's score."""
    best: dict[str, float] = {}
    for doc, score in zip(owners, scores.tolist()):
        if score > best.get(doc, float("-inf")):
            best[doc] = score
    return [d for d, s in sorted(best.items(), key=lambda item: -item[1]) if s > 0]


async def evaluate(  # noqa: C901 (listed when the check came in: simplify, then drop this)
    store_path: StoreLocation,
    llm: LLM,
    questions: list[EvalQuestion],
    *,
    retriever: str = RETRIEVERS[0],
    top_k: int = default("top_k"),
    baseline: str | None = None,
    answers: AskOptions | None = None,
    batch_size: int = default("choice_batch_size"),
    candidates: int = default("candidates"),
    limits: Limits = DEFAULT_LIMITS,
    progress: Callable[[int, int], None] | None = None,
    also: Sequence[str] = (),
    unanswerable: AskOptions | None = None,
) -> EvalReport:
    """Retrieval metrics of `retriever` (reported as system "summary" and
    under its own name) and of each retriever in `also` (under its name),
    beside the chunk baseline with baseline="chunks". With `answers` (the
    options to ask with, their mode resolved when they were made), every
    question is also answered and the answer graded. With `unanswerable`
    (options made the same way), every question is asked again with its gold
    documents hidden: answer and abstention rates per kind."""
    import time

    started = time.monotonic()
    if not store_exists(store_path):
        where = display_location(store_path)
        raise ConfigError(f"no store at {where}; run `docsum build` on the question set's folder first")
    if baseline not in (None, "chunks"):
        raise ConfigError(f"unknown baseline {baseline!r}; the one baseline is 'chunks'")
    try:
        names = check("eval_retrievers", [retriever, *also], "retriever")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    unresolved: list[str] = []
    with open_store(store_path, create=False, readonly=True) as store, track_calls() as calls:
        docs = store.list_documents(with_embeddings=True)
        if not docs:
            raise ConfigError(f"the store {display_location(store_path)} has no documents")
        resolve = _Resolver(docs)
        path_of = {d.doc_id: d.path for d in docs}
        gold_sets: list[set[str]] = []
        for q in questions:
            ids = set()
            for g in q.gold_docs:
                doc_id = resolve(g)
                if doc_id is None:
                    unresolved.append(g)
                else:
                    ids.add(doc_id)
            gold_sets.append(ids)

        # One corpus for every question and retriever: the vectors and the
        # BM25 evidence are read (or built) once.
        corpus = StoreCorpus(store, None)

        done = 0
        gate = asyncio.Semaphore(limits.questions)

        async def one(i: int, q: EvalQuestion, name: str) -> tuple[Metrics, list[str]]:
            nonlocal done
            async with gate:
                found = await retrieve(
                    name, llm, q.question, corpus, top_k=top_k, batch_size=batch_size, candidates=candidates
                )
            chosen = [c.doc_id for c in found.chosen]
            rest = [
                c.doc_id for c in found.candidates if c.doc_id not in chosen and c.score is not None and c.score > 0
            ]
            metrics = dataclasses.replace(
                retrieval_metrics(chosen + rest, gold_sets[i], top_k),
                recall=retrieval_metrics(chosen, gold_sets[i], top_k).recall,
            )
            done += 1
            if progress:
                progress(done, len(questions) * len(names))
            return metrics, chosen

        # Per question: each system's metrics ("summary" beside the first
        # retriever's name), what it retrieved, what the chunks did.
        per_question: list[dict[str, Metrics]] = [{} for _ in questions]
        retrieved: list[tuple[str, ...]] = [() for _ in questions]
        for name in names:
            results = await asyncio.gather(*(one(i, q, name) for i, q in enumerate(questions)))
            for i, (metrics, chosen) in enumerate(results):
                per_question[i][name] = metrics
                if name == retriever:
                    per_question[i]["summary"] = metrics
                    retrieved[i] = tuple(path_of[d] for d in chosen)
        chunks_retrieved: list[tuple[str, ...] | None] = [None for _ in questions]
        if baseline == "chunks":
            owners, scores = await chunk_baseline_scores(
                llm, store, docs, [q.question for q in questions], corpus.bm25_evidence()
            )
            for i in range(len(questions)):
                ranked = rank_documents_by_nodes(owners, scores[i]) if scores.size else []
                chunks_retrieved[i] = tuple(path_of[d] for d in ranked[:top_k])
                per_question[i]["chunks"] = retrieval_metrics(ranked, gold_sets[i], top_k)

        grades: list[AnswerGrade | None] = [None for _ in questions]
        answer_summary = None
        if answers is not None:
            grades, answer_summary = await _score_answers(store_path, llm, questions, answers)  # type: ignore[assignment]
        outcomes: list[AbstentionOutcome | None] = [None for _ in questions]
        abstention = None
        if unanswerable is not None:
            outcomes, abstention = await _abstention_rates(store_path, llm, gold_sets, questions, unanswerable, limits)  # type: ignore[assignment]
        made = tuple(calls)

    rows = tuple(
        QuestionRow(
            q.id,
            q.kind,
            tuple(sorted(path_of[g] for g in gold_sets[i])),
            per_question[i],
            retrieved[i],
            chunks_retrieved[i],
            grades[i],
            outcomes[i],
        )
        for i, q in enumerate(questions)
    )
    systems = ["summary", *names] + (["chunks"] if baseline == "chunks" else [])
    summary: dict[str, dict[str, KindMetrics]] = {}
    for system in systems:
        per_kind: dict[str, list[Metrics]] = {"all": []}
        for row in rows:
            per_kind["all"].append(row.metrics[system])
            per_kind.setdefault(row.kind, []).append(row.metrics[system])
        summary[system] = {kind: aggregate(items) for kind, items in per_kind.items()}
    return EvalReport(
        retriever,
        top_k,
        summary,
        rows,
        answer_summary,
        abstention,
        made,
        tuple(unresolved),
        time.monotonic() - started,
        engine=llm.metadata.engine,
    )


async def _score_answers(
    store_path: StoreLocation, llm: LLM, questions: list[EvalQuestion], options: AskOptions
) -> tuple[list[AnswerGrade], AnswerSummary]:
    """Ask every question in full and grade the answer: an LLM judge when a
    model is configured, token overlap with the reference otherwise."""
    use_judge = not llm.metadata.extractive
    seen: list[GradedAnswer] = []

    async def one(q: EvalQuestion) -> AnswerGrade:
        if not q.answer:
            return AnswerGrade(skipped="no reference answer")
        result = await ask(store_path, llm, q.question, options)
        answer = result.answer
        seen.append(_graded(q, result))
        if use_judge:
            verdict = await llm.apredict(
                JUDGE_PROMPT, json_mode=True, query_str=q.question, reference=q.answer, answer=answer
            )
            correct, reason = _parse_verdict(verdict)
        else:
            correct, reason = judge_by_overlap(answer, q.answer)
        return AnswerGrade(answer, result.status.value, bool(correct), reason)

    grades = list(await asyncio.gather(*(one(q) for q in questions)))
    graded = [g for g in grades if not g.skipped]
    by_kind: dict[str, list[bool]] = {}
    for q, grade in zip(questions, grades):
        if not grade.skipped:
            by_kind.setdefault(q.kind, []).append(grade.correct)
    return grades, AnswerSummary(
        grader="llm-judge" if use_judge else "token-overlap",
        mode=options.label,
        graded=len(graded),
        accuracy=round(sum(1 for g in graded if g.correct) / len(graded), 4) if graded else None,
        by_kind={k: round(sum(v) / len(v), 4) for k, v in by_kind.items()},
        measures=measure(seen),
    )


def _graded(q: EvalQuestion, result: AskResult) -> GradedAnswer:
    """What the answer measures need of one answer: the documents it cites
    (its citations' documents, else its sources'), each with what names it."""
    cited = list(dict.fromkeys(c.path for c in result.citations)) or list(dict.fromkeys(s.path for s in result.sources))
    summaries = {d.path: d.summary for d in result.documents}
    return GradedAnswer(
        q.kind,
        q.question,
        result.answer,
        result.status.value == "ok" and bool(result.answer.strip()),
        q.answer,
        q.aliases,
        tuple(cited),
        tuple(f"{path}\n{summaries.get(path, '')}" for path in cited),
        tuple(q.gold_docs),
    )


async def _abstention_rates(
    store_path: StoreLocation,
    llm: LLM,
    gold_sets: list[set[str]],
    questions: list[EvalQuestion],
    options: AskOptions,
    limits: Limits,
) -> tuple[list[AbstentionOutcome], AbstentionRates]:
    """Ask every question twice: as usual (an answer is expected) and with its
    gold documents hidden from retrieval (an abstention is expected). The
    answer rate counts normal runs that answered (status ok), the abstention
    rate hidden-gold runs that abstained; both per kind. Whether an answer is
    right is --answers' business, not this."""
    gate = asyncio.Semaphore(limits.questions)

    async def run(q: EvalQuestion, hidden: frozenset[str]) -> AskOutcome:
        scores: list[float] = []
        ANSWER_SCORES.set(scores)  # this task's own: gather runs each question in a task
        async with gate:
            result = await ask(store_path, llm, q.question, dataclasses.replace(options, hidden_doc_ids=hidden))
        return AskOutcome(result.status.value, result.abstained, result.reason, max(scores, default=None))

    async def one(i: int, q: EvalQuestion) -> AbstentionOutcome:
        normal = await run(q, frozenset())
        if q.kind == UNANSWERABLE_KIND:
            return AbstentionOutcome(normal, normal)  # its documents do not answer it: hiding them shows nothing more
        return AbstentionOutcome(normal, await run(q, frozenset(gold_sets[i])))

    outcomes = list(await asyncio.gather(*(one(i, q) for i, q in enumerate(questions))))
    kinds: dict[str, list[AbstentionOutcome]] = {"all": []}
    for q, outcome in zip(questions, outcomes):
        kinds["all"].append(outcome)
        kinds.setdefault(q.kind, []).append(outcome)

    def rate(items: list[AbstentionOutcome], hidden: bool, want_answer: bool) -> float | None:
        if not items:
            return None
        hits = sum(1 for o in items if ((o.hidden_gold if hidden else o.normal).status == "ok") == want_answer)
        return round(hits / len(items), 4)

    answerable = [o for q, o in zip(questions, outcomes) if q.kind != UNANSWERABLE_KIND]
    unanswerable = kinds.get(UNANSWERABLE_KIND, [])
    return outcomes, AbstentionRates(
        mode=options.label,
        by_kind={
            kind: KindRates(len(items), rate(items, False, True), rate(items, True, False))
            for kind, items in kinds.items()
        },
        answerable_declined=rate(answerable, False, False),
        unanswerable_declined=rate(unanswerable, False, False),
        hidden_gold_declined=rate(answerable, True, False),
        trade_off=floor_trade_off([o.normal for o in answerable], [o.normal for o in unanswerable], llm.answer_floor)
        if isinstance(llm, ExtractiveLLM)
        else (),
    )


def _parse_verdict(text: str) -> tuple[bool, str]:
    import re

    match = re.search(r"\{.*\}", text, re.DOTALL)
    if match:
        try:
            data = json.loads(match.group(0))
            correct = data.get("correct")
            if isinstance(correct, str):
                correct = correct.strip().lower() in ("true", "yes")
            return bool(correct), str(data.get("reason", ""))[:200]
        except json.JSONDecodeError:
            pass
    lowered = text.strip().lower()
    return lowered.startswith(("yes", "true", "correct")), "judge reply was not JSON: " + text.strip()[:120]
