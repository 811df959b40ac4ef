"""`docsum ask`: pick documents by summary, post-process their nodes, answer.

Every stage reports what it did (`AskResult.steps`, `notes`) so an empty or
surprising answer can be explained, and `status`/`reason` say why when there
is nothing to answer from.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable, Iterator, TypeVar

from docsum.errors import ConfigError, ContextLengthError, DocsumError, ExitCode, LLMError
from docsum.models.llm import LLM, closing_stream, recording_calls, track_calls
from docsum.models.prompts import POLISH_PROMPT, TEXT_QA_PROMPT, TREE_SUMMARIZE_PROMPT, PromptTemplate, emotion_key, with_emotion
from docsum.query.abstain import relevance_floor, says_cannot_answer
from docsum.query.budget import PromptBudget
from docsum.query.citations import cite, display_names
from docsum.query.corpus import HiddenDocuments, StoreCorpus
from docsum.query.postprocess import (
    RERANK_BATCH_SIZE,
    StepReport,
    compress,
    llm_rerank,
    long_context_reorder,
    similarity_cutoff,
)
from docsum.query.rating import planned_rating_calls
from docsum.query.retrieve import Candidate, Retrieval, SummaryCorpus, planned_choice_calls, retrieve
from docsum.query.synthesizers import (
    AnswerOptions,
    LLMSynthesizer,
    BaseSynthesizer,
    Mode,
    guard_refine_stream,
    is_meta_answer,
    resolve_mode,
)
from docsum.schema import CallRecord, Node, NodeWithScore, Response, ResponseStatus, Usage
from docsum.settings import DEFAULT_LIMITS, RETRIEVERS, Limits, check, default
from docsum.store.base import DocumentStore, StoreLocation, display_location, open_store

log = logging.getLogger("docsum")

# Room a question may take in the prompt: at most this share of the context
# window left after the answer's budget, so the documents still fit beside it.
MAX_QUESTION_SHARE = 0.5
T = TypeVar("T")

# Candidates whose summaries are read and listed by --explain (at least
# --top-k and --candidates): reading all of them would make every question
# cost as much as the store is large.
SHOWN_CANDIDATES = 50

# Names the synthesizers fill in themselves; a --var cannot set them.
RESERVED_VARIABLES = frozenset({"query_str", "context_str", "context_msg", "existing_answer"})


@dataclass
class AskOptions:
    # Defaults are the settings' (docsum.settings), so Python and the command line agree.
    mode: str = default("mode")
    retriever: str = RETRIEVERS[0]  # the command line picks one for the engine: see docsum.config.ask_options
    top_k: int = default("top_k")
    choice_batch_size: int = default("choice_batch_size")
    candidates: int = default("candidates")
    # The relevance floor; None means the retriever's calibrated default
    # (docsum.query.abstain.relevance_floor).
    min_score: float | None = default("min_score")
    cutoff: float | None = None
    rerank: int | None = None
    compress: bool = False
    reorder: bool = False
    structured_filter: bool = False
    polish: bool = False
    emotion: str | None = None
    text_qa_template: PromptTemplate | None = None
    refine_template: PromptTemplate | None = None
    variables: dict[str, str] = field(default_factory=dict)
    stream: bool = False
    synthesizer: BaseSynthesizer | None = None  # a custom one, ready made, replaces `mode`
    max_calls: int | None = None  # refuse (exit 2) a question that plans more LLM calls
    limits: Limits = DEFAULT_LIMITS  # `questions` bounds ask_many
    # `mode` resolved, once, when the options are made: a wrong name or an
    # answer option the synthesizer would not use is exit 2 before anything
    # is read or sent.
    resolved_mode: Mode = field(init=False, repr=False)

    def __post_init__(self) -> None:
        given = {
            "template": self.text_qa_template is not None,
            "refine_template": self.refine_template is not None,
            "structured_filter": self.structured_filter,
            "emotion": emotion_key(self.emotion) is not None,
        }
        if self.synthesizer is None:
            self.resolved_mode = resolve_mode(self.mode)
            self.resolved_mode.refuse_untaken(**given)
            return
        # A synthesizer made by the caller was given its templates then.
        passed = [name for name, value in given.items() if value]
        if passed:
            raise ConfigError(
                f"{', '.join(passed)}: a ready-made synthesizer takes its templates and filtering "
                "from its own constructor, not from the ask options"
            )
        self.resolved_mode = Mode(self.synthesizer.label, type(self.synthesizer))

    @property
    def label(self) -> str:
        """What answers report the synthesizer by (`AskResult.mode`)."""
        return self.resolved_mode.label
    # Documents retrieval never sees (docsum eval --unanswerable hides the
    # gold documents this way to ask a question the store cannot answer).
    hidden_doc_ids: frozenset[str] = frozenset()


@dataclass
class AskResult:
    question: str
    answer: str
    status: ResponseStatus
    reason: str
    mode: str
    retriever: str
    documents: list[dict[str, Any]] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # What the user should hear about even without --explain: an LLM answer
    # that could not be parsed, a step that would have removed everything.
    warnings: list[str] = field(default_factory=list)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    plan: dict[str, Any] = field(default_factory=dict)
    calls: list[CallRecord] = field(default_factory=list)
    engine: str = ""
    stream: AsyncIterator[str] | None = None
    # The documents do not answer the question (as opposed to: there is
    # nothing to ask, such as an empty store). The text output says so.
    abstained: bool = False
    # [{marker, doc, path, root, pages, quote}] and the cited sentences their
    # passages do not support (see docsum.query.citations).
    citations: list[dict[str, Any]] = field(default_factory=list)
    unsupported: list[dict[str, Any]] = field(default_factory=list)
    # The passages as numbered for the answer step (marker n is passages[n-1]),
    # and how to name each document to a person (doc_id → name).
    passages: list[NodeWithScore] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)
    roots: dict[str, str] = field(default_factory=dict)  # doc_id → build root

    @property
    def usage(self) -> Usage:
        return Usage.of(self.calls)

    async def drain(self) -> str:
        if self.stream is not None:
            self.answer = "".join([piece async for piece in self.stream])
            self.stream = None
            self.finish()
        return self.answer

    def finish(self) -> None:
        """Once the whole answer is known: a reply that declines is an
        abstention; otherwise its citation markers are checked."""
        if self.status is ResponseStatus.OK and says_cannot_answer(self.answer):
            self.abstain("the answer step found no answer in the passages")
            return
        self.attach_citations()

    def as_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "answer": self.answer,
            "status": self.status.value,
            "reason": self.reason,
            "mode": self.mode,
            "retriever": self.retriever,
            "engine": self.engine,
            "documents": self.documents,
            "sources": self.sources,
            "steps": self.steps,
            "notes": self.notes,
            "warnings": self.warnings,
            "abstained": self.abstained,
            "citations": self.citations,
            "unsupported": self.unsupported,
            "usage": self.usage.as_dict(),
        }

    def attach_citations(self) -> None:
        """Validate the answer's [n] markers against its numbered passages and
        fill `citations` and `unsupported` (once the answer is complete)."""
        if not self.passages or not self.answer:
            return
        self.answer, report = cite(self.answer, self.passages, self.roots)
        self.citations, self.unsupported = report.citations, report.unsupported
        if report.removed_markers:
            numbers = ", ".join(f"[{m}]" for m in report.removed_markers)
            self.warnings.append(f"removed citation marker(s) {numbers}: no such passage (there are {len(self.passages)})")

    def abstain(self, reason: str, status: ResponseStatus = ResponseStatus.NOT_SATISFIED) -> AskResult:
        """Turn this result into an abstention: no answer, no sources."""
        self.answer, self.status, self.reason, self.abstained = "", status, reason, True
        self.sources = []
        self.stream = None
        return self


def _empty(question: str, options: AskOptions, reason: str, **extra: Any) -> AskResult:
    return AskResult(question, "", ResponseStatus.EMPTY, reason, options.label, options.retriever, **extra)


def _abstain(question: str, options: AskOptions, reason: str, **extra: Any) -> AskResult:
    return _empty(question, options, reason, **extra).abstain(reason, ResponseStatus.EMPTY)


def _templates(options: AskOptions) -> tuple[PromptTemplate | None, PromptTemplate | None, PromptTemplate | None]:
    """The QA, refine and summary templates the user's options make (None:
    the synthesizer's own). A user's --template is the QA template and, in a
    summarizing mode, the summary one; --emotion goes into both."""
    if options.text_qa_template is None and emotion_key(options.emotion) is None:
        return None, options.refine_template, None
    qa = options.text_qa_template or TEXT_QA_PROMPT
    summary = options.text_qa_template.with_kind("summary") if options.text_qa_template else TREE_SUMMARIZE_PROMPT
    return with_emotion(qa, options.emotion), options.refine_template, with_emotion(summary, options.emotion)


def make_synthesizer(llm: LLM | None, options: AskOptions, progress: Callable[[str], None] | None = None) -> BaseSynthesizer:
    if options.synthesizer is not None:
        return options.synthesizer
    qa, refine, summary = _templates(options)
    synth = options.resolved_mode.create(
        llm, AnswerOptions(qa, refine, summary, options.structured_filter),
        streaming=options.stream and not options.polish, progress=progress,
    )
    # Every mode in which a model writes text sees its passages numbered, for
    # citations; no_text and context_only hand the passages on as they are.
    synth.numbered_passages = isinstance(synth, LLMSynthesizer)
    return synth


def _check_question(llm: LLM, question: str, options: AskOptions) -> str:
    """The question, stripped, or ConfigError (exit 2) before anything is spent."""
    question = question.strip()
    if not question:
        raise ConfigError("the question is empty")
    meta = llm.metadata
    limit = int((meta.context_window - meta.num_output) * MAX_QUESTION_SHARE)
    length = meta.tokenizer.count(question)
    if length > limit:
        raise ConfigError(
            f"the question is {length} tokens long; with a {meta.context_window}-token context window at most "
            f"{limit} fit beside the documents (shorten it, or set --context-window for a model with a bigger window)"
        )
    return question


def _check_options(llm: LLM, options: AskOptions, progress: Callable[[str], None] | None) -> BaseSynthesizer:
    # The ranges the command line checks, for options made in Python.
    for name in ("top_k", "choice_batch_size", "candidates", "rerank", "max_calls", "retriever", "cutoff", "min_score"):
        try:
            check(name, getattr(options, name))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    reserved = sorted(RESERVED_VARIABLES & set(options.variables))
    if reserved:
        raise ConfigError(f"--var cannot set {', '.join(reserved)}: docsum fills it in itself")
    synth = make_synthesizer(llm, options, progress)
    # Fail on a template variable without a value before spending anything.
    synth.check_templates(options.variables)
    if options.polish:
        POLISH_PROMPT.check({"query_str", "existing_answer", "context_msg"})
    return synth


@contextlib.contextmanager
def _open_corpus(store_path: StoreLocation) -> Iterator[tuple[DocumentStore, StoreCorpus] | None]:
    """The store and its corpus, or None when there is no store at all."""
    try:
        store = open_store(store_path, create=False, readonly=True)
    except FileNotFoundError:  # no file, an empty one, or no docsum schema: nothing was ever stored
        yield None
        return
    with store:
        yield store, StoreCorpus.beside(store)


async def ask(
    store_path: StoreLocation,
    llm: LLM,
    question: str,
    options: AskOptions,
    *,
    explain: Callable[[str], None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> AskResult:
    question = _check_question(llm, question, options)
    synth = _check_options(llm, options, progress)
    with _open_corpus(store_path) as opened:
        if opened is not None and explain is not None:
            explain(f"store: {opened[0].search_description()}")
        return await _ask_in(opened, store_path, llm, question, options, synth, explain)


async def _ask_in(
    opened: tuple[DocumentStore, StoreCorpus] | None,
    store_path: StoreLocation,
    llm: LLM,
    question: str,
    options: AskOptions,
    synth: BaseSynthesizer,
    explain: Callable[[str], None] | None,
) -> AskResult:
    if opened is None:
        where = display_location(store_path)
        return _empty(question, options, f"no store at {where}; run `docsum build PATH` first", engine=llm.metadata.engine)
    store, whole = opened
    corpus: SummaryCorpus = whole
    if not corpus.size():
        return _empty(question, options, "the store has no documents; run `docsum build PATH` first", engine=llm.metadata.engine)
    if options.hidden_doc_ids:
        corpus = HiddenDocuments(corpus, options.hidden_doc_ids)
    with track_calls() as calls:
        result = await _answer(store, llm, question, options, synth, corpus, explain)
        if result.stream is not None:
            result.stream = recording_calls(result.stream, calls)
    result.calls = calls
    result.engine = llm.metadata.engine
    return result


@dataclass
class Question:
    """One question of a `--questions` file: its id (given, else its line
    number) and its text, or why the line could not be read."""

    id: Any
    text: str
    error: str = ""


def read_questions(lines: Iterable[str], where: str) -> list[Question]:
    """JSON lines ({"question": ..., "id": ...}) or one plain question per
    line; blank lines are skipped. A line that starts like JSON but is not a
    usable object is kept as an error (reported in its place, exit 2)."""
    out: list[Question] = []
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text:
            continue
        if not text.startswith("{"):
            out.append(Question(number, text))
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            out.append(Question(number, "", f"{where}:{number}: not valid JSON ({exc.msg})"))
            continue
        qid = data.get("id", number) if isinstance(data, dict) else number
        if not isinstance(qid, (str, int, float)) or isinstance(qid, bool):
            qid = number
        question = data.get("question") if isinstance(data, dict) else None
        if not isinstance(question, str):
            out.append(Question(qid, "", f"{where}:{number}: no \"question\" string in the JSON object"))
            continue
        out.append(Question(qid, question))
    return out


def exit_code_of(result: AskResult | DocsumError) -> int:
    """An answer's own exit code, as `docsum ask` would end with it."""
    if isinstance(result, DocsumError):
        return int(result.exit_code)
    return int(ExitCode.OK if result.status is ResponseStatus.OK else ExitCode.NOTHING_TO_ANSWER)


