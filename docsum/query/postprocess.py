"""Post-retrieval steps, in the order `docsum ask` applies them: similarity
cutoff, LLM rerank, contextual compression, long-context reorder. Each returns
the new node list and a `StepReport` saying what it removed or moved."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from docsum.models.llm import LLM
from docsum.models.prompts import COMPRESS_PROMPT, NO_OUTPUT, RERANK_PROMPT
from docsum.query.rating import rate_in_batches
from docsum.schema import Node, NodeWithScore
from docsum.synthesizers.budget import PromptBudget


@dataclass(frozen=True)
class StepReport:
    """What one step after retrieval kept and removed (JSON `steps`)."""

    step: str
    before: int
    after: int
    removed: list[str] = field(default_factory=list)  # node ids
    note: str = ""
    emptied: bool = False  # the step would have removed everything

    def as_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "before": self.before,
            "after": self.after,
            "removed": len(self.removed),
            "note": self.note,
            "emptied": self.emptied,
        }


def similarity_cutoff(nodes: list[NodeWithScore], cutoff: float) -> tuple[list[NodeWithScore], StepReport]:
    """Drop nodes scored below `cutoff`. A node with no score is kept and
    counted: a missing score is not a zero."""
    kept = [n for n in nodes if n.score is None or n.score >= cutoff]
    unscored = sum(1 for n in nodes if n.score is None)
    removed = [n.node.node_id for n in nodes if n.score is not None and n.score < cutoff]
    note = f"dropped {len(removed)} node(s) scored below {cutoff:g}"
    if unscored:
        note += f"; kept {unscored} node(s) that have no score"
    report = StepReport("cutoff", len(nodes), len(kept), removed, note, emptied=bool(nodes) and not kept)
    return kept, report


# Passages rated per rerank call (--choice-batch-size is for summaries).
RERANK_BATCH_SIZE = 10


async def llm_rerank(
    llm: LLM, query: str, nodes: list[NodeWithScore], top_n: int, batch_size: int = RERANK_BATCH_SIZE
) -> tuple[list[NodeWithScore], StepReport]:
    """Score every node with the LLM (batches sent concurrently), keep the best
    `top_n`. Nodes the LLM leaves out (or rates 0) are dropped. A batch whose
    answer cannot be parsed keeps its nodes, after the rated ones, in their
    order; if no batch parses the retrieval order is kept and the step says so."""
    if not nodes:
        return [], StepReport("rerank", 0, 0, note="nothing to rerank")
    # Batches of up to `batch_size` passages that also fit the window: ten
    # 1024-token nodes would overflow a 3900-token model.
    batches = await rate_in_batches(llm, RERANK_PROMPT, query, [n.node.text for n in nodes], batch_size)
    rescored: list[NodeWithScore] = []
    unparsed: list[NodeWithScore] = []
    failed_batches = 0
    for batch in batches:
        if not batch.parsed:
            failed_batches += 1
            unparsed.extend(nodes[i] for i in batch.items)
            continue
        for index, relevance in batch.ratings:
            node = nodes[index]
            rescored.append(NodeWithScore(node.node, (relevance / 10.0) if relevance is not None else node.score))
    if failed_batches == len(batches):
        kept = nodes[:top_n]
        return kept, StepReport(
            "rerank",
            len(nodes),
            len(kept),
            [n.node.node_id for n in nodes[top_n:]],
            f"the LLM's ratings could not be parsed; kept the retrieval order (best {len(kept)})",
        )
    # Stable: equal ratings keep their retrieval order.
    rescored.sort(key=lambda n: -(n.score if n.score is not None else 0.0))
    kept = (rescored + unparsed)[:top_n]
    kept_ids = {n.node.node_id for n in kept}
    removed = [n.node.node_id for n in nodes if n.node.node_id not in kept_ids]
    note = f"rated {len(nodes)} node(s) in {len(batches)} batch(es); kept the best {len(kept)}"
    if failed_batches:
        note += f"; {failed_batches} batch(es) could not be parsed, their nodes kept after the rated ones"
    if not kept:
        note = f"the LLM judged none of the {len(nodes)} node(s) useful for the question"
    return kept, StepReport("rerank", len(nodes), len(kept), removed, note, emptied=not kept)


def _is_no_output(text: str) -> bool:
    cleaned = text.strip().strip("`'\".").strip()
    return not cleaned or cleaned.upper().startswith(NO_OUTPUT)


async def compress(llm: LLM, query: str, nodes: list[NodeWithScore]) -> tuple[list[NodeWithScore], StepReport]:
    """Per node, keep only what the LLM extracts as relevant; drop NO_OUTPUT
    nodes. If every node would be dropped, keep them uncompressed and say so."""
    if not nodes:
        return [], StepReport("compress", 0, 0, note="nothing to compress")
    base = COMPRESS_PROMPT.partial_format(query_str=query)
    budget = PromptBudget(llm.metadata)
    # A node larger than the window (a big --chunk-size on a small model) is
    # compressed from its head rather than overflowing the prompt.
    contexts = [(budget.truncate(base, [n.node.text])[0] or [""])[0] for n in nodes]
    answers = await asyncio.gather(*(llm.apredict(base, context_str=c) for c in contexts))
    kept: list[NodeWithScore] = []
    removed: list[str] = []
    before_tokens = after_tokens = 0
    tok = llm.metadata.tokenizer
    for node, answer in zip(nodes, answers):
        before_tokens += node.node.token_count or tok.count(node.node.text)
        if _is_no_output(answer):
            removed.append(node.node.node_id)
            continue
        text = answer.strip()
        after_tokens += tok.count(text)
        shrunk = Node(**{**node.node.__dict__, "text": text, "token_count": tok.count(text)})
        kept.append(NodeWithScore(shrunk, node.score))
    if not kept:
        return list(nodes), StepReport(
            "compress",
            len(nodes),
            len(nodes),
            [],
            "compression found nothing relevant in any node; kept the nodes uncompressed",
            emptied=True,
        )
    note = f"dropped {len(removed)} node(s) with nothing relevant; {before_tokens} → {after_tokens} tokens"
    return kept, StepReport("compress", len(nodes), len(kept), removed, note)


def reorder_positions(n: int) -> list[int]:
    """Where ranks 0..n-1 (best first) go so the best sit at both ends and the
    weakest in the middle: n=4 gives ranks [1, 3, 2, 0]."""
    out: list[int] = []
    for i, rank in enumerate(reversed(range(n))):
        if i % 2 == 0:
            out.insert(0, rank)
        else:
            out.append(rank)
    return out


def long_context_reorder(nodes: list[NodeWithScore]) -> tuple[list[NodeWithScore], StepReport]:
    """ "Lost in the middle" reorder at document level: documents ranked by their
    best score go to the ends, weakest in the middle; inside a document the
    nodes keep their reading order."""
    groups: dict[str, list[NodeWithScore]] = {}
    for n in nodes:
        groups.setdefault(n.node.doc_id, []).append(n)
    docs = list(groups)

    def best(doc: str) -> float:
        scores = [n.score for n in groups[doc] if n.score is not None]
        return max(scores) if scores else float("-inf")

    # Stable sort: unscored documents keep their retrieval order, after scored ones.
    ranked = sorted(docs, key=lambda d: -best(d))
    placed = [ranked[r] for r in reorder_positions(len(ranked))]
    out = [n for d in placed for n in sorted(groups[d], key=lambda x: x.node.seq)]
    note = "document order: " + ", ".join(groups[d][0].node.path or d for d in placed)
    return out, StepReport("reorder", len(nodes), len(out), [], note)
