"""Strict YAML: the safe loader plus limits on size, nesting, aliases and expanded size.

A "billion laughs" document is a few hundred bytes; every limit here is enforced
while composing or before constructing, and any breach becomes a
:class:`~ale_robotics.submission.rejected.SubmissionRejected` naming the rule.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ale_robotics.submission.rejected import SubmissionRejected, first_line, quote_key

__all__ = [
    "YAML_MAX_ALIASES",
    "YAML_MAX_DEPTH",
    "YAML_MAX_NODES",
    "Position",
    "YamlPath",
    "load_yaml_positions",
    "load_yaml_strict",
]

YAML_MAX_DEPTH = 32
"""Deepest nesting of collections a YAML submission may have."""
YAML_MAX_ALIASES = 64
"""Most ``*alias`` references in one YAML document."""
YAML_MAX_NODES = 100_000
"""Most nodes after expanding every alias (a billion-laughs document has ~10^9)."""


Position = tuple[int, int]
"""(line, column), both from 1, as editors count them."""


def _position(mark: Any) -> Position | None:
    return None if mark is None else (mark.line + 1, mark.column + 1)


class _YamlLimit(Exception):
    def __init__(self, rule: str, detail: str, mark: Any = None) -> None:
        super().__init__(detail)
        self.rule = rule
        self.detail = detail
        self.at = _position(mark)


class _StrictLoader(yaml.SafeLoader):
    """The safe loader (no Python tags) that counts while it composes.

    Depth and alias counts are enforced during composition, before the document
    is built, so a deeply nested or alias-heavy input stops early instead of
    recursing past the interpreter's limit or expanding in memory.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0
        self.aliases = 0
        self.nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > YAML_MAX_ALIASES:
                raise _YamlLimit(
                    "yaml aliases", f"uses more than {YAML_MAX_ALIASES} aliases (*name)", mark
                )
            return super().compose_node(parent, index)
        self.nodes += 1
        if self.nodes > YAML_MAX_NODES:
            raise _YamlLimit("yaml size", f"has more than {YAML_MAX_NODES} nodes", mark)
        self.depth += 1
        try:
            if self.depth > YAML_MAX_DEPTH:
                raise _YamlLimit("yaml depth", f"nests deeper than {YAML_MAX_DEPTH} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: set[tuple[str, str]] = set()
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    ident = (key_node.tag, key_node.value)
                    if ident in seen:
                        raise _YamlLimit(
                            "yaml duplicate keys",
                            f"mapping key {quote_key(key_node.value)} appears twice",
                            key_node.start_mark,
                        )
                    seen.add(ident)
        return super().construct_mapping(node, deep=deep)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _expanded_size(root: yaml.Node) -> int:
    """Nodes the document would have with every alias expanded; rejects cycles.

    Iterative and memoized over the node graph (aliases share node objects), so
    it costs one visit per node however large the expansion.
    """
    size: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        ident = id(node)
        if children_done:
            active.discard(ident)
            total = 1 + sum(size[id(c)] for c in _children(node))
            size[ident] = min(total, YAML_MAX_NODES + 1)
            continue
        if ident in size:
            continue
        if ident in active:
            raise _YamlLimit("yaml aliases", "an alias refers to a node that contains it")
        active.add(ident)
        stack.append((node, True))
        for child in _children(node):
            cid = id(child)
            if cid in active:
                raise _YamlLimit("yaml aliases", "an alias refers to a node that contains it")
            if cid not in size:
                stack.append((child, False))
    return size[id(root)]


def load_yaml_strict(path: Path, shown: str, max_bytes: int) -> object:
    """Parse one YAML document safely, or raise :class:`SubmissionRejected`.

    Rules (each names itself in the message): at most ``max_bytes`` bytes
    (``size limit``), UTF-8 (``utf-8``), well-formed YAML with only the safe
    tags, one document (``yaml format``), at most :data:`YAML_MAX_DEPTH` levels
    (``yaml depth``), :data:`YAML_MAX_ALIASES` aliases and no self-referencing
    alias (``yaml aliases``), :data:`YAML_MAX_NODES` nodes once aliases are
    expanded (``yaml expansion``), no repeated mapping key (``yaml duplicate
    keys``). Returns plain Python data for a strict schema to check next. A rejection
    says where in the file when the parser knows (``line``, ``column``).
    """
    return _load(path, shown, max_bytes)[0]


YamlPath = tuple[str | int, ...]
"""A value's place in a document: mapping keys and sequence indexes from the root, as a
schema's errors name it (pydantic's ``loc``)."""


def load_yaml_positions(
    path: Path, shown: str, max_bytes: int
) -> tuple[object, dict[YamlPath, tuple[Position, Position]]]:
    """:func:`load_yaml_strict`, and where each value is: path -> (where its key is,
    where the value starts); a sequence item's two are the same, the root's path is
    ``()``. For messages about the data that point into the file (an eval set's SPEC)."""
    data, node = _load(path, shown, max_bytes)
    return data, ({} if node is None else _positions(node))


def _positions(root: yaml.Node) -> dict[YamlPath, tuple[Position, Position]]:
    """Every path of the document (aliases followed once: the graph has no cycle, which
    :func:`_expanded_size` checked, and its expansion is bounded)."""
    start = (root.start_mark.line + 1, root.start_mark.column + 1)
    out: dict[YamlPath, tuple[Position, Position]] = {(): (start, start)}
    stack: list[tuple[YamlPath, yaml.Node]] = [((), root)]
    while stack:
        where, node = stack.pop()
        items: list[tuple[str | int, yaml.Node, yaml.Node]] = []
        if isinstance(node, yaml.MappingNode):
            items = [(str(k.value), k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)]
        elif isinstance(node, yaml.SequenceNode):
            items = [(i, v, v) for i, v in enumerate(node.value)]
        for name, key, value in items:
            at = (*where, name)
            k, v = key.start_mark, value.start_mark
            out[at] = ((k.line + 1, k.column + 1), (v.line + 1, v.column + 1))
            stack.append((at, value))
    return out


def _marked(exc: yaml.YAMLError) -> tuple[str, Position | None]:
    """A PyYAML error as one sentence and where it is: the problem at its mark, and what
    the parser was reading with where that began (PyYAML prints them on four lines)."""
    if not isinstance(exc, yaml.MarkedYAMLError) or exc.problem is None:
        return first_line(exc), None
    text = exc.problem
    if exc.context:
        begun = _position(exc.context_mark)
        text += f" ({exc.context}" + (
            f" started at line {begun[0]}, column {begun[1]})" if begun else ")"
        )
    return text, _position(exc.problem_mark)


def _load(path: Path, shown: str, max_bytes: int) -> tuple[object, yaml.Node | None]:
    """The document and its root node (None for an empty document); see
    :func:`load_yaml_strict`."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise SubmissionRejected(shown, "readable", f"cannot read: {exc.strerror}") from None
    if len(data) > max_bytes:
        raise SubmissionRejected(shown, "size limit", f"is over {max_bytes} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SubmissionRejected(
            shown, "utf-8", f"is not UTF-8 text (bad byte at offset {exc.start})"
        ) from None
    loader: _StrictLoader | None = None
    try:
        loader = _StrictLoader(text)  # the reader already refuses control characters
        node = loader.get_single_node()
        if node is None:
            return None, None
        expanded = _expanded_size(node)
        if expanded > YAML_MAX_NODES:
            raise _YamlLimit(
                "yaml expansion",
                f"expands to more than {YAML_MAX_NODES} nodes through its aliases",
            )
        return loader.construct_document(node), node
    except _YamlLimit as exc:
        line, column = exc.at if exc.at is not None else (None, None)
        raise SubmissionRejected(shown, exc.rule, exc.detail, line=line, column=column) from None
    except yaml.YAMLError as exc:
        detail, at = _marked(exc)
        line, column = at if at is not None else (None, None)
        raise SubmissionRejected(shown, "yaml format", detail, line=line, column=column) from None
    except RecursionError:
        raise SubmissionRejected(
            shown, "yaml depth", f"nests deeper than {YAML_MAX_DEPTH} levels"
        ) from None
    finally:
        if loader is not None:
            loader.dispose()