# How bad each exit code is, for the exit code of many answers: an error over
# a bad question over nothing to answer from over ok.
_SEVERITY = {int(ExitCode.OK): 0, int(ExitCode.NOTHING_TO_ANSWER): 1, int(ExitCode.USAGE): 2}


def worst_exit_code(codes: Iterable[int]) -> int:
    return max(codes, key=lambda code: _SEVERITY.get(code, 3), default=int(ExitCode.OK))


async def ask_many(
    store_path: StoreLocation,
    llm: LLM,
    questions: list[Question],
    options: AskOptions,
    on_answer: Callable[[Question, AskResult | DocsumError], None],
    *,
    explain: Callable[[Question, str], None] | None = None,
) -> None:
    """Answer every question with one store, one vector file and one LLM
    client, at most `options.limits.questions` at a time (the LLM's own limit
    bounds requests in flight across all of them). `on_answer` gets each
    result, or the error that stopped it, as soon as it is known."""
    options.stream = False
    synth = _check_options(llm, options, None)  # one synthesizer serves every question
    gate = asyncio.Semaphore(options.limits.questions)
    with _open_corpus(store_path) as opened:

        async def one(item: Question) -> None:
            async with gate:
                if item.error:
                    on_answer(item, ConfigError(item.error))
                    return
                say = (lambda msg: explain(item, msg)) if explain is not None else None
                try:
                    question = _check_question(llm, item.text, options)
                    result: AskResult | DocsumError = await _ask_in(opened, store_path, llm, question, options, synth, say)
                except (LLMError, ConfigError) as exc:
                    result = exc
                on_answer(item, result)

        await asyncio.gather(*(one(q) for q in questions))


