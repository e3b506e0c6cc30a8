"""What every benchmark does before it measures: run the code as an installed package does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def like_installed() -> None:
    """Compiled bytecode, read from ``__pycache__``: this environment may set
    PYTHONDONTWRITEBYTECODE, and then every start would compile the package anew."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "src")], check=True)
