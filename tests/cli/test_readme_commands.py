"""The README and the manual in ``docs/`` say only what is true of the code.

- Every ``ale-robotics`` command line they show (code blocks and inline code) names a real
  (sub)command, and every ``--flag`` it uses is one that command takes; a flag named on its
  own (```--workers N```) is an option of some command, or of the program the page names
  for it (:data:`OTHER_PROGRAMS_FLAGS`). The commands are read from the Typer app itself
  (``ale_robotics.cli.main.app``), so a renamed or removed option fails here.
- Every relative link resolves to a file of the repository, and every ``#anchor`` to a
  heading of the page it points at (GitHub's heading ids); so do the
  ``docs/<page>.md#<anchor>`` citations in ``src/`` and ``tests/``, and nothing there cites
  the ``ARCHITECTURE.md`` that is not in the repository.
- Every task id in inline code is a registered task.
- ``examples/eval-set.yaml`` and the tour's ``examples/eval-set-tour.yaml`` are valid
  eval-set SPECs on current task versions, and their agents' scripts exist.
"""

from __future__ import annotations

import re
import shlex
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import typer

from ale_robotics.cli.main import app
from ale_robotics.evalset.spec import load_spec
from ale_robotics.tasks import Registry

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md")), ROOT / "examples" / "agents" / "README.md"]
EVAL_SET_EXAMPLES = [ROOT / "examples" / "eval-set.yaml", ROOT / "examples" / "eval-set-tour.yaml"]

#: Flags the pages name on their own that belong to another program (an example agent, a
#: benchmark, docker): each must occur in some file of ``CODE_DIRS``.
OTHER_PROGRAMS_FLAGS = {
    "--network",  # docker run --network none (the container sandbox)
    "--slice",  # benchmarks/interactive.py
    "--server-work-us",  # benchmarks/grpc_floor.py
    "--margin",  # benchmarks/td3_budget.py
    "--checkpoint-every",  # examples/agents/td3_train.py, and the options below
    "--learning-starts",
    "--noise-std",
    "--budget-s",
    "--margin-s",
    "--format",
    "--check-seed",
    "--seed",
    "--timesteps",
    "--chat",  # examples/agents/openai_agents_sdk.py
    "--dangerously-skip-permissions",  # Claude Code (examples/agents/claude_code.sh)
    "--dangerously-bypass-approvals-and-sandbox",  # Codex (examples/agents/codex_cli.sh)
    "--disable",
    "--disable-userns",  # bwrap (the agent sandbox)
    "--ipc",  # docker create --ipc private (the container sandbox)
}
CODE_DIRS = ("src", "examples", "benchmarks", "deploy")

_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", flags=re.S | re.M)
_SPAN = re.compile(r"`([^`\n]+(?:\n[^`\n]+)*)`")


def _text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def _prose(text: str) -> str:
    """The page without its fenced code blocks."""
    return _FENCE.sub("", text)


def _spans(text: str) -> list[str]:
    """The inline code spans of the prose, a span wrapped over lines joined with spaces."""
    return [" ".join(s.split()) for s in _SPAN.findall(_prose(text))]


# ---------------------------------------------------------------- the CLI --


def _flags(command: Any, ctx: Any) -> frozenset[str]:
    return frozenset(
        opt
        for param in command.get_params(ctx)
        for opt in (*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ()))
        if opt.startswith("--")
    )


@cache
def _cli() -> dict[tuple[str, ...], frozenset[str]]:
    """Every command path of ``ale-robotics`` (``()`` the root) and the flags it takes."""
    root = typer.main.get_command(app)
    tree: dict[tuple[str, ...], frozenset[str]] = {}

    def walk(command: Any, path: tuple[str, ...]) -> None:
        ctx = command.context_class(command, info_name=path[-1] if path else "ale-robotics")
        tree[path] = _flags(command, ctx)
        if hasattr(command, "list_commands"):
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), (*path, name))

    walk(root, ())
    return tree


def _all_flags() -> frozenset[str]:
    return frozenset().union(*_cli().values())


def test_the_cli_is_introspected() -> None:
    tree = _cli()
    assert ("run",) in tree and "--agent" in tree[("run",)]
    assert ("evaluator", "serve") in tree and ("runs", "compare") in tree


# --------------------------------------------------------------- commands --


