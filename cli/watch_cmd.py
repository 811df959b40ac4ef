"""`docsum build --watch`: the watch loop (docsum.builder.watch) with the
command line's output: one line per batch on stderr, or one JSON line per
batch on stdout with --json. The first reconcile shows the usual progress."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from docsum.errors import ExitCode
from docsum.sanitize import clean_name

from .common import Common
from .stopping import run_async

if TYPE_CHECKING:
    from docsum.builder.report import BuildOptions, BuildReporter
    from docsum.builder.watch import Batch
    from docsum.models.llm import LLM


def batch_line(batch: Batch) -> str:
    """`docsum: watch: batch 3 (2 changes): 1 added, 1 updated, ...` in one line."""
    head = f"docsum: watch: batch {batch.number} ({batch.changes} change{'s' if batch.changes != 1 else ''})"
    if batch.report is None:
        return f"{head}: not built: {batch.error}"
    data = batch.report.as_dict()
    counts, usage = data["documents"], data["usage"]
    failed = "".join(f"; {clean_name(f['path'])}: {f['error']}" for f in data["failures"][:3])
    spent = "no model used" if "offline" in data else f"{usage['llm_calls']} LLM calls"
    return (
        f"{head}: {counts['added']} added, {counts['updated']} updated, {counts['unchanged']} unchanged, "
        f"{counts['removed']} removed, {counts['failed']} failed in {data['elapsed_s']:.2f}s; "
        f"{spent}{failed}"
    )


def watch_folders(common: Common, llm: LLM, options: BuildOptions) -> int:
    """Build, then watch until SIGINT/SIGTERM (exit 130/143; every finished document kept)."""
    from docsum.builder.watch import watch
    from docsum.ingest.ocr import wanted

    from .render import BuildProgress

    env, settings = common.env, common.settings

    def reporter(number: int) -> BuildReporter | None:
        # The first reconcile may be long: it shows progress as a build does.
        # Later batches are one line each (per file with -v).
        if number == 0 or env.verbose:
            return BuildProgress(
                env, enabled=not common.json, offline=llm.metadata.extractive, ocr_ran=wanted(options.ocr)
            )
        return None

    def on_batch(batch: Batch) -> None:
        if common.json:
            env.out(json.dumps(batch.as_dict(), ensure_ascii=False, default=str))
        elif batch.report is None or batch.exit_code:
            env.error(batch_line(batch))
        else:
            env.info(batch_line(batch))
        if batch.number == 0 and not common.json:
            env.info(f"docsum: watch: watching {len(options.paths)} path(s); stop with Ctrl-C")

    async def go() -> None:
        try:
            await watch(
                common.store_path(),
                llm,
                options,
                on_batch,
                settle=settings.watch_settle,
                max_calls=settings.build_max_calls,
                reporter=reporter,
            )
        finally:
            await llm.aclose()

    run_async(go)
    return ExitCode.OK  # not reached: a watch ends by a signal (Interrupted) or an error
