"""Issue 39, item 8: ``scripts/setup`` waits for another apt's lock instead of failing
(``scripts/apt-get-waiting``), with a bound. A fake apt-get stands in for the real one."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "apt-get-waiting"
LOCKED = "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 42 (apt-get)"

pytestmark = pytest.mark.process


def fake_apt(tmp_path: Path, outcomes: list[tuple[int, str]]) -> Path:
    """An apt-get that logs its arguments and plays ``outcomes`` (exit code, stderr) in turn."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    plays = tmp_path / "plays"
    plays.mkdir()
    for i, (code, err) in enumerate(outcomes):
        (plays / str(i)).write_text(f"{code}\n{err}")
    (bin_dir / "apt-get").write_text(
        "#!/usr/bin/env bash\n"
        f'echo "$*" >> {tmp_path}/calls\n'
        f"n=$(wc -l < {tmp_path}/calls); play={plays}/$((n - 1))\n"
        "[[ -f $play ]] || play=/dev/null\n"
        'code=$(head -n1 "$play"); tail -n +2 "$play" >&2; exit "${code:-0}"\n'
    )
    (bin_dir / "apt-get").chmod(0o755)
    return bin_dir


def run(tmp_path: Path, bin_dir: Path, wait: int = 60) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "APT_LOCK_WAIT": str(wait),
        "APT_LOCK_PAUSE": "0.1",
    }
    return subprocess.run(
        [str(SCRIPT), "install", "-y", "tmux"], env=env, capture_output=True, text=True, timeout=60
    )


def calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls").read_text().splitlines()


def test_a_held_lock_is_waited_for(tmp_path: Path) -> None:
    bin_dir = fake_apt(tmp_path, [(100, LOCKED), (100, LOCKED), (0, "")])
    done = run(tmp_path, bin_dir)
    assert done.returncode == 0, done.stderr
    assert calls(tmp_path) == ["-o DPkg::Lock::Timeout=60 install -y tmux"] * 3
    assert done.stderr.count("another apt holds its lock") == 2


def test_another_failure_is_not_retried(tmp_path: Path) -> None:
    bin_dir = fake_apt(tmp_path, [(100, "E: Unable to locate package tmux"), (0, "")])
    done = run(tmp_path, bin_dir)
    assert done.returncode == 100 and "Unable to locate package" in done.stderr
    assert len(calls(tmp_path)) == 1


def test_the_wait_is_bounded(tmp_path: Path) -> None:
    # How many tries fit in the second depends on the machine's load (one slow try may take it
    # all); that tries go on until the bound and stop there does not.
    bin_dir = fake_apt(tmp_path, [(100, LOCKED)] * 1000)
    began = time.monotonic()
    done = run(tmp_path, bin_dir, wait=1)
    assert time.monotonic() - began >= 1.0
    assert done.returncode == 100 and "Could not get lock" in done.stderr
    assert 1 <= len(calls(tmp_path)) < 1000
