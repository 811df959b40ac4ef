"""The cost guard of a question: the LLM calls each stage will make, counted
before the stage runs, so `--max-calls` refuses a question (exit 2, with its
plan) before anything more is sent, and an expensive retrieval is named.

A `CallPlan` is filled stage by stage: retrieval first (from the store's
size), then, once the passages are known, rerank, compress, the answer and
the polish pass. A step whose calls cannot be known in advance (a custom
synthesizer) counts as none.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from docsum.errors import ConfigError
from docsum.query.options import AskOptions
from docsum.query.postprocess import RERANK_BATCH_SIZE
from docsum.query.rating import planned_rating_calls
from docsum.query.retrieve import planned_choice_calls
from docsum.schema import NodeWithScore
from docsum.synthesizers import BaseSynthesizer

# LLM retrieval planning more calls than this per question gets a warning
# that names the cheaper hybrid retriever (200 summaries at the default
# batch of 10).
EXPENSIVE_RETRIEVAL_CALLS = 20


@dataclass
class CallPlan:
    options: AskOptions
    planned: dict[str, int | None] = field(default_factory=dict)  # stage → calls (None: unknown)

    def retrieval(self, documents: int) -> list[str]:
        """Plan retrieval over a store of `documents` summaries. Returns the
        warnings an expensive plan deserves (said before `check` may refuse it)."""
        options = self.options
        calls = planned_choice_calls(options.retriever, documents, options.choice_batch_size, options.candidates)
        self.planned[f"retrieval ({options.retriever})"] = calls
        if options.retriever != "llm" or (calls or 0) <= EXPENSIVE_RETRIEVAL_CALLS:
            return []
        hybrid = planned_choice_calls("hybrid", documents, options.choice_batch_size, options.candidates)
        return [
            f"LLM retrieval shows the LLM all {documents} summaries: at least {calls} LLM calls for this question; "
            f"--retriever hybrid shows it only the {min(documents, options.candidates)} best by embedding "
            f"({hybrid} call{'s' if hybrid != 1 else ''})"
        ]

    def answer(self, synth: BaseSynthesizer, question: str, nodes: list[NodeWithScore], documents: int) -> None:
        """Plan the stages from the passages on and refuse beyond --max-calls.
        The later steps only ever shrink the passages, so the answer is
        planned on them as they are now: an upper bound."""
        options = self.options
        if options.max_calls is None or not nodes:
            return
        if options.rerank:
            self.planned["rerank"] = planned_rating_calls(len(nodes), RERANK_BATCH_SIZE)
        if options.compress:
            self.planned["compress"] = len(nodes)
        answer_calls = synth.plan(question, synth.passages(nodes), **options.variables)
        self.planned[f"answer ({options.label})"] = answer_calls
        if options.polish and answer_calls != 0:
            self.planned["polish"] = 1
        self.check(f"{len(nodes)} passages of {documents} documents")

    def check(self, over: str) -> None:
        """ConfigError (exit 2, with the plan) when the calls planned so far
        exceed --max-calls; `over` says what they were planned over."""
        limit = self.options.max_calls
        total = sum(calls or 0 for calls in self.planned.values())
        if limit is None or total <= limit:
            return
        plan = ", ".join(f"{step} {'?' if calls is None else calls}" for step, calls in self.planned.items())
        hint = " or --retriever hybrid" if self.options.retriever == "llm" else ""
        raise ConfigError(
            f"this question plans {total} LLM calls ({plan}; over {over}), more than --max-calls {limit}; "
            f"nothing more was sent. Raise --max-calls (or max_calls in config.toml){hint}"
        )
