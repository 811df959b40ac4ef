"""`docsum mcp`: the store served to AI assistants over the Model Context
Protocol, on stdin/stdout.

Only the protocol's wiring is here (the MCP SDK's low-level server, so that
every tool has a JSON schema and description written for a model, and every
document is a resource listed from the store as it is now); what a tool does
is docsum.query.service's. The SDK is an optional extra, imported by this
command alone.

stdout carries protocol messages and nothing else: the SDK's stdio transport
points file descriptor 1 at stderr while it serves, so a stray print or a
library's warning cannot corrupt the stream; docsum's own log lines already
go to stderr. A request never ends the server: whatever it raises comes back
as a tool error with the one line the CLI would print, secrets redacted.
"""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from docsum import __version__ as docsum_version
from docsum.errors import ConfigError, DocsumError
from docsum.settings import MCP

from .common import Common, with_common
from .stopping import run_async

if TYPE_CHECKING:
    from docsum.query.service import QueryService

    from .env import Environment

log = logging.getLogger("docsum")

RESOURCE_PREFIX = "docsum://document/"

INSTRUCTIONS = (
    "docsum answers questions from a folder of documents that it has summarized one by one. "
    "Start with list_documents or search to see what is there; ask answers with citations "
    "(file, pages, quote) and abstains, with a reason, when the documents do not hold the answer. "
    "An abstention is a normal result: do not retry it with the same question."
)

_QUESTION_KNOBS: dict[str, Any] = {
    "top_k": {"type": "integer", "minimum": 1, "maximum": 10000, "description": "How many documents to read."},
    "retriever": {
        "type": "string",
        "enum": ["fused", "embedding", "bm25", "llm", "hybrid"],
        "description": "How documents are picked: fused (default offline), bm25 (keywords), embedding, "
        "llm or hybrid (these two call the language model to choose).",
    },
}


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    schema: dict[str, Any]
    read_only: bool = True


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


TOOLS = (
    ToolSpec(
        "ask",
        "Answer a question from the stored documents. Returns {answer, status, reason, citations}: status is "
        "'answered', or 'abstained' with the reason when the documents do not answer it. Each citation gives "
        "the file path, pages, the quoted supporting sentence and 'supported' (whether the check found the "
        "cited sentence in that passage). Numbers like [1] in the answer refer to citations[].marker.",
        _object(
            {
                "question": {"type": "string", "description": "The question, in plain words."},
                "mode": {
                    "type": "string",
                    "enum": [
                        "compact",
                        "refine",
                        "tree_summarize",
                        "simple_summarize",
                        "accumulate",
                        "compact_accumulate",
                        "no_text",
                        "context_only",
                    ],
                    "description": "How the answer is written (default: the server's, usually compact).",
                },
                **_QUESTION_KNOBS,
            },
            ["question"],
        ),
    ),
    ToolSpec(
        "search",
        "Find the documents and passages that match a query, without writing an answer (cheap: no language "
        "model call with the default retriever). Returns documents with their score, the first line of their "
        "summary and up to three passages with page numbers.",
        _object({"query": {"type": "string", "description": "Words to look for."}, **_QUESTION_KNOBS}, ["query"]),
    ),
    ToolSpec(
        "list_documents",
        "List the stored documents, a page at a time: doc_id, path, title, pages and the first line of each "
        "summary. Pass next_offset back as offset for the next page (null: no more).",
        _object(
            {
                "offset": {"type": "integer", "minimum": 0, "description": "Documents to skip (default 0)."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 500, "description": "Page size (default 50)."},
            },
            [],
        ),
    ),
    ToolSpec(
        "get_summary",
        "The whole summary of one document, with its title, page count, number of nodes (passages) and the "
        "pages its passages cover. 'doc' is a doc_id (or a unique prefix) or the document's path.",
        _object({"doc": {"type": "string", "description": "doc_id or path, as list_documents gives."}}, ["doc"]),
    ),
    ToolSpec(
        "plan",
        "What an action would cost before anything is spent: what='build' with paths (files to add, update "
        "and remove, LLM calls, prompt tokens), or what='ask' with a question (the calls retrieval makes).",
        _object(
            {
                "what": {"type": "string", "enum": ["build", "ask"]},
                "paths": {"type": "array", "items": {"type": "string"}, "description": "Folders (what='build')."},
                "question": {"type": "string", "description": "The question (what='ask')."},
                "retriever": _QUESTION_KNOBS["retriever"],
            },
            ["what"],
        ),
    ),
)
BUILD_TOOL = ToolSpec(
    "build",
    "Summarize the documents under the given folders into the store, reconciling it: new files added, "
    "changed ones re-summarized, vanished ones removed. May call the language model once per document; "
    "use plan first. Returns the counts per action and any files that failed.",
    _object(
        {"paths": {"type": "array", "items": {"type": "string"}, "description": "Folders or files to index."}},
        ["paths"],
    ),
    read_only=False,
)