def _command_lines(page: Path) -> list[str]:
    """``ale-robotics ...`` command lines of a page: code-block lines and inline code."""
    text = _text(page)
    lines: list[str] = []
    for block in _FENCE.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            for prefix in (".venv/bin/ale-robotics ", "ale-robotics "):
                if line.startswith(prefix):
                    lines.append("ale-robotics " + line[len(prefix) :])
    for span in _spans(text):
        m = re.match(r"(?:\.venv/bin/)?(ale-robotics(?: .*)?)$", span)
        if m:
            lines.append(m.group(1))
    return list(dict.fromkeys(lines))


def _words(line: str) -> list[str]:
    line = line.replace("[", " ").replace("]", " ").replace("|", " ")
    try:
        return shlex.split(line, comments=True)
    except ValueError:  # an unbalanced quote in a shortened example: plain words will do
        return line.split()


def _command_path(words: list[str]) -> tuple[str, ...]:
    """The longest prefix of ``words`` that is a command path."""
    tree = _cli()
    path: tuple[str, ...] = ()
    for word in words:
        if (*path, word) not in tree:
            break
        path = (*path, word)
    return path


COMMAND_LINES = [
    pytest.param(line, id=f"{page.relative_to(ROOT)}: {line[:60]}")
    for page in PAGES
    for line in _command_lines(page)
]


def test_the_pages_have_commands() -> None:
    assert len(_command_lines(README)) >= 8
    assert len(COMMAND_LINES) >= 40


@pytest.mark.parametrize("line", COMMAND_LINES)
def test_command_and_flags_exist(line: str) -> None:
    words = _words(line)[1:]
    path = _command_path(words)
    if words and not words[0].startswith("-"):
        assert path, f"{line!r}: 'ale-robotics {words[0]}' is no command"
    flags = _cli()[path]
    for flag in {w.split("=", 1)[0] for w in words if w.startswith("--")}:
        assert flag in flags, (
            f"{line!r} uses {flag}, which 'ale-robotics {' '.join(path)}' does not take "
            f"(it takes {', '.join(sorted(flags))})"
        )


def _lone_flags(page: Path) -> list[str]:
    """Flags named in inline code that starts with a flag (``--sandbox docker``)."""
    found: list[str] = []
    for span in _spans(_text(page)):
        if re.match(r"\[?--[a-z]", span):
            found += re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", span)
    return list(dict.fromkeys(found))


LONE_FLAGS = [
    pytest.param(page, flag, id=f"{page.relative_to(ROOT)}: {flag}")
    for page in PAGES
    for flag in _lone_flags(page)
]


def _inspect_flags() -> set[str]:
    """The options of Inspect AI's ``inspect eval`` and ``inspect eval-set`` (docs/inspect.md
    names them), read from Inspect's own command line."""
    from inspect_ai._cli.eval import eval_command, eval_set_command

    commands = (eval_command, eval_set_command)
    return {o for c in commands for p in c.params for o in p.opts if o.startswith("--")}


@pytest.mark.parametrize(("page", "flag"), LONE_FLAGS)
def test_flag_named_alone_exists(page: Path, flag: str) -> None:
    if flag in _all_flags():
        return
    if page.name == "inspect.md" and flag in _inspect_flags():
        return
    assert flag in OTHER_PROGRAMS_FLAGS, (
        f"{page.relative_to(ROOT)} names {flag}, which no ale-robotics command takes "
        "(another program's flag: add it to OTHER_PROGRAMS_FLAGS)"
    )
    assert any(
        flag in path.read_text(encoding="utf-8", errors="replace")
        for d in CODE_DIRS
        for path in (ROOT / d).rglob("*")
        if path.is_file() and path.suffix in {".py", ".sh", ".yaml", ".yml"}
    ), f"{flag} occurs in no file of {CODE_DIRS}: no program of ours takes it"


# ------------------------------------------------------------------ links --


