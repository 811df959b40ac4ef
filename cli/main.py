"""The `docsum` command. Thin: parse options, call the library, render output.
Exit codes: docsum.errors.ExitCode (their meanings: EXIT_CODE_MEANINGS).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from docsum import __version__ as docsum_version
from docsum.errors import EXIT_CODE_MEANINGS, ConfigError, DocsumError, ExitCode
from docsum.sanitize import clean_name, clean_text
from docsum.settings import ASK, BUILD
from docsum.userfiles import QUESTIONS_MAX_BYTES, read_regular

from .common import Common, DocsumCommand, examples, with_common
from .stopping import leave, run_async

# docsum's numpy work in a command is matrix-vector scans, bound by memory
# bandwidth: OpenBLAS's threads do not speed them up, and on a busy machine
# their spinning made a 100,000-document scan several times slower
# (bench/RESULTS.md, section 9). Set before numpy loads; the user's setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# Each command imports the rest of docsum itself, so that a command (and
# --help) loads only what it uses: numpy with vectors, openai with the first
# request, rich on a terminal, the evaluation code for eval.
if TYPE_CHECKING:
    from docsum.builder.report import BuildOptions
    from docsum.locations import StoreLocation
    from docsum.models.llm import LLM
    from docsum.query.options import AskOptions
    from docsum.query.question import Question
    from docsum.query.results import AskResult


# What `docsum --help` says (the module docstring above is for developers).
# "\b" keeps click from re-flowing the paragraph that follows it.
def _help() -> str:
    import textwrap

    from docsum.ingest.formats import formats_read

    codes = "\n".join(
        textwrap.fill(meaning, 76, initial_indent=f"  {int(code):<5}", subsequent_indent=" " * 7)
        for code, meaning in EXIT_CODE_MEANINGS.items()
    )
    return f"""Summarize folders of documents into a local store, then answer
questions from the documents whose summaries fit best.

Reads {formats_read()}.

\b
Start with `docsum build FOLDER`, then `docsum ask "QUESTION"`.
With no API key and no --base-url, docsum uses its offline extractive engine:
no model is called, answers are sentences quoted from the documents.