# LLM retrieval planning more calls than this per question gets a warning
# that names the cheaper hybrid retriever (200 summaries at the default
# batch of 10).
EXPENSIVE_RETRIEVAL_CALLS = 20


def _retrieval_cost_warnings(options: AskOptions, documents: int, planned: dict[str, int | None]) -> list[str]:
    calls = planned.get(f"retrieval ({options.retriever})") or 0
    if options.retriever != "llm" or calls <= EXPENSIVE_RETRIEVAL_CALLS:
        return []
    hybrid = planned_choice_calls("hybrid", documents, options.choice_batch_size, options.candidates)
    return [
        f"LLM retrieval shows the LLM all {documents} summaries: at least {calls} LLM calls for this question; "
        f"--retriever hybrid shows it only the {min(documents, options.candidates)} best by embedding "
        f"({hybrid} call{'s' if hybrid != 1 else ''})"
    ]


def _check_call_limit(options: AskOptions, planned: dict[str, int | None], over: str) -> None:
    """Refuse (exit 2, with the plan) a question planned beyond --max-calls.
    A step whose calls cannot be known in advance (a custom synthesizer)
    counts as none."""
    limit = options.max_calls
    total = sum(calls or 0 for calls in planned.values())
    if limit is None or total <= limit:
        return
    plan = ", ".join(f"{step} {'?' if calls is None else calls}" for step, calls in planned.items())
    hint = " or --retriever hybrid" if options.retriever == "llm" else ""
    raise ConfigError(
        f"this question plans {total} LLM calls ({plan}; over {over}), more than --max-calls {limit}; "
        f"nothing more was sent. Raise --max-calls (or max_calls in config.toml){hint}"
    )


