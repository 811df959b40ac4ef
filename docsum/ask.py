"""`docsum ask`: pick documents by summary, post-process their nodes, answer.

Every stage reports what it did (`AskResult.steps`, `notes`) so an empty or
surprising answer can be explained, and `status`/`reason` say why when there
is nothing to answer from.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, TypeVar

from docsum.budget import PromptBudget
from docsum.errors import ConfigError, ContextLengthError
from docsum.llm import LLM, closing_stream, track_calls
from docsum.postprocess import StepReport, compress, llm_rerank, long_context_reorder, similarity_cutoff
from docsum.prompts import POLISH_PROMPT, TEXT_QA_PROMPT, TREE_SUMMARIZE_PROMPT, PromptTemplate, with_emotion
from docsum.corpus import StoreCorpus
from docsum.retrieve import RETRIEVERS, Retrieval, SummaryCorpus, retrieve
from docsum.schema import CallRecord, Node, NodeWithScore, Response, ResponseStatus, Usage
from docsum.stores import DocumentStore, StoreLocation, display_location, open_store
from docsum.synthesize import BaseSynthesizer, ResponseMode, get_response_synthesizer, is_meta_answer, planned_calls

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
    mode: str = ResponseMode.COMPACT.value
    retriever: str = "fused"
    top_k: int = 3
    choice_batch_size: int = 10
    candidates: int = 20
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
    synthesizer: BaseSynthesizer | None = None  # a custom one replaces `mode`


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

    @property
    def usage(self) -> Usage:
        return Usage.of(self.calls)

    async def drain(self) -> str:
        if self.stream is not None:
            self.answer = "".join([piece async for piece in self.stream])
            self.stream = None
        return self.answer

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
            "usage": self.usage.as_dict(),
        }


def _empty(question: str, options: AskOptions, reason: str, **extra: Any) -> AskResult:
    return AskResult(question, "", ResponseStatus.EMPTY, reason, options.mode, options.retriever, **extra)


def _templates(options: AskOptions) -> tuple[PromptTemplate, PromptTemplate | None, PromptTemplate]:
    qa = options.text_qa_template or TEXT_QA_PROMPT
    # A user's --template is the QA template and, in tree_summarize, the summary one.
    summary = options.text_qa_template.with_kind("summary") if options.text_qa_template else TREE_SUMMARIZE_PROMPT
    qa, summary = with_emotion(qa, options.emotion), with_emotion(summary, options.emotion)
    return qa, options.refine_template, summary


def make_synthesizer(llm: LLM | None, options: AskOptions, progress: Callable[[str], None] | None = None) -> BaseSynthesizer:
    if options.synthesizer is not None:
        return options.synthesizer
    qa, refine, summary = _templates(options)
    return get_response_synthesizer(
        options.mode,
        llm=llm,
        text_qa_template=qa,
        refine_template=refine,
        summary_template=summary,
        structured_answer_filtering=options.structured_filter,
        streaming=options.stream and not options.polish,
        progress=progress,
    )


async def ask(
    store_path: StoreLocation,
    llm: LLM,
    question: str,
    options: AskOptions,
    *,
    explain: Callable[[str], None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> AskResult:
    question = question.strip()
    if not question:
        raise ConfigError("the question is empty")
    if options.cutoff is not None and not 0.0 <= options.cutoff <= 1.0:  # also refuses NaN
        raise ConfigError(f"--cutoff: {options.cutoff} is out of range (allowed: 0..1, a fraction of the best score)")
    meta = llm.metadata
    limit = int((meta.context_window - meta.num_output) * MAX_QUESTION_SHARE)
    length = meta.tokenizer.count(question)
    if length > limit:
        raise ConfigError(
            f"the question is {length} tokens long; with a {meta.context_window}-token context window at most "
            f"{limit} fit beside the documents (shorten it, or set --context-window for a model with a bigger window)"
        )
    for name, value in (("--top-k", options.top_k), ("--choice-batch-size", options.choice_batch_size),
                        ("--candidates", options.candidates), ("--rerank", options.rerank)):
        if value is not None and value < 1:
            raise ConfigError(f"{name} must be at least 1, got {value}")
    if options.retriever not in RETRIEVERS:
        raise ConfigError(f"unknown retriever {options.retriever!r}; choose one of {', '.join(RETRIEVERS)}")
    reserved = sorted(RESERVED_VARIABLES & set(options.variables))
    if reserved:
        raise ConfigError(f"--var cannot set {', '.join(reserved)}: docsum fills it in itself")
    synth = make_synthesizer(llm, options, progress)
    # Fail on a template variable without a value before spending anything.
    synth.check_templates(options.variables)
    if options.polish:
        POLISH_PROMPT.check({"query_str", "existing_answer", "context_msg"})

    try:
        store = open_store(store_path, create=False, readonly=True)
    except FileNotFoundError:  # no file, an empty one, or no docsum schema: nothing was ever stored
        where = display_location(store_path)
        return _empty(question, options, f"no store at {where}; run `docsum build PATH` first", engine=llm.metadata.engine)
    with store:
        if explain is not None:
            explain(f"store: {store.search_description()}")
        corpus = StoreCorpus.beside(store)
        if not corpus.size():
            return _empty(question, options, "the store has no documents; run `docsum build PATH` first", engine=llm.metadata.engine)
        with track_calls() as calls:
            result = await _answer(store, llm, question, options, synth, corpus, explain)
            if result.stream is not None:
                result.stream = _with_calls(result.stream, calls)
        result.calls = calls
        result.engine = llm.metadata.engine
        return result


async def _with_calls(stream: AsyncIterator[str], calls: list[CallRecord]) -> AsyncIterator[str]:
    from docsum.llm import _active_sinks

    token = _active_sinks.set(_active_sinks.get() + (calls,))
    try:
        async with closing_stream(stream):
            async for piece in stream:
                yield piece
    finally:
        _active_sinks.reset(token)


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
    # Summaries are read for the kept candidates only (what --explain lists).
    keep = max(options.top_k, options.candidates, SHOWN_CANDIDATES)
    found: Retrieval = await _in_step(f"retrieval ({options.retriever})", retrieve(
        options.retriever, llm, question, corpus,
        top_k=options.top_k, batch_size=options.choice_batch_size, candidates=options.candidates, keep=keep,
    ))
    candidates = [
        {"doc_id": c.doc_id, "path": c.path, "score": c.score, "chosen": c.chosen, "summary": c.summary}
        | ({"signals": c.signals} if c.signals else {})
        for c in found.candidates
    ]
    documents = [
        {"doc_id": c.doc_id, "path": c.path, "score": c.score, "summary": c.summary} | ({"signals": c.signals} if c.signals else {})
        for c in found.chosen
    ]
    for c in found.candidates:
        first_line = c.summary.strip().splitlines()[0][:100] if c.summary.strip() else ""
        score = "  -  " if c.score is None else f"{c.score:.3f}"
        via = f" ({c.via})" if found.retriever == "hybrid" and c.via else ""
        signals = f" [{', '.join(f'{k} {v:g}' for k, v in c.signals.items())}]" if c.signals else ""
        say(f"[{'x' if c.chosen else ' '}] {score}{via}{signals}  {c.path}: {first_line}")
    unlisted = corpus.size() - len(found.candidates)
    if unlisted > 0:
        say(f"... and {unlisted} lower-scored document(s) not listed")
    for note in found.notes:
        say(f"retrieval: {note}")
    warnings = [n for n in found.notes if "could not be parsed" in n]
    base: dict[str, Any] = {"documents": documents, "candidates": candidates, "notes": list(found.notes), "warnings": warnings}
    if not found.chosen:
        reason = "no document was chosen for this question"
        if found.notes:
            reason += f" ({found.notes[-1]})"
        return _empty(question, options, reason, **base)

    nodes: list[NodeWithScore] = []
    by_doc = store.nodes_for([c.doc_id for c in found.chosen])
    for cand in found.chosen:
        for rec in by_doc.get(cand.doc_id, []):
            node = Node(rec.text, rec.doc_id, cand.path, rec.seq, tuple(rec.pages), rec.start_char, rec.end_char, rec.token_count)
            nodes.append(NodeWithScore(node, cand.score))
    if not nodes:
        return _empty(question, options, "the chosen documents have no text to answer from", **base)

    steps: list[StepReport] = []
    if options.cutoff is not None:
        nodes, report = similarity_cutoff(nodes, options.cutoff)
        steps.append(report)
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
    planned = planned_calls(synth, question, [n.node.text for n in nodes], **options.variables)
    # no_text and context_only make no call, so there is nothing to polish.
    polishing = options.polish and planned != 0
    planned_total = None if planned is None else planned + (1 if polishing else 0)
    doc_count = len({n.node.doc_id for n in nodes})
    plan = {"documents": doc_count, "nodes": len(nodes), "tokens": tokens, "llm_calls": planned_total}
    say(
        f"plan: {doc_count} document(s) → {len(nodes)} node(s) → {tokens} tokens → "
        f"{'?' if planned_total is None else planned_total} LLM call(s) in {options.mode} mode"
    )

    answer_step = f"answer ({options.mode})" if options.synthesizer is None else "answer"
    response: Response = await _in_step(answer_step, synth.asynthesize(question, nodes, **options.variables))
    sources = [
        {"doc_id": n.node.doc_id, "path": n.node.path, "pages": list(n.node.pages), "score": n.score, "text": n.node.text}
        for n in response.source_nodes
    ]
    builtin = options.mode in {m.value for m in ResponseMode}
    # A custom synthesizer is reported by what the user named (module:Class or
    # an entry point), or by its class name when it came in through the library.
    mode = options.mode if options.synthesizer is None or not builtin else type(synth).__name__
    result = AskResult(
        question, response.response, response.status, response.reason, mode, found.retriever,
        sources=sources, plan=plan, **base,
    )
    if response.status is not ResponseStatus.OK:
        return result
    if response.stream is not None:
        result.stream = _stream_in_step(answer_step, response.stream)
        return result
    if polishing and result.answer.strip():
        await _in_step("polish", _polish(llm, question, result, nodes, options.stream))
        if result.stream is not None:
            result.stream = _stream_in_step("polish", result.stream)
    return result


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
    from docsum.synthesize import _guard_stream

    async with closing_stream(_guard_stream(stream, original)) as guarded:
        async for piece in guarded:
            yield piece
