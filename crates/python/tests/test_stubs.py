"""The type stubs describe the native module as it is (mypy's stubtest), and a typed use checks."""

from __future__ import annotations

import pathlib
import subprocess
import sys


def test_stubs_match_the_native_module() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "kgrag._native", "--ignore-missing-stub"],
        capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_typed_program_checks(tmp_path: pathlib.Path) -> None:
    program = tmp_path / "use.py"
    program.write_text(
        "import kgrag\n"
        "from kgrag.langchain import KgragRetriever\n"
        "ix = kgrag.Index.open('x')\n"
        "hits: list[kgrag.Hit] = ix.search('q', 'hipporag2', 3)\n"
        "score: float = hits[0].score\n"
        "doc: str | None = hits[0].document_id\n"
        "r = KgragRetriever(index=ix, top_k=3)\n"
        "report: dict[str, object] = kgrag.bench('kgrag-fixture', methods='dense')\n"
        "try:\n"
        "    ix.delete('x')\n"
        "except kgrag.UnknownStrategyError as e:\n"
        "    message: str = str(e)\n"
        "bad: int = ix.search('q')\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--python-version", "3.11", str(program)],
        capture_output=True, text=True,
    )
    # The last line is wrong on purpose: mypy must see the types through the stubs to say so.
    assert "use.py:13: error" in out.stdout, out.stdout + out.stderr
    assert out.stdout.count("error") == 1 or "Found 1 error" in out.stdout, out.stdout