async def _in_step(step: str, work: Awaitable[T]) -> T:
    """Run one stage; a prompt too long for the model says which stage sent it
    (the remedy differs: a smaller --choice-batch-size, --rerank, a window)."""
    try:
        return await work
    except ContextLengthError as exc:
        raise ContextLengthError(f"{step}: {exc}") from None


async def _stream_in_step(step: str, stream: AsyncIterator[str]) -> AsyncIterator[str]:
    try:
        async with closing_stream(stream):
            async for piece in stream:
                yield piece
    except ContextLengthError as exc:
        raise ContextLengthError(f"{step}: {exc}") from None


async def _answer(
    store: DocumentStore,
    llm: LLM,
    question: str,
    options: AskOptions,
    synth: BaseSynthesizer,
    corpus: SummaryCorpus,
    explain: Callable[[str], None] | None,
) -> AskResult:
    say = explain or (lambda _msg: None)
    documents_in_store = corpus.size()
    planned: dict[str, int | None] = {
        f"retrieval ({options.retriever})": planned_choice_calls(
            options.retriever, documents_in_store, options.choice_batch_size, options.candidates
        )
    }
    cost_warnings = _retrieval_cost_warnings(options, documents_in_store, planned)
    for warning in cost_warnings:
        say(f"retrieval: {warning}")
    _check_call_limit(options, planned, f"{documents_in_store} summaries")
    # Summaries are read for the kept candidates only (what --explain lists).
    keep = max(options.top_k, options.candidates, SHOWN_CANDIDATES)
    floor = relevance_floor(options.retriever, corpus.embedding_model(), options.min_score)
    found: Retrieval = await _in_step(f"retrieval ({options.retriever})", retrieve(
        options.retriever, llm, question, corpus,
        top_k=options.top_k, batch_size=options.choice_batch_size, candidates=options.candidates, keep=keep, floor=floor,
    ))
    candidates = [
        {"doc_id": c.doc_id, "path": c.path, "score": c.score, "chosen": c.chosen, "summary": c.summary} | _evidence_of(c)
        for c in found.candidates
    ]
    documents = [
        {"doc_id": c.doc_id, "path": c.path, "score": c.score, "summary": c.summary} | _evidence_of(c)
        for c in found.chosen
    ]
    for c in found.candidates:
        first_line = c.summary.strip().splitlines()[0][:100] if c.summary.strip() else ""
        score = "  -  " if c.score is None else f"{c.score:.3f}"
        via = f" ({c.via})" if found.retriever == "hybrid" and c.via else ""
        shown = c.signals | ({"relevance": c.relevance} if c.relevance is not None and c.via != "embedding" else {})
        signals = f" [{', '.join(f'{k} {v:g}' for k, v in shown.items())}]" if shown else ""
        say(f"[{'x' if c.chosen else ' '}] {score}{via}{signals}  {c.path}: {first_line}")
    unlisted = corpus.size() - len(found.candidates)
    if unlisted > 0:
        say(f"... and {unlisted} lower-scored document(s) not listed")
    for note in found.notes:
        say(f"retrieval: {note}")
    warnings = cost_warnings + [n for n in found.notes if "could not be parsed" in n]
    base: dict[str, Any] = {"documents": documents, "candidates": candidates, "notes": list(found.notes), "warnings": warnings}
    if not found.chosen:
        reason = "no document was chosen for this question"
        if found.notes:
            reason += f" ({found.notes[-1]})"
        return _abstain(question, options, reason, **base)

    chosen, by_doc = found.chosen, store.nodes_for([c.doc_id for c in found.chosen])
    grounding: StepReport | None = None
    if llm.metadata.extractive:
        from docsum.query.grounding import grounded

        chosen, by_doc, grounding = grounded(store, question, found, by_doc, options.top_k, floor)
        if grounding is not None:
            say(f"{grounding.step}: {grounding.before} → {grounding.after} documents; {grounding.note}")
            base["steps"] = [grounding.as_dict()]
            base["documents"] = [d for d in documents if any(c.doc_id == d["doc_id"] for c in chosen)] + [
                {"doc_id": c.doc_id, "path": c.path, "score": c.score, "summary": c.summary} | _evidence_of(c)
                for c in chosen if c not in found.chosen
            ]
            if not chosen:
                return _abstain(question, options, grounding.note, **base)

    nodes: list[NodeWithScore] = []
    for cand in chosen:
        for rec in by_doc.get(cand.doc_id, []):
            node = Node(rec.text, rec.doc_id, cand.path, rec.seq, tuple(rec.pages), rec.start_char, rec.end_char, rec.token_count)
            nodes.append(NodeWithScore(node, cand.score))
    if not nodes:
        return _empty(question, options, "the chosen documents have no text to answer from", **base)

    steps: list[StepReport] = [grounding] if grounding is not None else []
    if options.cutoff is not None:
        nodes, report = similarity_cutoff(nodes, options.cutoff)
        steps.append(report)
    if options.max_calls is not None and nodes:
        # The later steps only ever shrink the passages, so the answer is
        # planned on them as they are now: an upper bound.
        if options.rerank:
            planned["rerank"] = planned_rating_calls(len(nodes), RERANK_BATCH_SIZE)
        if options.compress:
            planned["compress"] = len(nodes)
        answer_calls = synth.plan(question, synth.passages(nodes), **options.variables)
        planned[f"answer ({options.label})"] = answer_calls
        if options.polish and answer_calls != 0:
            planned["polish"] = 1
        _check_call_limit(options, planned, f"{len(nodes)} passages of {len(found.chosen)} documents")
    if options.rerank and nodes:
        nodes, report = await _in_step("rerank", llm_rerank(llm, question, nodes, options.rerank))
        steps.append(report)
    if options.compress and nodes:
        nodes, report = await _in_step("compress", compress(llm, question, nodes))
        steps.append(report)
    if options.reorder and nodes:
        nodes, report = long_context_reorder(nodes)
        steps.append(report)
    for report in steps:
        if report is grounding:
            continue  # already said, in documents
        say(f"{report.step}: {report.before} → {report.after} nodes; {report.note}")
        if "could not be parsed" in report.note or (report.emptied and nodes):
            # (A step that removed everything is the reason itself, not a warning.)
            warnings.append(f"{report.step}: {report.note}")
    base["steps"] = [r.as_dict() for r in steps]
    if not nodes:
        emptied = next((r for r in steps if r.emptied or not r.after), None)
        reason = "a post-retrieval step removed every passage"
        if emptied is not None:
            reason = f"--{emptied.step} removed every passage ({emptied.note})"
        return _empty(question, options, reason, **base)

    tokens = sum(n.node.token_count or llm.metadata.tokenizer.count(n.node.text) for n in nodes)
    planned = synth.plan(question, synth.passages(nodes), **options.variables)
    # no_text and context_only make no call, so there is nothing to polish.
    polishing = options.polish and planned != 0
    planned_total = None if planned is None else planned + (1 if polishing else 0)
    doc_count = len({n.node.doc_id for n in nodes})
    plan = {"documents": doc_count, "nodes": len(nodes), "tokens": tokens, "llm_calls": planned_total}
    say(
        f"plan: {doc_count} document(s) → {len(nodes)} node(s) → {tokens} tokens → "
        f"{'?' if planned_total is None else planned_total} LLM call(s) in {options.label} mode"
    )

    answer_step = f"answer ({options.label})"
    response: Response = await _in_step(answer_step, synth.asynthesize(question, nodes, **options.variables))
    records = store.get_documents(list(dict.fromkeys(n.node.doc_id for n in response.source_nodes)))
    roots = {d.doc_id: d.root for d in records}
    shared = {d.path for d in records if len(store.find_documents(d.path)) > 1}
    sources = [
        {"doc_id": n.node.doc_id, "path": n.node.path, "root": roots.get(n.node.doc_id, ""), "pages": list(n.node.pages),
         "score": n.score, "text": n.node.text}
        for n in response.source_nodes
    ]
    result = AskResult(
        question, response.response, response.status, response.reason, options.label, found.retriever,
        sources=sources, plan=plan, **base,
    )
    result.roots, result.names = roots, display_names([(d.doc_id, d.root, d.path) for d in records], shared)
    if response.status is ResponseStatus.NOT_SATISFIED:
        return result.abstain(response.reason)
    if response.status is not ResponseStatus.OK:
        return result
    if response.stream is None and says_cannot_answer(result.answer):
        return result.abstain("the answer step found no answer in the passages")
    if synth.numbered_passages:
        result.passages = list(response.source_nodes)
    if response.stream is not None:
        # Declines and markers are checked once the stream has been read
        # (AskResult.finish, called by drain and by the text output).
        result.stream = _stream_in_step(answer_step, response.stream)
        return result
    if polishing and result.answer.strip():
        await _in_step("polish", _polish(llm, question, result, nodes, options.stream))
        if result.stream is not None:
            result.stream = _stream_in_step("polish", result.stream)
            return result
    result.finish()
    for flagged in result.unsupported:
        say(f"citation check: not supported by {''.join(f'[{m}]' for m in flagged['markers'])} "
            f"(share of its words found there {flagged['support']:.2f}): {flagged['sentence'][:160]}")
    return result