\b
Exit codes:
{codes}
"""


app = typer.Typer(
    name="docsum",
    help=_help(),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,  # never render locals (they can hold an API key)
    rich_markup_mode=None,
)
config_app = typer.Typer(help="Inspect docsum's settings.", no_args_is_help=True)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"docsum {docsum_version}")
        raise typer.Exit()


@app.callback()
def _top(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print docsum's version and exit.")
    ] = False,
) -> None:
    """Options that come before the command."""


app.add_typer(config_app, name="config")


@app.command(
    cls=DocsumCommand,
    epilog=examples(
        ("docsum build ./reports", "Summarize every document under ./reports into the default store."),
        ("docsum build ./reports --dry-run", "Show what a build would read and summarize; change nothing."),
    ),
)
@with_common(BUILD)
def build(
    paths: Annotated[
        list[Path],
        typer.Argument(metavar="PATH", help="Folders or files to index.", show_default=False, readable=False),
    ],
    *,
    common: Common,
) -> int:
    """Summarize every document under PATHS into the store, reconciling it with
    the folder: new files added, changed ones re-summarized, vanished ones
    removed, unchanged ones skipped at no cost. Exit 3 if some files failed
    (they are listed and retried next run) or a folder could not be listed or
    is empty while the store holds documents from it (they are kept), 4 if
    another build holds the store."""
    from docsum.builder.pipeline import build as build_store
    from docsum.config import build_options

    from .render import BuildProgress, print_build_report

    llm = common.llm()
    settings = common.settings
    options = build_options(settings, paths)
    store_path = common.store_path()
    if settings.watch:
        from docsum.builder.watch import check_available

        check_available()  # exit 2 before anything is built
    common.start()
    if llm.metadata.extractive and settings.summary_language:
        common.env.info(
            "docsum: note: the offline engine ignores --summary-language (its summaries quote the document)"
        )
    if settings.watch:
        from .watch_cmd import watch_folders

        return watch_folders(common, llm, options)
    if settings.build_max_calls is not None and not options.dry_run:
        _check_build_calls(store_path, llm, options, settings.build_max_calls)
    offline = llm.metadata.extractive
    from docsum.ingest.ocr import wanted

    progress = BuildProgress(
        common.env, enabled=not common.json, offline=offline, dry_run=options.dry_run, ocr_ran=wanted(options.ocr)
    )
    report = run_async(lambda: build_store(store_path, llm, options, progress))
    print_build_report(common.env, report, as_json=common.json)
    return ExitCode.PARTIAL if report.counts["failed"] else ExitCode.OK


def _check_build_calls(store_path: StoreLocation, llm: LLM, options: BuildOptions, limit: int) -> None:
    """Plan the build as --dry-run does; refuse it before any call when it
    plans more than `limit` LLM calls."""
    from docsum.builder.pipeline import build as build_store
    from docsum.builder.report import calls_over_limit

    plan = run_async(lambda: build_store(store_path, llm, dataclasses.replace(options, dry_run=True)))
    refusal = calls_over_limit(plan, limit)
    if refusal is not None:
        raise ConfigError(refusal)


@app.command(
    cls=DocsumCommand,
    epilog=examples(
        ('docsum ask "When is the bakery\'s auction?"', "Answer from the documents whose summaries fit best."),
        (
            'docsum ask "What did the council decide?" --json',
            "The answer, its sources and citations as one JSON document.",
        ),
    ),
)
@with_common(ASK)
def ask(  # noqa: C901 (listed when the check came in: simplify, then drop this)
    question: Annotated[
        str | None,
        typer.Argument(
            metavar="QUESTION", help="The question; - reads it from stdin (or --questions FILE).", show_default=False
        ),
    ] = None,
    *,
    common: Common,
) -> int:
    """Answer QUESTION from the documents whose summaries fit it best. The
    answer goes to stdout, then its sources; --json prints one JSON document.
    Exit 5 when there is nothing to answer from (empty store, no document
    chosen, everything filtered, nothing satisfied the question). With
    --questions FILE: one JSON line per question as each is answered, and the
    worst of the answers' exit codes (1 over 2 over 5 over 0)."""
    from docsum.config import ask_options, question_room
    from docsum.query.ask import ask as ask_question
    from docsum.schema import ResponseStatus
    from docsum.synthesizers import EMPTY_ANSWER_REASON

    from .render import print_answer

    settings = common.settings
    questions, explain = settings.questions, settings.explain
    if (question is None) == (questions is None):
        raise ConfigError("give either a QUESTION or --questions FILE")
    if question == "-":
        # `echo QUESTION | docsum ask -`, as --questions - reads its file.
        question = _read_text("-", "the question")
    if question is not None:
        # Empty or too long: refused first, like every usage error, before
        # the engine is made or announced.
        question = question_room(settings).check(question)
    llm = common.llm()
    env = common.env
    stream = settings.stream
    streaming = (env.stdout_isatty if stream is None else stream) and not common.json and questions is None
    options = ask_options(settings, llm, stream=streaming)
    items = _read_question_file(questions) if questions is not None else None
    store_path = common.existing_store()
    common.start()
    _note_ignored(common, llm.metadata.extractive, options)
    if items is not None:
        return _ask_many(common, llm, items, options, explain)
    assert question is not None
    # One line per explain entry, whatever a file name or summary holds.
    explain_to = (lambda msg: env.error(f"explain: {clean_name(msg)}")) if explain else None
    # Intermediate calls (refine steps, tree levels) are progress: shown on a
    # terminal, with -v or --explain elsewhere; never on stdout.
    progress_to = env.info if env.verbose or explain or env.stderr_isatty else None

    async def go() -> AskResult:
        try:
            result = await ask_question(store_path, llm, question, options, explain=explain_to, progress=progress_to)
            streamed = result.stream is not None
            await print_answer(env, result, as_json=common.json)
            if streamed and result.status is ResponseStatus.OK and not result.answer.strip():
                # Only known once the stream is drained (see BaseSynthesizer.asynthesize).
                result.status, result.reason = ResponseStatus.EMPTY, EMPTY_ANSWER_REASON
            return result
        finally:
            await llm.aclose()

    result = run_async(go)
    if not explain and not common.json:
        for warning in result.warnings:  # --explain and --json already carry them
            env.info(f"docsum: warning: {warning}")
    if llm.metadata.extractive and result.status is ResponseStatus.OK and not common.json:
        env.info("docsum: note: extractive answer (sentences quoted from the documents; no language model was used)")
    if result.status is not ResponseStatus.OK:
        # One line on stderr, with --json too (stdout still holds only the JSON).
        env.error(f"docsum: nothing to answer from: {result.reason}")
        return ExitCode.NOTHING_TO_ANSWER
    return ExitCode.OK


def _read_question_file(source: str) -> list[Question]:
    """The questions of `--questions SOURCE` (a file, or - for stdin)."""
    from docsum.query.question import read_questions

    where = "stdin" if source == "-" else source
    # Split as bytes and decoded line by line: a line that is not UTF-8 is
    # that question's error, and the rest are still answered.
    return read_questions(_read_bytes(source, "the questions").split(b"\n"), where)


def _read_bytes(source: str, what: str) -> bytes:
    """The bytes of a file, or of stdin for "-"; unreadable is a usage error naming the source."""
    where = "stdin" if source == "-" else source
    try:
        if source == "-":
            return sys.stdin.buffer.read()
        return read_regular(Path(source).expanduser(), QUESTIONS_MAX_BYTES, "a questions")
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read {what} ({exc.strerror or exc})") from None


