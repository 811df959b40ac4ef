"""`docsum ask`: pick documents by summary, post-process their nodes, answer.

The stages, each in its own module:
- the question and its options, checked before anything is read or sent
  (docsum.query.question, docsum.query.options);
- the cost guard, planned before each stage spends (docsum.query.callplan);
- the run itself, here: retrieval, grounding (offline), the steps after
  retrieval, the answer, the polish pass;
- the result, typed records until the output edge (docsum.query.results).

Every stage reports what it did (`AskResult.steps`, `notes`) so an empty or
surprising answer can be explained, and `status`/`reason` say why when there
is nothing to answer from.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

from docsum.citations import display_names
from docsum.errors import ConfigError, ContextLengthError, DocsumError, LLMError
from docsum.ingest.ocr import ocr_pages
from docsum.locations import StoreLocation, display_location
from docsum.models.abstain import relevance_floor, says_cannot_answer
from docsum.models.calls import call_budget
from docsum.models.llm import LLM, closing_stream, recording_calls, track_calls
from docsum.models.prompts import POLISH_PROMPT
from docsum.query.callplan import CallPlan
from docsum.query.corpus import HiddenDocuments, StoreCorpus
from docsum.query.options import AskOptions, check_options
from docsum.query.postprocess import StepReport, compress, llm_rerank, long_context_reorder, similarity_cutoff
from docsum.query.question import Question, QuestionRoom
from docsum.query.results import AnswerPlan, AskResult, DocumentHit, Source
from docsum.query.retrieve import Candidate, Retrieval, SummaryCorpus, retrieve
from docsum.sanitize import clean_name
from docsum.schema import Node, NodeWithScore, Response, ResponseStatus
from docsum.store.base import DocumentStore
from docsum.store.opening import open_store
from docsum.synthesizers import BaseSynthesizer, guard_refine_stream, is_meta_answer
from docsum.synthesizers.budget import PromptBudget

# The public names of a question's road, for `from docsum.query.ask import ...`.
__all__ = ["AskOptions", "AskResult", "Question", "ask", "ask_in_store", "ask_many"]

log = logging.getLogger("docsum")
T = TypeVar("T")

# Candidates whose summaries are read and listed by --explain (at least
# --top-k and --candidates): reading all of them would make every question
# cost as much as the store is large.
SHOWN_CANDIDATES = 50

Say = Callable[[str], None]


def _empty(question: str, options: AskOptions, reason: str, **extra: Any) -> AskResult:
    return AskResult(question, "", ResponseStatus.EMPTY, reason, options.label, options.retriever, **extra)


def _abstain(question: str, options: AskOptions, reason: str, **extra: Any) -> AskResult:
    return _empty(question, options, reason, **extra).abstain(reason, ResponseStatus.EMPTY)


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
    explain: Say | None = None,
    progress: Say | None = None,
) -> AskResult:
    question = QuestionRoom.of(llm.metadata).check(question)
    synth = check_options(llm, options, progress)
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
    explain: Say | None,
) -> AskResult:
    if opened is None:
        where = display_location(store_path)
        return _empty(
            question, options, f"no store at {where}; run `docsum build PATH` first", engine=llm.metadata.engine
        )
    store, whole = opened
    corpus: SummaryCorpus = whole
    if not corpus.size():
        return _empty(
            question, options, "the store has no documents; run `docsum build PATH` first", engine=llm.metadata.engine
        )
    # A document a reader found damaged is not quoted until a build rebuilds it.
    damaged = store.set_aside_documents()
    hidden = options.hidden_doc_ids | frozenset(damaged)
    if hidden:
        corpus = HiddenDocuments(corpus, hidden)
    # The plan refuses a question before it starts; the budget holds the
    # calls actually sent to the same limit, whatever the plan missed.
    with call_budget(options.max_calls, "this question"), track_calls() as calls:
        result = await _Run(store, llm, question, options, synth, explain).answer(corpus)
        if result.stream is not None:
            result.stream = recording_calls(result.stream, calls)
    result.calls = calls
    result.engine = llm.metadata.engine
    if damaged:
        names = ", ".join(clean_name(p) for p in sorted(damaged.values()))
        result.warnings.append(f"left out, damaged until the next `docsum build` rebuilds it: {names}")
    return result


async def ask_in_store(
    opened: tuple[DocumentStore, StoreCorpus] | None,
    store_path: StoreLocation,
    llm: LLM,
    question: str,
    options: AskOptions,
) -> AskResult:
    """`ask` with a store and its corpus that the caller keeps open across
    questions (a server; see `StoreCorpus.beside`); None when there is no
    store yet. The caller decides when the corpus is stale."""
    question = QuestionRoom.of(llm.metadata).check(question)
    synth = check_options(llm, options, None)
    return await _ask_in(opened, store_path, llm, question, options, synth, None)


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
    synth = check_options(llm, options, None)  # one synthesizer serves every question
    room = QuestionRoom.of(llm.metadata)
    gate = asyncio.Semaphore(options.limits.questions)
    with _open_corpus(store_path) as opened:

        async def one(item: Question) -> None:
            async with gate:
                if item.error:
                    on_answer(item, ConfigError(item.error))
                    return
                say = (lambda msg: explain(item, msg)) if explain is not None else None
                try:
                    question = room.check(item.text)
                    result: AskResult | DocsumError = await _ask_in(
                        opened, store_path, llm, question, options, synth, say
                    )
                except (LLMError, ConfigError) as exc:
                    result = exc
                on_answer(item, result)

        await asyncio.gather(*(one(q) for q in questions))


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


class _Run:
    """One question's way through the stages, each planned and reported."""

    def __init__(
        self,
        store: DocumentStore,
        llm: LLM,
        question: str,
        options: AskOptions,
        synth: BaseSynthesizer,
        explain: Say | None,
    ) -> None:
        self.store, self.llm, self.question, self.options, self.synth = store, llm, question, options, synth
        self.say: Say = explain or (lambda _msg: None)
        self.plan = CallPlan(options)
        self.found: Retrieval | None = None
        self.documents: list[DocumentHit] = []
        self.candidates: list[DocumentHit] = []
        self.notes: list[str] = []
        self.warnings: list[str] = []
        self.steps: list[StepReport] = []

    def _partial(self) -> dict[str, Any]:
        """What an answer-less result still carries."""
        return {
            "documents": self.documents,
            "candidates": self.candidates,
            "notes": self.notes,
            "warnings": self.warnings,
            "steps": self.steps,
        }

    def _nothing(self, reason: str) -> AskResult:
        return _empty(self.question, self.options, reason, **self._partial())

    def _abstained(self, reason: str) -> AskResult:
        return _abstain(self.question, self.options, reason, **self._partial())

    async def answer(self, corpus: SummaryCorpus) -> AskResult:
        found, floor = await self._retrieve(corpus)
        if not found.chosen:
            reason = "no document was chosen for this question"
            if found.notes:
                reason += f" ({found.notes[-1]})"
            return self._abstained(reason)
        chosen, by_doc = found.chosen, self.store.nodes_for([c.doc_id for c in found.chosen])
        # Every engine answers only from documents about what the question
        # names: a model handed one company's filings for a question on
        # another answers about the first as surely as the offline engine
        # does.
        from docsum.query.grounding import grounded
        from docsum.query.latest import newest_first

        chosen, by_doc, grounding = grounded(
            self.store, self.question, found, by_doc, self.options.top_k, floor, corpus
        )
        if grounding is not None:
            self._kept_after(grounding, chosen)
            if not chosen:
                return self._abstained(grounding.note)
        chosen, latest = newest_first(self.question, chosen, found.candidates)
        if latest is not None:
            self._kept_after(latest, chosen)
            missing = [c.doc_id for c in chosen if c.doc_id not in by_doc]
            if missing:
                by_doc = {**by_doc, **self.store.nodes_for(missing)}
        nodes = [
            NodeWithScore(
                Node(r.text, r.doc_id, c.path, r.seq, tuple(r.pages), r.start_char, r.end_char, r.token_count), c.score
            )
            for c in chosen
            for r in by_doc.get(c.doc_id, [])
        ]
        if not nodes:
            return self._nothing("the chosen documents have no text to answer from")
        nodes = await self._post_process(nodes, len(found.chosen))
        if not nodes:
            emptied = next((r for r in self.steps if r.emptied or not r.after), None)
            reason = "a post-retrieval step removed every passage"
            if emptied is not None:
                reason = f"--{emptied.step} removed every passage ({emptied.note})"
            return self._nothing(reason)
        return await self._synthesize(nodes, found.retriever)

    def _kept_after(self, step: StepReport, chosen: list[Candidate]) -> None:
        """Report a step that changed which documents answer (grounding, "the
        latest") and list the documents it kept, those it took in included."""
        self.say(f"{step.step}: {step.before} → {step.after} documents; {step.note}")
        self.steps.append(step)
        kept = {c.doc_id for c in chosen}
        listed = {d.doc_id for d in self.documents}
        self.documents = [d for d in self.documents if d.doc_id in kept] + [
            DocumentHit.of(c) for c in chosen if c.doc_id not in listed
        ]

    async def _retrieve(self, corpus: SummaryCorpus) -> tuple[Retrieval, float | None]:
        options, say = self.options, self.say
        documents_in_store = corpus.size()
        cost_warnings = self.plan.retrieval(documents_in_store)
        for warning in cost_warnings:
            say(f"retrieval: {warning}")
        self.plan.check(f"{documents_in_store} summaries")
        # Summaries are read for the kept candidates only (what --explain lists).
        keep = max(options.top_k, options.candidates, SHOWN_CANDIDATES)
        floor = relevance_floor(options.retriever, corpus.embedding_model(), options.min_score)
        found: Retrieval = await _in_step(
            f"retrieval ({options.retriever})",
            retrieve(
                options.retriever,
                self.llm,
                self.question,
                corpus,
                top_k=options.top_k,
                batch_size=options.choice_batch_size,
                candidates=options.candidates,
                keep=keep,
                floor=floor,
            ),
        )
        self.candidates = [DocumentHit.of(c) for c in found.candidates]
        self.documents = [DocumentHit.of(c) for c in found.chosen]
        for c in found.candidates:
            first_line = c.summary.strip().splitlines()[0][:100] if c.summary.strip() else ""
            score = "  -  " if c.score is None else f"{c.score:.3f}"
            via = f" ({c.via})" if found.retriever == "hybrid" and c.via else ""
            shown = c.signals | ({"relevance": c.relevance} if c.relevance is not None and c.via != "embedding" else {})
            signals = f" [{', '.join(f'{k} {v:g}' for k, v in shown.items())}]" if shown else ""
            say(f"[{'x' if c.chosen else ' '}] {score}{via}{signals}  {c.path}: {first_line}")
        unlisted = documents_in_store - len(found.candidates)
        if unlisted > 0:
            say(f"... and {unlisted} lower-scored document(s) not listed")
        for note in found.notes:
            say(f"retrieval: {note}")
        self.notes = list(found.notes)
        self.warnings = cost_warnings + [n for n in found.notes if "could not be parsed" in n]
        return found, floor

    async def _post_process(self, nodes: list[NodeWithScore], documents: int) -> list[NodeWithScore]:
        """--cutoff, --rerank, --compress, --reorder, in that order, after the
        cost guard has seen the passages."""
        options, llm, question = self.options, self.llm, self.question
        steps: list[StepReport] = []
        if options.cutoff is not None:
            nodes, report = similarity_cutoff(nodes, options.cutoff)
            steps.append(report)
        self.plan.answer(self.synth, question, nodes, documents)
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
            self.say(f"{report.step}: {report.before} → {report.after} nodes; {report.note}")
            if "could not be parsed" in report.note or (report.emptied and nodes):
                # (A step that removed everything is the reason itself, not a warning.)
                self.warnings.append(f"{report.step}: {report.note}")
        self.steps += steps
        return nodes

    def _planned(self, nodes: list[NodeWithScore]) -> tuple[AnswerPlan, bool]:
        """The answer's plan, said on stderr, and whether a polish call follows."""
        options, llm, question, synth = self.options, self.llm, self.question, self.synth
        tokens = sum(n.node.token_count or llm.metadata.tokenizer.count(n.node.text) for n in nodes)
        planned = synth.plan(question, synth.passages(nodes), **options.variables)
        # no_text and context_only make no call, so there is nothing to polish.
        polishing = options.polish and planned != 0
        plan = AnswerPlan(
            documents=len({n.node.doc_id for n in nodes}),
            nodes=len(nodes),
            tokens=tokens,
            llm_calls=None if planned is None else planned + (1 if polishing else 0),
        )
        calls = "?" if plan.llm_calls is None else plan.llm_calls
        # The offline engine's steps are no LLM calls: its plan is named for what it is.
        answer_by = f"{calls} offline step(s) (no model)" if llm.metadata.extractive else f"{calls} LLM call(s)"
        self.say(
            f"plan: {plan.documents} document(s) → {plan.nodes} node(s) → {tokens} tokens → "
            f"{answer_by} in {options.label} mode"
        )
        return plan, polishing

    def _sources(self, response: Response) -> tuple[list[Source], dict[str, str], dict[str, str]]:
        """The answer's sources, with their documents' roots and display names."""
        records = self.store.get_documents(list(dict.fromkeys(n.node.doc_id for n in response.source_nodes)))
        roots = {d.doc_id: d.root for d in records}
        origins = {d.doc_id: d.page_origins for d in records}
        shared = {d.path for d in records if len(self.store.find_documents(d.path)) > 1}
        sources = [
            Source(
                n.node.doc_id,
                n.node.path,
                roots.get(n.node.doc_id, ""),
                tuple(n.node.pages),
                n.score,
                n.node.text,
                ocr_pages(origins.get(n.node.doc_id, ""), tuple(n.node.pages)),
            )
            for n in response.source_nodes
        ]
        return sources, roots, display_names([(d.doc_id, d.root, d.path) for d in records], shared)

    async def _synthesize(self, nodes: list[NodeWithScore], retriever: str) -> AskResult:
        options, llm, question = self.options, self.llm, self.question
        plan, polishing = self._planned(nodes)
        answer_step = f"answer ({options.label})"
        response: Response = await _in_step(answer_step, self.synth.asynthesize(question, nodes, **options.variables))
        sources, roots, names = self._sources(response)
        result = AskResult(
            question,
            response.response,
            response.status,
            response.reason,
            options.label,
            retriever,
            sources=sources,
            plan=plan,
            **self._partial(),
        )
        result.roots, result.names = roots, names
        if response.status is ResponseStatus.NOT_SATISFIED:
            return result.abstain(response.reason)
        if response.status is not ResponseStatus.OK:
            return result
        if response.stream is None and says_cannot_answer(result.answer):
            return result.abstain("the answer step found no answer in the passages")
        if self.synth.numbered_passages:
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
            self.say(
                f"citation check: not supported by {''.join(f'[{m}]' for m in flagged.markers)} "
                f"(share of its words found there {flagged.support:.2f}): {flagged.sentence[:160]}"
            )
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
    async with closing_stream(guard_refine_stream(stream, original)) as guarded:
        async for piece in guarded:
            yield piece
