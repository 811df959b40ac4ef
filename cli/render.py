"""How results look: build progress and report, answers and their sources."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from docsum.ingest.ocr import MODE_OFF, OCR_INSTALL, PageCounts
from docsum.models.llm import closing_stream
from docsum.sanitize import clean_name, clean_text

from .env import Environment

if TYPE_CHECKING:  # rich only on a terminal; docsum.query and docsum.builder.pipeline come with their commands
    from rich.progress import Progress, TaskID

    from docsum.builder.report import BuildReport, FileOutcome
    from docsum.query.results import AskResult


class BuildProgress:
    """A progress bar on a terminal; one plain line per file otherwise."""

    def __init__(
        self,
        env: Environment,
        enabled: bool = True,
        *,
        offline: bool = False,
        dry_run: bool = False,
        ocr_ran: bool | None = None,
    ) -> None:
        self.env = env
        self.ocr_ran = ocr_ran  # OCR reads pages without a text layer in this build (docsum.ingest.ocr.wanted)
        # A dry run's plan is the result, on stdout: its files are not listed twice.
        self.enabled = enabled and not env.quiet and not dry_run
        self.offline = offline  # the offline engine calls no model: no calls or tokens to count
        self.bar: Progress | None = None
        self.task: TaskID | None = None
        self.calls = 0
        self.tokens = 0
        self.started = time.monotonic()

    def start(self, total_files: int, to_process: int) -> None:
        if not self.enabled:
            return
        if self.env.stderr_isatty:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.bar = Progress(
                TextColumn("[bold]build"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[stats]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=self.env.err_console(),
                transient=True,
            )
            self.bar.start()
            self.task = self.bar.add_task("build", total=total_files, stats="")
        else:
            self.env.info(f"docsum: {total_files} file(s), {to_process} to read and summarize")

    def _note(self, line: str) -> None:
        """A line that must not be lost under the bar."""
        if self.bar is not None:
            self.bar.console.print(self.env.redact(line), markup=False, highlight=False)
        else:
            self.env.error(line)

    def file_done(self, outcome: FileOutcome) -> None:
        self.calls += outcome.calls
        self.tokens += outcome.prompt_tokens
        if outcome.action == "failed":
            # Failures are always shown, even with -q: they change the exit code.
            from docsum.ingest.discover import IGNORE_FILE  # here: `ask` imports this module too

            # The reason may already name the ignore file (a scan without the OCR extra); a file
            # that failed because the LLM server did is not one to keep out.
            named = IGNORE_FILE in (outcome.error or "") or outcome.llm_failed
            keep_out = "" if named else f"; add it to {IGNORE_FILE} to skip it"
            again = f" (failed {outcome.attempts} runs in a row{keep_out})" if outcome.attempts > 1 else ""
            self._note(f"docsum: failed {clean_name(outcome.path)}: {outcome.error}{again}")
        if not self.enabled:
            return
        if outcome.action != "failed":
            for warning in outcome.warnings:
                self._note(f"docsum: warning: {clean_name(outcome.path)}: {warning}")
        if outcome.action == "skipped":
            self._note(f"docsum: skipped {clean_name(outcome.path)}: {outcome.error}")
        if self.bar is not None and self.task is not None:
            stats = "offline, no model" if self.offline else f"{self.calls} LLM calls, {self.tokens} prompt tokens"
            self.bar.update(self.task, advance=1, stats=stats)
            return
        if outcome.action in ("failed", "skipped"):
            return
        detail = ""
        if outcome.action in ("added", "updated", "add", "update"):
            engine = f", read with {outcome.extractor}" if outcome.extractor and self.env.verbose else ""
            pages = PageCounts.of(outcome.page_origins).describe(self.ocr_ran)
            calls = "" if self.offline else f", {outcome.calls} LLM calls"
            detail = f" ({outcome.nodes} nodes{calls}{engine}{'; ' + pages if pages else ''})"
        if outcome.action != "unchanged" or self.env.verbose:
            self.env.info(f"{outcome.action:<9} {clean_name(outcome.path)}{detail}")

    def finish(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def print_build_report(env: Environment, report: BuildReport, as_json: bool) -> None:
    data = report.as_dict()
    if as_json:
        env.out_json(data)
        return
    if report.skipped_entries:
        from docsum.ingest.discover import (
            skipped_summary,
        )  # here: `ask` prints answers with this module, and lists no folder

        env.info(
            f"docsum: skipped {skipped_summary(report.skipped_entries)}{'' if env.verbose else ' (-v lists them)'}"
        )
        if env.verbose:
            for entry in report.skipped_entries:
                env.info(f"docsum: skipped {clean_name(entry.path)} ({entry.reason})")
    offline = "offline" in data  # the offline engine: no model, nothing billed (docsum.schema.usage_fields)
    if report.dry_run:
        for item in report.plan:
            work = f"{item.nodes} nodes" + (
                "" if offline else f", {item.calls} calls, {item.prompt_tokens} prompt tokens"
            )
            pages = PageCounts.of(item.page_origins).describe(report.ocr_ran)
            env.out(f"{item.action:<9} {clean_name(item.path)}  {item.error or work}{'; ' + pages if pages else ''}")
        failing = sum(1 for p in report.plan if p.action == "failed")
        env.out(
            f"dry run: {sum(1 for p in report.plan if p.action == 'add')} to add, "
            f"{sum(1 for p in report.plan if p.action == 'update')} to update, "
            f"{sum(1 for p in report.plan if p.action == 'remove')} to remove, "
            f"{data['documents']['unchanged']} unchanged{f', {failing} failing' if failing else ''}; "
            f"{_planned_cost(data['planned'], offline)}"
        )
        _print_pages(env, report)
        return
    counts = data["documents"]
    env.out(
        f"{counts['added']} added, {counts['updated']} updated, {counts['unchanged']} unchanged, "
        f"{counts['removed']} removed, {counts['failed']} failed in {data['elapsed_s']:.1f}s; "
        f"{_spent(data, offline)}"
    )
    _print_pages(env, report)
    if report.failures:
        env.out(f"failed (retried next run): {', '.join(sorted(clean_name(f.path) for f in report.failures))}")
    if report.skipped_files:
        env.out(f"skipped symlinks: {', '.join(clean_name(f.path) for f in report.skipped_files)}")


def _print_pages(env: Environment, report: BuildReport) -> None:
    """The `pages:` line (stdout): how the pages of the documents read were
    read. Pages left empty without OCR get a note (stderr) on how to read them."""
    totals = report.page_totals
    described = totals.describe(report.ocr_ran)
    if not described:
        return
    if not report.ocr_ran and totals.unreadable and report.ocr_installed:
        described += " (--ocr off)"
    env.out(f"pages: {described}")
    if report.ocr_ran or not totals.unreadable or report.ocr_installed:
        return
    empty = sorted(clean_name(path) for path, counts in report.pages.items() if counts.unreadable)
    which = ", ".join(empty) if len(empty) <= 3 else f"{', '.join(empty[:3])} and {len(empty) - 3} more"
    stored = "" if report.dry_run else ", then `docsum remove` each of those files and build again"
    if report.ocr_mode == MODE_OFF:
        stored += " without --ocr off"
    env.info(
        f"docsum: note: pages with no text layer are blank or scanned ({which}); to read scanned pages by OCR, "
        f"install the OCR extra: {OCR_INSTALL}{stored}"
    )


OFFLINE_WORDS = "offline extractive engine, no model used, nothing billed"


def _spent(data: dict[str, Any], offline: bool) -> str:
    """What a build cost: its model's calls, tokens and price, or that no model ran."""
    if offline:
        return OFFLINE_WORDS
    usage, cost = data["usage"], data["estimated_cost_usd"]
    return (
        f"{usage['llm_calls']} LLM calls, {usage['prompt_tokens']} prompt + {usage['completion_tokens']} "
        f"completion tokens, cost {'unknown' if cost is None else f'${cost:.4f}'}"
    )