def _handlers(service: QueryService) -> dict[str, Callable[[dict[str, Any]], Awaitable[Any]]]:
    async def sync(value: Any) -> Any:
        return value

    return {
        "ask": lambda a: service.ask(a.get("question"), a.get("mode"), a.get("top_k"), a.get("retriever")),
        "search": lambda a: service.search(a.get("query"), a.get("top_k"), a.get("retriever")),
        "list_documents": lambda a: sync(service.list_documents(a.get("offset", 0), a.get("limit", 50))),
        "get_summary": lambda a: sync(service.summary(a.get("doc"))),
        "plan": lambda a: service.plan(a.get("what"), a.get("paths"), a.get("question"), a.get("retriever")),
        "build": lambda a: service.build(a.get("paths")),
    }


def error_line(exc: BaseException, verbose: bool) -> str:
    """The one line `docsum` would print for this error."""
    if isinstance(exc, DocsumError):
        return f"docsum: error: {exc}"
    if isinstance(exc, ValueError):
        return f"docsum: error: {exc}"
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"docsum: error: {exc.strerror.lower()}{where}"
    if verbose:
        log.error("%s", "".join(traceback.format_exception(exc)).rstrip())
    return f"docsum: internal error: {type(exc).__name__}: {exc}"


class DocsumServer:
    """The MCP handlers over one QueryService."""

    def __init__(self, service: QueryService, env: Environment, allow_build: bool) -> None:
        self.service, self.env = service, env
        self.tools = TOOLS + ((BUILD_TOOL,) if allow_build else ())
        self.handlers = _handlers(service)

    def _redact(self, text: str) -> str:
        return self.env.redact(text)

    async def list_tools(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types

        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=t.name,
                    description=t.description,
                    input_schema=t.schema,
                    annotations=types.ToolAnnotations(read_only_hint=t.read_only, open_world_hint=False),
                )
                for t in self.tools
            ]
        )

    async def call_tool(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types

        name, arguments = params.name, params.arguments or {}
        handler = self.handlers.get(name) if any(t.name == name for t in self.tools) else None
        try:
            if handler is None:
                offered = ", ".join(t.name for t in self.tools)
                raise ConfigError(f"no tool {name!r}; this server offers {offered}")
            if not isinstance(arguments, dict):
                raise ConfigError("the arguments must be a JSON object")
            result = await handler(arguments)
        except Exception as exc:  # a request never ends the server
            line = self._redact(error_line(exc, self.env.verbose))
            self.env.error(f"{line} (tool {name})")
            return types.CallToolResult(content=[types.TextContent(text=line)], is_error=True)
        text = self._redact(json.dumps(result, ensure_ascii=False, default=str))
        return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=json.loads(text))

    async def list_resources(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types

        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=RESOURCE_PREFIX + quote(d["doc_id"], safe=""),
                    name=d["path"],
                    title=d["title"] or d["path"],
                    description=self._redact(d["first_line"]),
                    mime_type="text/plain",
                )
                for d in self.service.documents()
            ]
        )

    async def read_resource(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types
        from mcp.shared.exceptions import MCPError
        from mcp_types import INVALID_PARAMS

        uri = str(params.uri)
        try:
            if not uri.startswith(RESOURCE_PREFIX):
                raise ConfigError(f"no resource {uri!r}; documents are {RESOURCE_PREFIX}DOC_ID")
            data = self.service.summary(unquote(uri[len(RESOURCE_PREFIX) :]))
        except Exception as exc:
            raise MCPError(code=INVALID_PARAMS, message=self._redact(error_line(exc, self.env.verbose))) from None
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="text/plain", text=self._redact(data["summary"]))]
        )


async def _serve(server: DocsumServer) -> None:
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    low = Server(
        "docsum",
        version=docsum_version,
        instructions=INSTRUCTIONS,
        on_list_tools=server.list_tools,
        on_call_tool=server.call_tool,
        on_list_resources=server.list_resources,
        on_read_resource=server.read_resource,
    )
    try:
        async with stdio_server() as (read_stream, write_stream):
            await low.run(read_stream, write_stream, low.create_initialization_options())
    finally:
        server.service.close()


@with_common(MCP)
def mcp_command(*, common: Common) -> int:
    """Serve the store to AI assistants (Claude Desktop, Cursor, any MCP
    client) over stdio: tools ask, search, list_documents, get_summary and
    plan, and each document's summary as a resource. Building (a build tool)
    is off unless --allow-build; --max-calls then bounds each build. Runs
    until the client closes stdin; exit 130/143 on SIGINT/SIGTERM."""
    try:
        import mcp.server.lowlevel  # noqa: F401
    except ImportError:
        raise ConfigError("docsum mcp needs the MCP SDK: pip install 'docsum[mcp]'") from None
    from docsum.config import ask_options, build_options
    from docsum.query.service import QueryService

    settings = common.settings
    llm = common.llm()
    options = ask_options(settings, llm, stream=False)
    building = build_options(settings, [Path.cwd()]) if settings.allow_build else None
    service = QueryService(
        common.store_path(), llm, options, build_options=building, build_max_calls=settings.build_max_calls
    )
    common.start()
    common.env.info(
        f"docsum: mcp: serving {service.where} on stdio ({llm.metadata.engine} engine"
        f"{', building allowed' if building is not None else ''}); stop with Ctrl-C or by closing stdin"
    )

    async def go() -> None:
        try:
            await _serve(DocsumServer(service, common.env, building is not None))
        finally:
            await llm.aclose()

    run_async(go)
    return 0
