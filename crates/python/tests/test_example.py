"""examples/python/compare_methods.py runs and prints every strategy's passages side by side."""

from __future__ import annotations

import pathlib
import subprocess
import sys

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "python" / "compare_methods.py"


def test_compare_methods_prints_the_strategies_side_by_side(tmp_path: pathlib.Path) -> None:
    run = [sys.executable, str(EXAMPLE), "--index", str(tmp_path / "cmp.kgrag"), "--top-k", "3"]
    out = subprocess.run(run + ["--rebuild"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    header = next(line for line in lines if line.startswith("rank"))
    for strategy in ["dense", "hipporag2", "hirag", "leanrag"]:
        assert strategy in header
    assert sum(1 for line in lines if line.startswith("Q: ")) == 2
    assert any(line.strip().startswith("1 ") and ".md" in line for line in lines)
    # The second run opens the index it built instead of building it again.
    again = subprocess.run(run + ["--strategies", "dense", "Who sang Elsa first?"], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert "indexed" not in again.stdout and "dahl.md" in again.stdout
