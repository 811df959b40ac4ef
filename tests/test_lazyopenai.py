"""docsum's import of the `openai` package with its model packages deferred
(docsum/models/lazyopenai.py): what anyone reads from the package is what an
eager import gives, a whole request works through it, it imports a fraction
of the modules, and when the deferred import fails the ordinary one is made.

Each check runs in a fresh interpreter: the test process itself has imported
openai eagerly long before (tests/test_fakeopenai.py does at collection)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from fakeopenai import FakeOpenAI
from helpers import REPO, subprocess_env

# Names read from the deferred packages: classes re-exported by an __init__,
# submodules, a name the __init__ binds with `as`, and names that exist nowhere.
PROBED = {
    "openai.types": [
        "CreateEmbeddingResponse",
        "Batch",
        "ChatModel",
        "embedding_create_params",
        "chat",
        "shared_params",
        "no_such_name",
    ],
    "openai.types.chat": [
        "ChatCompletion",
        "ChatCompletionChunk",
        "chat_completion",
        "completion_create_params",
        "no_such_name",
    ],
    "openai.lib": ["pydantic_function_tool", "type_to_response_format_param", "azure", "no_such_name"],
}

# For each probed name: what it is (a module by name, else the defining
# module and qualified name), from a fresh interpreter that imported openai
# one way or the other.
DESCRIBE = """
import importlib, json, sys
probed = json.loads(sys.argv[1])
if sys.argv[2] == "lazy":
    from docsum.models.lazyopenai import import_openai
    import_openai()
else:
    import openai
def describe(value):
    if type(value).__name__ == "module":
        return ["module", value.__name__]
    return [getattr(value, "__module__", None), getattr(value, "__qualname__", repr(value)[:60])]
out = {}
for package, names in probed.items():
    module = importlib.import_module(package)
    out[package] = {n: describe(getattr(module, n)) if hasattr(module, n) else None for n in names}
    out[package]["__dir__ has Batch"] = "Batch" in dir(module) if package == "openai.types" else None
print(json.dumps(out))
"""


def python(script: str, *args: str, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = subprocess_env()
    if path is not None:
        env["PYTHONPATH"] = f"{path}:{env['PYTHONPATH']}"
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def test_every_name_read_is_what_an_eager_import_gives() -> None:
    lazy, eager = (json.loads(python(DESCRIBE, json.dumps(PROBED), how).stdout) for how in ("lazy", "eager"))
    assert lazy == eager
    assert eager["openai.types"]["CreateEmbeddingResponse"] == [
        "openai.types.create_embedding_response",
        "CreateEmbeddingResponse",
    ]
    assert eager["openai.types"]["no_such_name"] is None


# One interpreter: the deferred import, a whole exchange with the fake server
# (completion, stream, embeddings, an error), threads reading the same
# deferred package at once, and what it all imported.
THROUGH_THE_LAZY_PATH = """
import asyncio, json, pickle, sys, threading
from docsum.models.lazyopenai import import_openai, is_deferred
from docsum.models.openaillm import OpenAILLM
from docsum.models.prompts import TEXT_QA_PROMPT
from docsum.errors import LLMError

openai = import_openai()
report = {"types deferred after import": is_deferred(openai.types)}
from openai.types import embedding_create_params  # a submodule: the __init__ stays unrun
report["types deferred after a submodule"] = is_deferred(openai.types)
report["submodule"] = embedding_create_params.__name__

llm = OpenAILLM(model="fake-chat", base_url=sys.argv[1], api_key="sk-lazy", max_retries=0, timeout=10, embed_model="fake-embed")
async def exchange():
    text = await llm.apredict(TEXT_QA_PROMPT, context_str="Bees make honey.", query_str="What do bees make?")
    pieces = [p async for p in llm.astream(TEXT_QA_PROMPT, context_str="Bees make honey.", query_str="What?")]
    vectors = await llm.aembed(["red", "green"])
    try:
        await llm.apredict(TEXT_QA_PROMPT, context_str="fail", query_str="please")
        failed = None
    except LLMError as exc:
        failed = str(exc)
    await llm.aclose()
    return text, "".join(pieces), vectors.shape, failed
text, streamed, shape, failed = asyncio.run(exchange())
report.update(text=text, streamed=streamed, shape=list(shape), failed=failed)
report["modules"] = {p: sum(1 for m in sys.modules if m.startswith(p)) for p in ("openai.types", "openai.resources")}
report["types deferred after requests"] = is_deferred(openai.types)

# The exception classes are the package's own: caught by their names, pickled as an eager import pickles them.
import openai._exceptions
report["same classes"] = openai.APIStatusError is openai._exceptions.APIStatusError and issubclass(openai.BadRequestError, openai.OpenAIError)
err = openai.OpenAIError("boom")
report["pickled"] = str(pickle.loads(pickle.dumps(err)))

# Eight threads read names of one deferred package at once: each gets the class.
from openai.types import responses
assert is_deferred(responses)
names = ["Response", "ResponseOutputMessage", "ResponseOutputText", "ResponseCompletedEvent", "ResponseUsage", "FunctionTool", "Response", "ResponseError"]
got = {}
def read(i, name):
    got[i] = getattr(responses, name).__qualname__
threads = [threading.Thread(target=read, args=(i, n)) for i, n in enumerate(names)]
for t in threads: t.start()
for t in threads: t.join()
report["threads"] = [got[i] for i in range(len(names))]
report["finder left"] = any(type(f).__name__ == "DeferredPackageFinder" for f in sys.meta_path)
print(json.dumps(report))
"""


def test_a_whole_exchange_through_the_lazy_path() -> None:
    from fakeopenai import Reply

    with FakeOpenAI() as fake:
        fake.script("Honey.", "Bees make honey.", Reply(status=400, error_message="model 'fake-chat' is tired"))
        report: dict[str, Any] = json.loads(python(THROUGH_THE_LAZY_PATH, fake.base_url).stdout)
        (embedding,) = fake.embedding_requests()
        chats = fake.chat_requests()
    assert report["types deferred after import"] and report["types deferred after a submodule"]
    assert report["submodule"] == "openai.types.embedding_create_params"
    assert (report["text"], report["streamed"], report["shape"]) == ("Honey.", "Bees make honey.", [2, 64])
    assert "answered 400" in report["failed"] and "tired" in report["failed"]
    # The typed resource layer is never imported; a few model modules are
    # (openai's own __init__ reads some), not the 500 of an eager import.
    assert report["modules"]["openai.resources"] == 0
    assert report["modules"]["openai.types"] < 40, report["modules"]
    assert report["types deferred after requests"]
    assert report["same classes"] and report["pickled"] == "boom"
    assert report["threads"] == [
        "Response",
        "ResponseOutputMessage",
        "ResponseOutputText",
        "ResponseCompletedEvent",
        "ResponseUsage",
        "FunctionTool",
        "Response",
        "ResponseError",
    ]
    assert not report["finder left"]
    # What the server received is what the package's resources send.
    assert embedding.body["encoding_format"] == "base64" and embedding.body["input"] == ["red", "green"]
    assert embedding.headers["authorization"] == "Bearer sk-lazy"
    assert chats[1].body["stream"] is True and chats[1].body["stream_options"] == {"include_usage": True}
    assert all(r.headers["x-stainless-retry-count"] == "0" for r in chats)


# A stand-in `openai` whose __init__ reads a deferred package the one way no
# hook sees (`vars()`): the deferred import fails, and must leave nothing behind.
FAKE_INIT = """
from . import types
assert "Marker" in vars(types), "types not initialised"
from .types import Marker
"""

FALLBACK = """
import json, sys
from docsum.models.lazyopenai import import_openai, is_deferred
openai = import_openai()
print(json.dumps({
    "marker": openai.Marker.__name__,
    "deferred": is_deferred(openai.types),
    "finder left": any(type(f).__name__ == "DeferredPackageFinder" for f in sys.meta_path),
    "from": openai.__file__,
}))
"""


def test_a_failed_deferred_import_falls_back_to_the_ordinary_one(tmp_path: Path) -> None:
    package = tmp_path / "openai"
    (package / "types").mkdir(parents=True)
    (package / "__init__.py").write_text(FAKE_INIT)
    (package / "types" / "__init__.py").write_text("class Marker:\n    pass\n")
    report = json.loads(python(FALLBACK, path=tmp_path).stdout)
    assert report == {"marker": "Marker", "deferred": False, "finder left": False, "from": str(package / "__init__.py")}