def _planned_cost(planned: dict[str, Any], offline: bool) -> str:
    if offline:
        return OFFLINE_WORDS
    cost = planned["estimated_cost_usd"]
    return (
        f"{planned['llm_calls']} LLM calls, {planned['prompt_tokens']} prompt tokens planned, "
        f"estimated cost {'unknown' if cost is None else '≤ $' + format(cost, '.4f')}"
    )


async def print_answer(env: Environment, result: AskResult, as_json: bool) -> None:
    if as_json:
        await result.drain()
        env.out_json(result.as_dict())
        return
    from docsum.models.prompts import ABSTENTION_TEXT

    if result.abstained:
        env.out(ABSTENTION_TEXT)  # and no sources: none of them answers
        return
    if result.stream is not None:
        parts = []
        shown = env.out_stream()  # a key echoed by the server may arrive split across pieces
        # Closed here, in this task, also when the reader goes away mid-answer.
        async with closing_stream(result.stream) as stream:
            async for piece in stream:
                parts.append(piece)
                env.stdout.write(clean_text(shown.feed(piece)))
                env.stdout.flush()
        result.answer = "".join(parts)
        result.stream = None
        env.stdout.write(clean_text(shown.flush()) + "\n")
        # A streamed decline is only recognisable once shown (it was the
        # model's own words: the sources are left off), and markers are
        # checked once the whole answer is there; what was shown stays as
        # streamed, the sources below use the checked markers.
        result.finish()
        if result.abstained:
            return
    elif result.answer:
        env.out(result.answer)
    if result.sources:
        if result.answer:  # a mode that writes no answer (no_text) prints its sources alone
            env.out("")
        env.out("Sources:")
        for line in source_lines(result):
            env.out(line)


# A quote longer than this is cut (the JSON has it whole).
MAX_QUOTE_CHARS = 240


def source_lines(result: AskResult) -> list[str]:
    """One line per citation marker (document, pages, supporting quote); an
    answer without markers lists each document once with the pages of the
    passages it was given. Pages as ranges: `pp. 12–14, 31`."""
    from docsum.citations import page_ranges

    by_ocr: dict[str, set[int]] = {}
    for src in result.sources:
        by_ocr.setdefault(src.doc_id, set()).update(src.ocr_pages)
    if result.citations:
        lines = []
        for c in result.citations:
            where = page_ranges(c.pages) + (" (read by OCR)" if by_ocr.get(c.doc, set()) & set(c.pages) else "")
            quote = " ".join(clean_text(c.quote).split())
            if len(quote) > MAX_QUOTE_CHARS:
                quote = quote[: MAX_QUOTE_CHARS - 1].rstrip() + "…"
            name = clean_name(result.names.get(c.doc, c.path))
            lines.append(f'[{c.marker}] {name}{" " + where if where else ""}: "{quote}"')
        return lines
    pages: dict[str, list[int]] = {}
    for src in result.sources:
        pages.setdefault(src.doc_id, []).extend(src.pages)
    paths = {src.doc_id: src.path for src in result.sources}
    lines = []
    for doc_id, used in pages.items():
        where = page_ranges(used) + (" (read by OCR)" if by_ocr.get(doc_id) else "")
        lines.append(f"- {clean_name(result.names.get(doc_id, paths[doc_id]))}{' ' + where if where else ''}")
    return lines