def _slug(heading: str) -> str:
    """GitHub's id for a heading: its text lowercased, punctuation dropped, spaces as '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "").replace("*", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def _anchors(page: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    anchors: set[str] = set()
    for m in re.finditer(r"^#{1,6} (.+?)\s*$", _prose(_text(page)), flags=re.M):
        slug = _slug(m.group(1))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return frozenset(anchors)


def _links(page: Path) -> list[str]:
    prose = _SPAN.sub("code", _prose(_text(page)))
    return list(dict.fromkeys(re.findall(r"\]\(([^)\s]+)\)", prose)))


LINKS = [
    pytest.param(page, target, id=f"{page.relative_to(ROOT)}: {target}")
    for page in PAGES
    for target in _links(page)
    if not re.match(r"[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto:
]


def _check_target(source: Path, target: str) -> None:
    where, _, anchor = target.partition("#")
    dest = (source.parent / where).resolve() if where else source
    assert dest.exists(), f"{source.relative_to(ROOT)} links to {target}: no such file"
    assert dest.is_relative_to(ROOT), f"{source.relative_to(ROOT)} links outside the repository"
    if anchor:
        assert dest.suffix == ".md", f"{target}: an anchor into a file that is not Markdown"
        assert anchor in _anchors(dest), (
            f"{source.relative_to(ROOT)} links to {target}: {dest.relative_to(ROOT)} has no "
            f"heading with that id (it has {', '.join(sorted(_anchors(dest)))})"
        )


def test_the_pages_have_links() -> None:
    assert len(LINKS) >= 30
    assert {p.name for p in DOCS.glob("*.md")} <= {
        Path(t).name for p in (README, DOCS / "README.md") for t in _links(p)
    }, "docs/README.md and the README link every page of docs/"


@pytest.mark.parametrize(("page", "target"), LINKS)
def test_link_resolves(page: Path, target: str) -> None:
    _check_target(page, target)


def _code_files() -> list[Path]:
    return [
        p for d in ("src", "tests") for p in sorted((ROOT / d).rglob("*.py")) if "v1" not in p.parts
    ]


def test_code_cites_docs_sections_that_exist() -> None:
    cited = 0
    for path in _code_files():
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"docs/([a-z0-9-]+\.md)(#[a-z0-9-]+)?", text):
            cited += 1
            _check_target(README, f"docs/{m.group(1)}{m.group(2) or ''}")
    assert cited >= 10


def test_code_does_not_cite_a_missing_architecture_file() -> None:
    stale = [
        str(p.relative_to(ROOT))
        for p in _code_files()
        if p != Path(__file__).resolve() and "ARCHITECTURE" in p.read_text(encoding="utf-8")
    ]
    assert not stale, f"cite docs/architecture.md#<section> instead of ARCHITECTURE: {stale}"


# ------------------------------------------------------------ file paths --

#: Paths in inline code that name no file on purpose (an example of a mistyped one...).
NOT_FILES = {"examples/agents/x.py", "examples/agents/submit_chekpoint.py"}


def _repo_path(page: Path, span: str) -> Path | None:
    """The file or directory of the repository that a span names, or None when it names
    none of ours. The page's directory, the repository root and ``src/ale_robotics`` are
    tried in turn: the first where the path exists, else the first that has its top
    directory (a file missing from a directory of ours)."""
    if not re.fullmatch(r"[A-Za-z0-9_][\w.-]*(?:/[\w.-]+)+/?", span) or span in NOT_FILES:
        return None
    if not (span.endswith("/") or re.search(r"\.(py|ya?ml|json|proto|sh|txt|toml|md)$", span)):
        return None
    bases = (page.parent, ROOT, ROOT / "src" / "ale_robotics")
    for base in bases:
        if (base / span).exists():
            return base / span
    first = span.split("/", 1)[0]
    for base in bases:
        if (base / first).is_dir():
            return base / span
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_paths_named_exist(page: Path) -> None:
    missing = [
        span
        for span in dict.fromkeys(_spans(_text(page)))
        if (path := _repo_path(page, span)) is not None and not path.exists()
    ]
    assert not missing, f"{page.relative_to(ROOT)} names files that are not there: {missing}"


# ------------------------------------------------------------ task ids --


@cache
def _registry() -> Registry:
    return Registry.bundled()


def test_task_ids_named_are_registered() -> None:
    unknown = {
        (str(page.relative_to(ROOT)), span)
        for page in PAGES
        for span in _spans(_text(page))
        if re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*-v\d+", span) and span not in _registry()
    }
    assert not unknown, f"task ids that are not registered: {sorted(unknown)}"


# ------------------------------------------------------------ eval set --


@pytest.mark.parametrize("example", EVAL_SET_EXAMPLES, ids=lambda p: p.name)
def test_the_eval_set_examples_are_valid_specs(example: Path) -> None:
    spec = load_spec(example)
    for task in spec.tasks:
        assert task in _registry(), f"{task}: no such task"
        newer = _registry().superseded_by(task)
        assert newer is None, f"{task} is superseded by {newer}: use the current version"
    for agent in spec.agents:
        scripts = [w for w in shlex.split(agent.cmd) if w.endswith(".py")]
        assert scripts and all((ROOT / s).is_file() for s in scripts), agent.cmd
