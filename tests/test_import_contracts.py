"""The import contracts in ``.importlinter`` hold: no cycle named in
docs/architecture.md#layering-rules is back.

``make lint`` runs ``lint-imports`` too; this test makes a plain ``pytest`` run catch a
broken contract as well.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _lint_imports() -> str | None:
    beside = Path(sys.executable).with_name("lint-imports")
    if beside.exists():
        return str(beside)
    return shutil.which("lint-imports")


def test_import_contracts_are_kept() -> None:
    exe = _lint_imports()
    if exe is None:
        pytest.skip("lint-imports is not installed: pip install -c constraints/dev.txt -e '.[dev]'")
    proc = subprocess.run(
        [exe, "--config", str(ROOT / ".importlinter"), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout
