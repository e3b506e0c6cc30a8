"""Issue 39, item 1: an output schema is a document, never a fetcher. References resolve
inside the schema only (one outside it is refused up front, naming it), references that
cycle without going into the value are refused up front, the schema file is opened only
if it is a regular file and read at most 256 KiB + 1 bytes, and a check that cannot
complete fails the run with the child's answer and usage kept. A loopback listener stands
in for the network and must hear nothing."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import pistream as pi
from support.cli import invoke
from support.fake import Fake

from subagents.errors import UsageError
from subagents.structured import MAX_SCHEMA_BYTES, load_schema

pytestmark = pytest.mark.process


class Listener:
    """A TCP listener on 127.0.0.1 that records every connection it is offered."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/x.json"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    try:
        yield server
    finally:
        server.close()


def refused(given: str | dict[str, Any], cwd: Path | None = None) -> str:
    with pytest.raises(UsageError) as caught:
        load_schema(given, cwd)
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    "ref",
    [
        "http://127.0.0.1:{port}/x.json",
        "https://example.invalid/schema.json#/defs/v",
        "file:///etc/passwd",
        "other.json",
        "#/$defs/missing",
    ],
)
def test_a_reference_outside_the_schema_is_refused_up_front_naming_it(
    listener: Listener, ref: str
) -> None:
    ref = ref.format(port=listener.port)
    message = refused({"type": "object", "properties": {"v": {"$ref": ref}}})
    assert repr(ref) in message and "outside" in message
    assert listener.connections == 0


def test_references_inside_the_schema_are_used() -> None:
    schema = {
        "$id": "https://example.invalid/root.json",
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/name"},
            "b": {"$ref": "https://example.invalid/root.json#/$defs/name"},
            "c": {"$ref": "item.json"},
            "tree": {"$ref": "#/$defs/tree"},
        },
        "$defs": {
            "name": {"type": "string"},
            "item": {"$id": "item.json", "type": "integer"},
            # Recursive through the value (each level goes one list deeper): fine.
            "tree": {"type": "array", "items": {"$ref": "#/$defs/tree"}},
        },
    }
    from subagents.structured import problem

    assert load_schema(schema) == schema
    assert problem(schema, {"a": "x", "b": "y", "c": 3, "tree": [[[]]]}) is None
    assert problem(schema, {"c": "three"}) is not None


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#"},
        {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
        {
            "$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}},
            "properties": {"x": {"$ref": "#/$defs/a"}},
        },
        {"anyOf": [{"type": "string"}, {"not": {"$ref": "#"}}]},
    ],
)
def test_a_reference_cycle_that_never_goes_into_the_value_is_refused_up_front(
    schema: dict[str, Any],
) -> None:
    assert "refers to itself" in refused(schema)


def test_a_schema_path_that_is_not_a_regular_file_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "schema.fifo"
    os.mkfifo(fifo)
    # In a process of its own with a bound: a FIFO with no writer would block an open
    # without O_NONBLOCK, and /dev/zero never ends.
    code = (
        "import sys\n"
        "from subagents.structured import load_schema\n"
        "from subagents.errors import UsageError\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n"
        "        load_schema(path)\n"
        "    except UsageError as exc:\n"
        "        print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(fifo), "/dev/zero", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = done.stdout.splitlines()
    assert lines == [
        f"output schema {fifo}: not a regular file",
        "output schema /dev/zero: not a regular file",
        f"output schema {tmp_path}: not a regular file",
    ], done.stderr


def test_a_large_schema_file_is_read_only_one_byte_past_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (64 * 1024 * 1024))  # 64 MiB of whitespace
    reads: list[int] = []
    real_fdopen = os.fdopen

    def counting_fdopen(fd: int, *args: Any, **kw: Any) -> Any:
        f = real_fdopen(fd, *args, **kw)
        read = f.read

        def bounded(n: int = -1) -> bytes:
            reads.append(n)
            return read(n)

        f.read = bounded  # type: ignore[method-assign]
        return f

    monkeypatch.setattr(os, "fdopen", counting_fdopen)
    assert "over the limit of 256 KiB" in refused(str(big))
    assert reads == [MAX_SCHEMA_BYTES + 1]


def test_the_command_refuses_a_remote_reference_in_one_line_and_connects_nowhere(
    listener: Listener, tmp_path: Path
) -> None:
    schema = '{"type":"object","properties":{"v":{"$ref":"' + listener.url + '"}}}'
    done = invoke(["run", "--backend", "pi", "--output-schema", schema, "hi"], cwd=tmp_path)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert listener.url in done.stderr
    assert listener.connections == 0
    assert not (tmp_path / "state" / "runs").exists()


def test_the_supervisor_never_fetches_a_reference_it_was_handed(
    fake: Fake, listener: Listener
) -> None:
    """A schema that reached a run without the up-front check (an internal caller) is still
    never fetched: the check cannot complete, the run fails, its answer and usage kept."""
    schema = {"type": "object", "properties": {"v": {"$ref": listener.url}}}
    result = fake.run([*pi.start(), pi.text_end('{"v": 1}'), *pi.end()], output_schema=schema)
    assert result["status"] == "failed"
    assert "could not complete" in result["errorMessage"]
    assert result["finalText"] == '{"v": 1}'
    assert result["usage"]["totalTokens"] > 0
    assert listener.connections == 0


def test_an_answer_nested_too_deeply_to_check_fails_the_run_and_keeps_the_answer(
    fake: Fake,
) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    schema = {"type": "array"}
    result = fake.run([*pi.start(), pi.text_end(deep), *pi.end()], output_schema=schema)
    assert result["status"] == "failed"
    assert "nested too deeply" in result["errorMessage"]
    assert result["finalText"] == deep
    assert result["usage"]["totalTokens"] > 0
    assert result["structured"] is None


def test_a_schema_nested_too_deeply_is_refused_in_one_line() -> None:
    deep = '{"items":' * 5000 + "{}" + "}" * 5000
    assert "nested too deeply" in refused(deep)
