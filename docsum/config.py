"""Reading the settings declared in docsum.settings, and what they select.

Precedence: command-line flag > environment variable > config file > default.
The config file is TOML (`config.toml` in the docsum config directory, or the
file named by DOCSUM_CONFIG) with the setting names as keys. From the values
come the engine (`make_llm`), the concurrency limits (`Settings.limits`) and
the options of a build or a question (`build_options`, `ask_options`).
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from docsum.errors import ConfigError
from docsum.paths import config_dir, index_store_path
from docsum.sanitize import credential_secrets, mask_url
from docsum.settings import FALLBACK_CONTEXT_WINDOW, SETTING_BY_NAME, SETTINGS, Limits, Setting, default
from docsum.userfiles import CONFIG_MAX_BYTES, read_regular_text

if TYPE_CHECKING:  # the engines, the pipeline and the question code load when a command uses them
    from docsum.builder.report import BuildOptions
    from docsum.locations import StoreLocation
    from docsum.models.llm import LLM
    from docsum.query.options import AskOptions
    from docsum.query.question import QuestionRoom
    from docsum.synthesizers import Mode

T = TypeVar("T")


class Settings:
    """The value of every setting for one command, checked, and where each
    came from. The attributes are the names of docsum.settings.SETTINGS, read
    from that table: nothing here repeats a name, a type or a default.
    Read-only once loaded."""

    __slots__ = ("_values", "sources")
    _values: dict[str, Any]
    sources: Mapping[str, str]

    def __init__(self, values: Mapping[str, Any], sources: Mapping[str, str] | None = None) -> None:
        missing = [s.name for s in SETTINGS if s.name not in values]
        unknown = sorted(set(values) - set(SETTING_BY_NAME))
        if missing or unknown:
            raise TypeError(f"Settings: missing {missing}, unknown {unknown}")
        object.__setattr__(self, "_values", dict(values))
        object.__setattr__(self, "sources", dict(sources or {}))

    def __getattr__(self, name: str) -> Any:
        # Only called for names that are not slots: the settings themselves.
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"no setting {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"settings are read-only ({name})")

    def __repr__(self) -> str:
        # A secret never reaches a repr, a log or a traceback.
        shown = {s.name: ("***" if s.secret and self._values[s.name] else self._values[s.name]) for s in SETTINGS}
        return f"Settings({shown!r})"

    @property
    def values(self) -> dict[str, Any]:
        """Every setting's value by name."""
        return dict(self._values)

    @property
    def limits(self) -> Limits:
        """How much runs at once, from --concurrency (see docsum.settings.Limits)."""
        return Limits.of(self.concurrency)

    def given(self, name: str) -> bool:
        """Whether the command line set `name`."""
        return self.sources.get(name) == "flag"

    def secret_values(self) -> list[str]:
        """Every value that must never be printed (see credential_secrets)."""
        # (A password in a postgresql:// store is added by the CLI, from the
        # store location it resolves: see docsum.locations.location_secrets.)
        return credential_secrets(self.api_key, self.base_url)

    def describe(self) -> list[dict[str, Any]]:
        """Every setting a config file may hold, with its effective value and
        source; secrets masked."""
        rows = []
        offline = engine_choice(self) == "extractive"
        for setting in SETTINGS:
            if not setting.in_file:
                continue
            value = getattr(self, setting.name)
            if setting.secret and value:
                value = "(set)"
            elif setting.show is not None:
                value = setting.show(value)
            rows.append(
                {
                    "name": setting.name,
                    "value": value,
                    "source": self.sources.get(setting.name, "default"),
                    "help": setting.help,
                    # A server's settings do nothing when the offline engine answers.
                    "used": not (offline and setting.server_only),
                }
            )
        return rows


def config_file_path() -> Path:
    named = os.environ.get("DOCSUM_CONFIG")
    return Path(named) if named else config_dir() / "config.toml"


