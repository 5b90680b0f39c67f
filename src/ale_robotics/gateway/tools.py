"""What a request may ask the provider to do outside the sandbox: refused unless allowed.

The agent's sandbox is offline; its model must not be its browser. Both providers offer
tools that run on *their* side, outside the sandbox and unmetered by the gateway: web
search and fetch, remote MCP servers, a code container, file stores, and content they
fetch from a URL in the request. The gateway reads every request for them and refuses
one that asks for any (400, naming it), unless the operator allowed it for the run
(``run --model-allow-tool NAME``, recorded in ``result.json`` and the trajectory).

The check is an allow-list: a tool type the gateway does not know as one the client runs
itself (``function``, ``custom``, a ``namespace`` of those, OpenAI's ``local_shell``,
``shell`` and ``apply_patch``; Anthropic's ``bash_*``, ``text_editor_*``, ``memory_*``) is a
provider-side tool until the operator says otherwise, named by its type.

==================== =========================================================================
name                 what asks for it
==================== =========================================================================
``web_search``       OpenAI ``web_search*`` tools, chat ``web_search_options``; Anthropic
                     ``web_search_*`` tools, ``anthropic-beta: web-search-*``
``web_fetch``        Anthropic ``web_fetch_*`` tools, ``anthropic-beta: web-fetch-*``
``mcp``              OpenAI ``mcp`` tools; Anthropic ``mcp_servers``, ``mcp_toolset`` tools,
                     ``anthropic-beta: mcp-client-*``
``code_execution``   OpenAI ``code_interpreter``; Anthropic ``code_execution_*`` tools,
                     ``container``, ``anthropic-beta: code-execution-*`` / ``skills-*``
``computer_use``     OpenAI ``computer_use_preview``; Anthropic ``computer_*`` tools,
                     ``anthropic-beta: computer-use-*``
``file_search``      OpenAI ``file_search``, any ``file_id`` / ``vector_store_ids`` (the
                     provider's stores); ``anthropic-beta: files-api-*``
``image_generation`` OpenAI ``image_generation``
``remote_content``   an image, file or document given by an ``http(s)://`` URL, which the
                     provider fetches (``data:`` URLs and inline base64 pass)
``background``       a Responses API request with ``background: true`` (run by the provider
                     after the call returns, so never metered here)
(its type)           any other tool type the gateway does not know
==================== =========================================================================
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["KNOWN_TOOLS", "ToolUse", "provider_tools"]

KNOWN_TOOLS: Final = {
    "web_search": "the provider searches the web",
    "web_fetch": "the provider fetches web pages",
    "mcp": "the provider calls remote MCP servers",
    "code_execution": "the provider runs code in its own container",
    "computer_use": "the model drives a computer",
    "file_search": "the provider reads files or vector stores kept on its side",
    "image_generation": "the provider generates images",
    "remote_content": "the provider fetches content from a URL in the request",
    "background": "the provider runs the response after the call returns, unmetered",
}
"""The provider-side features the gateway names, and why each is refused by default."""

_CLIENT_TOOL_TYPES: Final = frozenset({"function", "custom", "local_shell", "shell", "apply_patch"})
"""OpenAI tool types whose calls the client (the agent, in its sandbox) carries out."""
_ANTHROPIC_CLIENT_PREFIXES: Final = ("bash_", "text_editor_", "memory_")
"""Anthropic tool types the client carries out (schema-less client tools)."""

_OPENAI_TOOL_PREFIXES: Final = (
    ("web_search", "web_search"),
    ("file_search", "file_search"),
    ("code_interpreter", "code_execution"),
    ("computer", "computer_use"),
    ("mcp", "mcp"),
    ("image_generation", "image_generation"),
)
_ANTHROPIC_TOOL_PREFIXES: Final = (
    ("web_search_", "web_search"),
    ("web_fetch_", "web_fetch"),
    ("code_execution_", "code_execution"),
    ("computer_", "computer_use"),
    ("mcp_toolset", "mcp"),
)
_BETA_PREFIXES: Final = (
    ("mcp-client", "mcp"),
    ("web-fetch", "web_fetch"),
    ("web-search", "web_search"),
    ("code-execution", "code_execution"),
    ("skills", "code_execution"),
    ("computer-use", "computer_use"),
    ("files-api", "file_search"),
)
_URL_KEYS: Final = frozenset({"url", "image_url", "file_url"})
_STORE_KEYS: Final = frozenset({"file_id", "vector_store_ids"})
_SKIPPED_KEYS: Final = frozenset({"input_schema", "parameters", "arguments", "metadata"})
"""Keys whose values are the agent's own data (tool schemas, a tool call's arguments),
never content the provider acts on: not looked into."""
_TOOL_CALL_TYPES: Final = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


@dataclass(frozen=True)
class ToolUse:
    """One provider-side feature a request asks for: its name and where it was found."""

    name: str
    where: str

    def message(self) -> str:
        """The 400's message (what the agent's SDK shows)."""
        why = KNOWN_TOOLS.get(self.name, "a provider-side tool the gateway does not know")
        return (
            f"{self.where} asks for the provider-side tool {self.name!r} ({why}, outside the "
            "sandbox): refused in this run; the operator can allow it with "
            f"--model-allow-tool {self.name}"
        )


def _openai_tool(tool: object) -> str | None:
    if not isinstance(tool, dict):
        return None
    kind = tool.get("type")
    # Every provider-side tool is named by a string type; anything else is a client
    # tool, or a request the upstream refuses.
    if not isinstance(kind, str) or kind in _CLIENT_TOOL_TYPES:
        return None
    if kind == "namespace":  # a group of tools (Codex's): what its members are
        members = tool.get("tools")
        if not isinstance(members, list):
            return None
        return next((n for n in map(_openai_tool, members) if n is not None), None)
    for prefix, name in _OPENAI_TOOL_PREFIXES:
        if kind.startswith(prefix):
            return name
    return kind


def _anthropic_tool(tool: object) -> str | None:
    if not isinstance(tool, dict):
        return None
    kind = tool.get("type")
    # No type (or "custom"): a client tool with name, description and input_schema.
    if not isinstance(kind, str) or kind == "custom":
        return None
    if kind.startswith(_ANTHROPIC_CLIENT_PREFIXES):
        return None
    for prefix, name in _ANTHROPIC_TOOL_PREFIXES:
        if kind.startswith(prefix):
            return name
    return kind


def _content(value: object, path: str) -> Iterator[ToolUse]:
    """URLs the provider would fetch and references to its stores, anywhere in ``value``
    but in the agent's own data (:data:`_SKIPPED_KEYS`, a tool call's input)."""
    stack: list[tuple[object, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
            continue
        if not isinstance(item, dict):
            continue
        call = item.get("type") in _TOOL_CALL_TYPES
        for key, sub in item.items():
            if key in _SKIPPED_KEYS or (call and key == "input"):
                continue
            here = f"{where}.{key}"
            if key in _URL_KEYS and isinstance(sub, str) and _remote(sub):
                yield ToolUse("remote_content", here)
            elif key in _STORE_KEYS and sub:
                yield ToolUse("file_search", here)
            elif isinstance(sub, dict | list):
                stack.append((sub, here))


def _remote(url: str) -> bool:
    return url.strip()[:8].lower().startswith(("http://", "https://"))


def _uses(endpoint: str, body: Mapping[str, Any], headers: Mapping[str, str]) -> Iterator[ToolUse]:
    anthropic = endpoint.startswith("/v1/messages")
    tools = body.get("tools")
    if isinstance(tools, list):
        for i, tool in enumerate(tools):
            name = _anthropic_tool(tool) if anthropic else _openai_tool(tool)
            if name is not None:
                yield ToolUse(name, f"tools[{i}]")
    if anthropic:
        if body.get("mcp_servers"):
            yield ToolUse("mcp", "mcp_servers")
        if body.get("container") is not None:
            yield ToolUse("code_execution", "container")
    else:
        if body.get("web_search_options") is not None:
            yield ToolUse("web_search", "web_search_options")
        if body.get("background") is True:
            yield ToolUse("background", "background")
    # On every path: a provider may read Anthropic's betas on its OpenAI-compatible one.
    for beta in headers.get("anthropic-beta", "").split(","):
        value = beta.strip().lower()
        for prefix, name in _BETA_PREFIXES:
            if value.startswith(prefix):
                yield ToolUse(name, f"the anthropic-beta header's {value!r}")
    for key in ("messages", "input", "system", "prompt", "conversation"):
        if key in body:
            yield from _content(body[key], key)


def provider_tools(
    endpoint: str,
    body: Mapping[str, Any],
    headers: Mapping[str, str],
    allowed: Collection[str] = (),
) -> ToolUse | None:
    """The first provider-side feature ``body`` (a request to ``endpoint``, with the
    agent's ``headers``) asks for that ``allowed`` does not name; None: it asks for none."""
    for use in _uses(endpoint, body, headers):
        if use.name not in allowed:
            return use
    return None
