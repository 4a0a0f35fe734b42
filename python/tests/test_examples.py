"""The examples under examples/python/ run as written (offline) and say what README says."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import REPO

EXAMPLES = {
    "attest_tools.py": ["refund_charge: refused: refused by policy: agents do not move money", "create_note: held"],
    "attest_langchain.py": ["get_weather: [success] sunny in Oslo", "delete_repository: [error]"],
    "attest_openai_agents.py": ["c1: order 42: shipped", "c2: paused for approval (1 waiting)"],
    "attest_claude_agent_sdk.py": ["git status: allow", "git push --force origin main: deny"],
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_runs(name, tmp_path):
    env = {**os.environ, "ATTEST_LEDGER": str(tmp_path / "ledger.sqlite")}
    out = subprocess.run(
        [sys.executable, str(REPO / "examples" / "python" / name)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    for expected in EXAMPLES[name]:
        assert expected in out.stdout, out.stdout


def readme_python_block() -> str:
    """The ```python block of README.md's "### Python" section (README's `ran-by` names this file)."""
    text = (REPO / "README.md").read_text()
    section = text[text.index("### Python\n"):]
    section = section[: section.index("\n### ", 1)]
    start = section.index("```python\n") + len("```python\n")
    return section[start: section.index("\n```", start)]


def test_readme_python_quick_start_runs_as_written_in_a_directory_of_its_own(tmp_path):
    (tmp_path / "quickstart.py").write_text(readme_python_block())
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTEST_")}
    out = subprocess.run(
        [sys.executable, "quickstart.py"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "{'id': 'n1', 'title': 'plan'}" in out.stdout, out.stdout
    assert "waiting: " in out.stdout, out.stdout
    assert (tmp_path / ".attest" / "ledger.sqlite").exists()
