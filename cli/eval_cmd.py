"""`docsum eval`: retrieval (and optionally answer) quality on a question set."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from docsum.errors import ConfigError, ExitCode
from docsum.settings import EVAL

from .common import Common, examples, with_common
from .stopping import run_async

EXAMPLES = examples(
    ("docsum eval questions.jsonl", "Recall@k and friends of the default retriever over these questions."),
    ("docsum eval questions.jsonl --retriever all --baseline chunks", "Every retriever beside a chunk baseline."),
)

# Imported when eval runs: every other command registers eval, none needs it.
if TYPE_CHECKING:
    from collections.abc import Sequence

    from rich.table import Table

    from docsum.query.answermeasures import AnswerMeasures, Share
    from docsum.query.evalreport import EvalReport, FloorRow


@with_common(EVAL)
def eval_command(
    questions: Annotated[
        Path,
        typer.Argument(
            metavar="QUESTIONS", help="JSON lines: id, question, answer, gold_docs, kind.", show_default=False
        ),
    ],
    *,
    common: Common,
) -> int:
    """Measure how often retrieval finds the gold documents of each question
    (recall@k, precision@k, MRR@k, all-found@k; overall and per kind), optionally
    beside a chunk-retrieval baseline over the same nodes, and with --answers
    how often the full answer is right."""
    from docsum.config import answer_mode
    from docsum.query.evaluate import evaluate, load_questions
    from docsum.query.options import AskOptions
    from docsum.query.retrieve import default_retriever

    settings = common.settings
    asks = settings.answers or settings.unanswerable
    if settings.given("mode") and not asks:
        raise ConfigError("--mode says how answers are written; eval writes none without --answers (or --unanswerable)")
    items = load_questions(questions)
    if settings.max_questions:
        items = items[: settings.max_questions]
    llm = common.llm()
    names = settings.eval_retrievers or [settings.retriever or default_retriever(llm)]
    # Made (and the mode resolved) before anything is read or sent; the
    # answers retrieve as the metrics do.
    ask_with = (
        AskOptions(
            mode=answer_mode(settings),
            retriever=names[0],
            top_k=settings.top_k,
            choice_batch_size=settings.choice_batch_size,
            candidates=settings.candidates,
            limits=settings.limits,
        )
        if asks
        else None
    )
    store_path = common.existing_store()
    env = common.env
    common.start()

    def progress(done: int, total: int) -> None:
        if env.verbose:
            env.info(f"docsum: eval {done}/{total}")

    report = run_async(
        lambda: evaluate(
            store_path,
            llm,
            items,
            retriever=names[0],
            also=names[1:],
            top_k=settings.top_k,
            baseline=settings.baseline,
            answers=ask_with if settings.answers else None,
            batch_size=settings.choice_batch_size,
            candidates=settings.candidates,
            limits=settings.limits,
            progress=progress,
            unanswerable=ask_with if settings.unanswerable else None,
        )
    )
    details = settings.details
    if report.unresolved:
        env.error(
            f"docsum: warning: {len(set(report.unresolved))} gold document(s) are not in the store, e.g. {report.unresolved[0]}"
        )
    if common.json:
        env.out_json(report.as_dict(details=details))
        return ExitCode.OK
    _print_table(common, report, details, llm.metadata.price_key)
    return ExitCode.OK


def _print_table(common: Common, report: EvalReport, details: bool, model: str | None) -> None:  # noqa: C901 (listed when the check came in: simplify, then drop this)
    from rich.console import Console
    from rich.table import Table

    from docsum.models.llm import estimated_cost

    env = common.env
    # The table is the result, so it goes to stdout (colour only on a terminal).
    console = Console(file=env.stdout, force_terminal=env.stdout_isatty, no_color=not env.color, highlight=False)
    table = Table(title=f"retrieval, {report.retriever} retriever, top-{report.top_k}")
    for column in ("system", "kind", "n", "recall@k", "precision@k", "MRR@k", "all found"):
        table.add_column(column, justify="right" if column not in ("system", "kind") else "left")
    for system, kinds in report.summary.items():
        if system == "summary" and len(report.summary) > 1:
            continue  # the same figures appear under the retriever's name
        for kind, m in kinds.items():
            table.add_row(
                system, kind, str(m.n), f"{m.recall:.3f}", f"{m.precision:.3f}", f"{m.mrr:.3f}", f"{m.all_found:.3f}"
            )
    console.print(table)
    if report.answers:
        a = report.answers
        acc = "-" if a.accuracy is None else f"{a.accuracy:.3f}"
        console.print(
            f"answers ({a.mode} mode, graded by {a.grader}): accuracy {acc} over {a.graded} question(s); by kind {dict(a.by_kind)}"
        )
        if a.measures is not None:
            _print_measures(console, a.measures)
    if report.abstention:
        ab = Table(
            title=f"answer / abstain ({report.abstention.mode} mode): normal runs should answer, hidden-gold runs abstain"
        )
        for column in ("kind", "n", "answer rate", "abstention rate"):
            ab.add_column(column, justify="left" if column == "kind" else "right")
        for kind, rates in report.abstention.by_kind.items():
            ab.add_row(kind, str(rates.n), _rate(rates.answer_rate), _rate(rates.abstention_rate))
        console.print(ab)
        r = report.abstention
        console.print(
            f"declined: answerable {_rate(r.answerable_declined)}, unanswerable {_rate(r.unanswerable_declined)},"
            f" answerable with the gold hidden {_rate(r.hidden_gold_declined)}"
        )
        if r.trade_off:
            console.print(_trade_off_table(r.trade_off))
    if details:
        rows = Table(title="questions")
        for column in ("id", "kind", "recall", "retrieved", "gold"):
            rows.add_column(column)
        for row in report.details:
            rows.add_row(
                row.id, row.kind, f"{row.metrics['summary'].recall:.2f}", ", ".join(row.retrieved), ", ".join(row.gold)
            )
        console.print(rows)
    from docsum.schema import OFFLINE_ENGINE

    from .render import OFFLINE_WORDS

    usage = report.usage
    cost = estimated_cost(model, usage.prompt_tokens, usage.completion_tokens)
    spent = (
        OFFLINE_WORDS
        if report.engine == OFFLINE_ENGINE
        else f"{usage.llm_calls} LLM calls, {usage.prompt_tokens} prompt + {usage.completion_tokens} completion tokens, "
        f"cost {'unknown' if cost is None else f'${cost:.4f}'}"
    )
    env.info(f"docsum: {spent}, {report.elapsed_s:.1f}s")


def _print_measures(console: Any, measures: AnswerMeasures) -> None:
    """The answer measures (docsum.query.answermeasures), overall and per kind."""
    from rich.table import Table

    table = Table(title="answers as read")
    columns = (
        "kind",
        "figure in first 50 words",
        "words median",
        "words p90",
        "wrong entity",
        "short gold in first 50",
        "short gold anywhere",
        "short answered without gold",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "kind" else "right")

    def share(s: Share) -> str:
        return "-" if s.rate is None else f"{s.rate:.3f} ({s.hits}/{s.n})"

    def words(value: float | None) -> str:
        return "-" if value is None else f"{value:g}"

    for kind, m in [("all", measures), *measures.by_kind.items()]:
        table.add_row(
            kind,
            share(m.figure_first_50),
            words(m.words_median),
            words(m.words_p90),
            share(m.wrong_entity),
            share(m.short_gold_first_50),
            share(m.short_gold_anywhere),
            share(m.short_answered_without_gold),
        )
    console.print(table)


def _trade_off_table(rows: Sequence[FloorRow]) -> Table:
    """What other answer floors would decline, the one in force marked."""
    from rich.table import Table

    table = Table(title="answer floor (--answer-floor): declined, estimated from each question's best score")
    for column in ("floor", "answerable declined", "unanswerable declined"):
        table.add_column(column, justify="right")
    for floor in rows:
        mark = " (in force)" if floor.in_force else ""
        table.add_row(f"{floor.floor:.3f}{mark}", _rate(floor.answerable_declined), _rate(floor.unanswerable_declined))
    return table


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
