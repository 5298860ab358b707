"""The README's example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_example_runs() -> None:
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert code is not None
    out = subprocess.run([sys.executable, "-c", code.group(1)], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert float(lines[0]) == float(lines[0])  # a number
    assert lines[1] == "(ε=0.5)"
    assert "scale 2" in lines[2] and "5.991" in lines[2]