def _read_text(source: str, what: str) -> str:
    """The UTF-8 text of a file or of stdin ("-"), without a byte-order mark."""
    try:
        return _read_bytes(source, what).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        where = "stdin" if source == "-" else source
        raise ConfigError(f"{where}: cannot read {what} (not UTF-8 text: byte {exc.start + 1})") from None


def _ask_many(common: Common, llm: LLM, items: list[Question], options: AskOptions, explain: bool) -> int:
    """`docsum ask --questions SOURCE`: JSON lines out as answers finish."""
    from docsum.query.ask import ask_many
    from docsum.query.results import exit_code_of, worst_exit_code

    env = common.env
    codes: list[int] = []

    def answered(item: Question, result: AskResult | DocsumError) -> None:
        code = exit_code_of(result)
        codes.append(code)
        if isinstance(result, DocsumError):
            env.error(f"docsum: question {clean_name(str(item.id))}: error: {result}")
            data: dict[str, Any] = {"question": item.text, "answer": "", "status": "error", "reason": str(result)}
        else:
            data = result.as_dict()
        env.out(json.dumps({"id": item.id, **data, "exit_code": code}, ensure_ascii=False, default=str))

    def explain_to(item: Question, msg: str) -> None:
        env.error(f"explain [{clean_name(str(item.id))}]: {clean_name(msg)}")

    async def go() -> None:
        try:
            await ask_many(common.store_path(), llm, items, options, answered, explain=explain_to if explain else None)
        finally:
            await llm.aclose()

    run_async(go)
    return worst_exit_code(codes)


def _note_ignored(common: Common, extractive: bool, options: AskOptions) -> None:
    """Say once what will have no effect, instead of ignoring it in silence."""
    from docsum.query.options import ignored_options

    by_engine, by_mode = ignored_options(options, extractive)
    if by_engine:
        steer = "they steer" if len(by_engine) > 1 else "it steers"
        common.env.info(f"docsum: note: the offline engine ignores {_joined(by_engine)} ({steer} a language model)")
    if by_mode:
        common.env.info(f"docsum: note: the {options.label} mode writes no answer, so {_joined(by_mode)} has no effect")
    used: set[str] = set()
    for template in (options.text_qa_template, options.refine_template):
        if template is not None:
            used |= set(template.template_vars)
    unused = sorted(set(options.variables) - used)
    if unused:
        common.env.info(f"docsum: warning: --var {', '.join(unused)}: no --template or --refine-template uses it")


def _joined(flags: list[str]) -> str:
    """`--a`, `--a and --b`, `--a, --b and --c`."""
    return flags[0] if len(flags) == 1 else f"{', '.join(flags[:-1])} and {flags[-1]}"


def _register() -> None:
    # In their own modules (main.py holds build and ask); registered in the order --help lists them.
    from . import config_cmd, documents
    from .eval_cmd import EXAMPLES, eval_command

    app.command("summaries", cls=DocsumCommand, epilog=documents.SUMMARIES_EXAMPLES)(documents.summaries)
    app.command("show", cls=DocsumCommand, epilog=documents.SHOW_EXAMPLES)(documents.show)
    app.command("remove", cls=DocsumCommand, epilog=documents.REMOVE_EXAMPLES)(documents.remove)
    # Eval pulls in the evaluation code when it runs, which other commands never need.
    app.command("eval", cls=DocsumCommand, epilog=EXAMPLES)(eval_command)
    config_app.command("show", cls=DocsumCommand, epilog=config_cmd.CONFIG_SHOW_EXAMPLES)(config_cmd.config_show)


_register()


def _register_mcp() -> None:
    # Its own module: the MCP SDK is an optional extra, imported only when the command runs.
    from .mcp_cmd import mcp_command

    app.command(
        "mcp",
        cls=DocsumCommand,
        epilog=examples(
            ("docsum mcp --index papers", "Serve the store named papers to the MCP client that started it."),
            ("docsum mcp --allow-build --max-calls 200", "Also offer the build tool, at most 200 LLM calls a build."),
        ),
    )(mcp_command)


_register_mcp()


def run() -> None:
    """The `docsum` executable. A usage error found while the options are
    parsed (an unknown option, a value of the wrong type or out of range) is
    reported as the parser does, on stderr with exit 2; with --json it is
    also the one JSON document on stdout, like every other error."""
    try:
        code = app(standalone_mode=False)
    except Exception as exc:
        exit_code, show = getattr(exc, "exit_code", None), getattr(exc, "show", None)
        if not isinstance(exit_code, int) or show is None:
            raise
        show()
        if "--json" in sys.argv[1:]:
            message = clean_text(" ".join(str(exc.format_message()).split()))  # type: ignore[attr-defined]
            print(json.dumps({"error": {"exit_code": exit_code, "type": "UsageError", "message": message}}, indent=2))
        sys.exit(exit_code)
    leave(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    run()
