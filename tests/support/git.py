"""Real git repositories for the tests."""

from __future__ import annotations

from pathlib import Path


def git(repo: Path, *args: str) -> str:
    """``git ARGS`` in ``repo``: its stdout; a failure raises."""
    import subprocess

    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True, timeout=60
    ).stdout


def git_repo(path: Path, files: dict[str, str]) -> Path:
    """A new git repository at ``path`` (branch main, a committer set) whose first commit
    holds ``files`` (relative path -> text)."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "me@example.com")
    git(path, "config", "user.name", "Me")
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "init")
    return path
