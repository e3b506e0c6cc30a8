"""Agent files for tests: written where discovery finds them, in an environment of the
test's own (its home, its config dir, its state dir, where the files' checks are kept)."""

from __future__ import annotations

from pathlib import Path


def agent_md(
    name: str, description: str = "does things", body: str = "Prompt.", **keys: str
) -> str:
    lines = ["---", f"name: {name}", f"description: {description}"]
    lines += [f"{key}: {value}" for key, value in keys.items()]
    return "\n".join([*lines, "---", body, ""])


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def agent_env(tmp_path: Path, state: str) -> dict[str, str]:
    """HOME, the config dir and the state dir (``state``) for a discovery's ``env``."""
    home = tmp_path / "home"
    home.mkdir()
    return {
        "HOME": str(home),
        "SUBAGENTS_CONFIG_DIR": str(tmp_path / "conf"),
        "SUBAGENTS_HOME": state,
    }
