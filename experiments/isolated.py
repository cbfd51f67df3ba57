"""Run a measurement in a fresh Python process, so its peak memory and warm-up are its own."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = "RESULT"


def measure_in_subprocess(module, function, *args):
    """``experiments.<module>.<function>(*args)`` in a new interpreter; its JSON-able return value, or a
    RuntimeError carrying the child's stderr."""
    code = (
        f"import json, sys; sys.path.insert(0, {str(ROOT)!r}); from experiments.{module} import {function}; "
        f"print({MARKER!r} + json.dumps({function}(*{args!r})))"
    )
    completed = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True)
    if completed.returncode != 0:
        raise RuntimeError(f"{module}.{function}{args} failed:\n{completed.stderr[-3000:]}")
    line = next(line for line in completed.stdout.splitlines() if line.startswith(MARKER))
    return json.loads(line[len(MARKER) :])
