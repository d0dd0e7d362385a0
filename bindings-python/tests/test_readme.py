"""The README example runs as written, and type-checks against the shipped stubs."""

import pathlib
import re
import subprocess
import sys

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def readme_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 1, "README.md should hold exactly one python example"
    return blocks[0]


def test_readme_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(readme_example(), str(README), "exec"), {"__name__": "__readme__"})
    out = capsys.readouterr().out
    assert "Deployed v2 to staging" in out
    assert "INVALID_INPUT key" in out
    assert "awaiting_action page" in out
    assert "completed" in out
    assert "healthy" in out
    assert (tmp_path / "backup.jsonl").is_file()
    assert (tmp_path / "agent.mem").is_dir()


def test_readme_example_typechecks(tmp_path):
    pytest.importorskip("mypy")
    src = tmp_path / "readme_example.py"
    src.write_text(readme_example(), encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", str(tmp_path / ".mypy"), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