def load_settings(flags: dict[str, Any] | None = None, environ: dict[str, str] | None = None) -> Settings:
    """Every setting's value: a flag given on the command line, else the first
    environment variable set, else config.toml, else the declared default.
    Each value is checked here, once, against its declaration; a bad one is a
    ConfigError (exit 2) naming where it came from.

    `flags` holds what the command line gave, by setting name: text for a
    valued option, a list of texts for a repeated one, True/False for a switch
    (False and None mean "not given")."""
    given = {k: v for k, v in (flags or {}).items() if v is not None and v is not False and v != []}
    unknown_flags = sorted(set(given) - set(SETTING_BY_NAME))
    if unknown_flags:
        raise ConfigError(f"unknown setting(s) {', '.join(unknown_flags)}")
    env = os.environ if environ is None else environ
    path = config_file_path()
    file_values = _read_config_file(path)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for setting in SETTINGS:
        values[setting.name], sources[setting.name] = _value_of(setting, given, env, file_values, path)
    settings = Settings(values, sources)
    if settings.chunk_overlap >= settings.chunk_size:
        where = " and ".join(sorted({sources["chunk_overlap"], sources["chunk_size"]}))
        raise ConfigError(
            f"chunk overlap ({settings.chunk_overlap}) must be smaller than chunk size ({settings.chunk_size}) (from {where})"
        )
    return settings


def _read_config_file(path: Path) -> dict[str, Any]:
    if not path.exists():  # a FIFO or a folder in its place is refused below, not ignored
        return {}
    try:
        # A byte-order mark (Windows editors write one) is dropped: TOML
        # itself would refuse it as "Invalid statement" at line 1.
        values = tomllib.loads(read_regular_text(path, CONFIG_MAX_BYTES, "a config"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read config file (not UTF-8 text: byte {exc.start + 1})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file ({exc.strerror or exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: cannot read config file ({exc})") from exc
    unknown = sorted(k for k in values if k not in SETTING_BY_NAME or not SETTING_BY_NAME[k].in_file)
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s) {', '.join(unknown)}")
    return values


def _value_of(
    setting: Setting, flags: dict[str, Any], env: Mapping[str, str], file_values: dict[str, Any], path: Path
) -> tuple[Any, str]:
    """(value, source) of one setting."""
    name = setting.name
    if name in flags:
        raw = flags[name]
        where = setting.option or name
        if setting.kind.repeated:
            return [item for text in raw for item in _parse(setting, str(text), where)], "flag"
        if setting.kind.switch or setting.kind.toggle:
            return _parse_value(setting, raw, where), "flag"
        return _parse(setting, str(raw), where), "flag"
    for var in setting.env:
        if env.get(var):
            return _parse(setting, env[var], f"environment variable {var}"), f"env {var}"
    if name in file_values:
        raw = file_values[name]
        text_kind = setting.kind.parse is setting.kind.check  # text-like: the value is taken as written
        if isinstance(raw, (dict, list, bool)) or (isinstance(raw, float) and not text_kind and not math.isfinite(raw)):
            raise ConfigError(f"{path}: bad value for {name}: {raw!r} is not a single value of the right kind")
        return _parse(setting, str(raw), str(path)), f"file {path}"
    return default(name), "default"


def _parse(setting: Setting, raw: str, where: str) -> Any:
    try:
        return setting.kind.parse(raw)
    except ValueError as exc:
        raise ConfigError(f"{where}: bad value for {setting.name}: {exc}") from None


def _parse_value(setting: Setting, value: Any, where: str) -> Any:
    try:
        return setting.check(value)
    except ValueError as exc:
        raise ConfigError(f"{where}: bad value for {setting.name}: {exc}") from None


def store_location(settings: Settings) -> StoreLocation:
    """The store a command uses, by one rule for every command: --store, else
    --index NAME (both on one command line are an error), else $DOCSUM_STORE,
    else `store` in config.toml, else the index "default". (A postgresql:// URL stays a string: Path would fold its "//".)"""
    from docsum.locations import check_location, is_postgres

    if settings.given("store") and settings.given("index"):
        # Two stores named: answering from one of them without a word left
        # the user reading the wrong documents' answers.
        raise ConfigError(f"give --store or --index, not both (--store {settings.store}, --index {settings.index})")
    if settings.store and settings.given("store"):
        chosen = str(settings.store)
    elif settings.index:
        # An explicit --index beats $DOCSUM_STORE: flags win over the environment.
        return index_store_path(settings.index)
    elif settings.store:  # $DOCSUM_STORE, else config.toml
        chosen = str(settings.store)
    else:
        return index_store_path("default")
    if is_postgres(chosen):
        check_location(chosen.strip())
        return chosen.strip()
    return Path(chosen).expanduser()


def engine_choice(settings: Settings) -> str:
    """ "openai" or "extractive": what `--llm auto` means with these settings."""
    if settings.llm == "auto":
        return "openai" if (settings.api_key or settings.base_url) else "extractive"
    return str(settings.llm)


def describe_engine(settings: Settings) -> tuple[str, str]:
    """(what answers, why), for `docsum config show`: the engine these
    settings select and the settings that selected it."""
    source = settings.sources.get("llm", "default")
    if engine_choice(settings) == "extractive":
        if settings.llm == "extractive":
            why = f"llm = extractive ({source})"
        else:
            why = "no OPENAI_API_KEY (or DOCSUM_API_KEY) and no base_url set"
        return "offline extractive engine (no model is used; answers quote the documents)", why
    server = mask_url(settings.base_url) if settings.base_url else "https://api.openai.com/v1"
    reasons = [f"llm = {settings.llm} ({source})"]
    if settings.base_url:
        reasons.append(f"base_url ({settings.sources.get('base_url', 'default')})")
    if settings.api_key:
        reasons.append(f"an API key ({settings.sources.get('api_key', 'default')})")
    return f"model {settings.model} on {server}", ", ".join(reasons)


def effective_embed_model(settings: Settings) -> str:
    """The embedding model summaries and questions are embedded with: the
    local embedder when named (`--embed-model local`, any engine), else the
    offline lexical vectors for the offline engine or a server without an
    embedding model named, else the named model (text-embedding-3-small on
    OpenAI)."""
    from docsum.lexical import LEXICAL_EMBED_MODEL
    from docsum.models.localembed import LOCAL_EMBED_MODEL, resolve_embed_model

    named = resolve_embed_model(settings.embed_model)
    if named == LOCAL_EMBED_MODEL:
        return named
    if engine_choice(settings) == "extractive":
        return LEXICAL_EMBED_MODEL
    return named or ("text-embedding-3-small" if not settings.base_url else LEXICAL_EMBED_MODEL)


def describe_embedder(settings: Settings) -> str:
    """One line for `docsum config show`: which embedder is in use and where it runs."""
    from docsum.lexical import LEXICAL_EMBED_MODEL
    from docsum.models.localembed import LOCAL_EMBED_MODEL, WEIGHTS_DISTRIBUTION, WEIGHTS_VERSION, missing_packages

    model = effective_embed_model(settings)
    if model == LOCAL_EMBED_MODEL:
        missing = missing_packages()
        state = f"not installed: {', '.join(missing)}" if missing else "installed"
        return f"{model} (offline, onnxruntime, weights {WEIGHTS_DISTRIBUTION} {WEIGHTS_VERSION}; {state})"
    if model == LEXICAL_EMBED_MODEL:
        return f"{model} (offline hashed lexical vectors)"
    return f"{model} (on the server)"


def make_llm(settings: Settings) -> tuple[Any, str | None]:
    """The LLM these settings select, and a one-line notice when it is the
    offline default (the CLI prints it on stderr)."""
    from docsum.models.extractive import ExtractiveLLM
    from docsum.models.llm import check_window
    from docsum.models.localembed import LOCAL_EMBED_MODEL, check_available

    embed_model = effective_embed_model(settings)
    if embed_model == LOCAL_EMBED_MODEL:
        check_available()  # exit 2 now, not a failure per document later
    choice = engine_choice(settings)
    llm: LLM
    if choice == "extractive":
        offline = ExtractiveLLM(
            settings.context_window,
            settings.max_output_tokens,
            limits=settings.limits,
            embed_model=embed_model,
            answer_sentences=settings.answer_sentences,
            answer_floor=settings.answer_floor,
        )
        check_window(offline.metadata.context_window, offline.metadata.num_output)
        if settings.llm != "auto":
            return offline, None
        return offline, (
            "docsum: no API key or base URL configured; using the offline extractive engine "
            "(no model is used: answers are sentences quoted from your documents). "
            "Set OPENAI_API_KEY or --base-url to use a model."
        )
    if not settings.api_key and not settings.base_url:
        raise ConfigError("--llm openai needs OPENAI_API_KEY (or DOCSUM_API_KEY) or --base-url")
    from docsum.models.openaillm import OpenAILLM

    llm = OpenAILLM(
        model=settings.model,
        base_url=settings.base_url,
        api_key=settings.api_key,
        embed_model=embed_model,
        context_window=settings.context_window,
        num_output=settings.max_output_tokens,
        limits=settings.limits,
        timeout=settings.timeout,
        max_retries=settings.max_retries,
    )
    check_window(llm.metadata.context_window, llm.metadata.num_output)
    notice: str | None = None
    if settings.base_url and settings.sources.get("model") == "default":
        # A local server has its own model names: say what is being asked
        # for rather than send OpenAI's default name in silence.
        notice = (
            f"docsum: no --model given; asking {mask_url(settings.base_url)} for model {settings.model!r} "
            "(set --model or DOCSUM_MODEL to the server's model name)"
        )
    return llm, notice


def build_options(settings: Settings, paths: list[Path]) -> BuildOptions:
    """The options of `docsum build PATHS` with these settings, checked."""
    from docsum.builder.pipeline import check_build_options
    from docsum.builder.report import BuildOptions
    from docsum.models.prompts import load_template_file

    options = _record(
        BuildOptions,
        settings,
        paths=[p.expanduser() for p in paths],
        summary_query=settings.summary_query or BuildOptions.summary_query,
        prune=not settings.no_prune,
        wait_seconds=settings.wait,
        parse_timeout_s=settings.parse_timeout,
        parse_memory_mb=settings.parse_memory,
        ocr=settings.ocr,
        limits=settings.limits,
        max_calls=settings.build_max_calls,
    )
    prompt = settings.summary_prompt
    if prompt is not None:
        options.summary_template = load_template_file(prompt, "summary", str(prompt))
        options.summary_template.check({"context_str", "query_str"})
        if "context_str" not in options.summary_template.template_vars:
            # Without it the document never reaches the model: every summary
            # would be paid for and say nothing about its document.
            raise ConfigError(f"{prompt}: a summary prompt must contain {{context_str}} (where the document goes)")
    check_build_options(options)
    return options


# The tokenizer the offline engine counts with (docsum.models.extractive;
# tests/test_question.py holds the two to agreement).
OFFLINE_TOKENIZER_MODEL = "gpt-4"


def question_room(settings: Settings) -> QuestionRoom:
    """How long a question may be with these settings, known without making
    the engine: the configured context window, else the model's known one
    (the offline engine: the documented default), less the answer's reserve,
    counted with the engine's tokenizer. The command line checks a question
    with it before anything else happens."""
    from docsum.models.llm import check_window, context_window_for
    from docsum.models.tokens import tokenizer_for_model
    from docsum.query.question import QuestionRoom

    if engine_choice(settings) == "extractive":
        window, tokenizer_model = settings.context_window or FALLBACK_CONTEXT_WINDOW, OFFLINE_TOKENIZER_MODEL
    else:
        window, tokenizer_model = settings.context_window or context_window_for(settings.model), settings.model
    check_window(window, settings.max_output_tokens)  # before the question's own check, as build and eval do
    return QuestionRoom(window, settings.max_output_tokens, tokenizer_for_model(tokenizer_model))


def answer_mode(settings: Settings) -> Mode:
    """The synthesizer --mode names, resolved here, once, for ask and eval:
    a wrong name is exit 2 before anything is read or sent."""
    from docsum.synthesizers import resolve_mode

    return resolve_mode(settings.mode)


def ask_options(settings: Settings, llm: LLM, *, stream: bool) -> AskOptions:
    """The options of `docsum ask` with these settings;
    `stream` is the caller's decision (a terminal, not --json)."""
    from docsum.models.prompts import KIND_REFINE, KIND_TEXT_QA, load_template_file
    from docsum.query.options import AskOptions
    from docsum.query.retrieve import default_retriever

    def template(file: Path | None, kind: str) -> Any:
        return load_template_file(file, kind, str(file)) if file is not None else None

    return _record(
        AskOptions,
        settings,
        mode=answer_mode(settings),
        retriever=settings.retriever or default_retriever(llm),
        text_qa_template=template(settings.template, KIND_TEXT_QA),
        refine_template=template(settings.refine_template, KIND_REFINE),
        variables=dict(settings.var),
        stream=stream,
        limits=settings.limits,
    )


def _record(record: type[T], settings: Settings, **derived: Any) -> T:
    """An options dataclass: each field named like a setting takes that
    setting's value, unless the caller derived it (`derived`)."""
    import dataclasses

    values = {f.name: getattr(settings, f.name) for f in dataclasses.fields(record) if f.name in SETTING_BY_NAME}  # type: ignore[arg-type]
    return record(**{**values, **derived})