def _evidence_of(candidate: Candidate) -> dict[str, Any]:
    """A candidate's raw signals and relevance, for the JSON, when it has them."""
    out: dict[str, Any] = {"signals": candidate.signals} if candidate.signals else {}
    if candidate.relevance is not None:
        out["relevance"] = candidate.relevance
    return out


async def _polish(llm: LLM, question: str, result: AskResult, nodes: list[NodeWithScore], stream: bool) -> None:
    """One more pass: refine the answer against the passages; keep the
    original when the reply adds nothing or talks about the refining."""
    budget = PromptBudget(llm.metadata)
    template = POLISH_PROMPT.partial_format(query_str=question, existing_answer=result.answer)
    fitted, _ = budget.truncate(template, ["\n\n".join(n.node.text for n in nodes)])
    context = fitted[0] if fitted else ""
    original = result.answer
    if stream:
        result.stream = _polish_stream(llm.astream(template, context_msg=context), original)
        return
    polished = (await llm.apredict(template, context_msg=context)).strip()
    if polished and not is_meta_answer(polished):
        result.answer = polished
    else:
        result.notes.append("polish: the final pass added nothing; kept the original answer")


async def _polish_stream(stream: AsyncIterator[str], original: str) -> AsyncIterator[str]:
    async with closing_stream(guard_refine_stream(stream, original)) as guarded:
        async for piece in guarded:
            yield piece
