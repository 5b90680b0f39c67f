"""The sizes a newcomer can read (issue 28): no module over 500 lines, no function body over
80, in ``src/``, except where a comment says why.

A long module or function is allowed only with a ``# size: <why>`` comment: for a module
among its first 30 lines, for a function on the line above its ``def`` (decorators
included). The generated protobuf modules (``ale_robotics/v1``) are not ours to size.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "ale_robotics"
MAX_MODULE_LINES = 500
MAX_FUNCTION_BODY_LINES = 80
MARK = "# size:"


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "v1" not in p.relative_to(SRC).parts[:1])


def _body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the end of the function."""
    body = node.body
    first = body[0]
    docstring = (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    )
    if docstring and len(body) > 1:
        first = body[1]
    assert node.end_lineno is not None
    return node.end_lineno - first.lineno + 1


def _excused(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    top = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return top >= 2 and lines[top - 2].strip().startswith(MARK)


def test_the_measure_is_what_the_rule_says() -> None:
    """The body count skips the docstring and counts every line after it."""
    tree = ast.parse('def f():\n    """Doc.\n\n    More."""\n    a = 1\n\n    return a\n')
    node = tree.body[0]
    assert isinstance(node, ast.FunctionDef) and _body_lines(node) == 3


def test_no_module_over_500_lines_without_a_reason() -> None:
    long = []
    for path in _modules():
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) > MAX_MODULE_LINES and not any(line.startswith(MARK) for line in lines[:30]):
            long.append(f"{path.relative_to(SRC)}: {len(lines)} lines")
    assert not long, f"split these modules by job, or say why at the top (# size: ...): {long}"


def test_no_function_body_over_80_lines_without_a_reason() -> None:
    long = []
    for path in _modules():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            n = _body_lines(node)
            if n > MAX_FUNCTION_BODY_LINES and not _excused(lines, node):
                long.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name}: {n} lines")
    assert not long, f"split these into their steps, or say why above the def: {long}"
