"""Answers a program can use: a JSON Schema (2020-12) a run's answer must satisfy.

The pieces every surface and backend share, so a schema means the same everywhere:
- :func:`load_schema` — ``--output-schema FILE|JSON`` (and plan steps, agent frontmatter, the
  API, MCP): read, size-capped, checked as a schema; bad input is one ``UsageError`` line;
- :func:`schema_hash` — the canonical hash ``result.json`` records beside the value;
- :func:`answer_value` — the JSON value in an answer: the whole answer, else its last fenced
  block (models wrap JSON in ```json fences however they are asked);
- :func:`problem` — the first reason a value does not satisfy the schema, as one line;
- :func:`instruction` / :func:`repair` — what a backend without a schema flag of its own is
  told in its task, and the one repair turn that quotes the validation error;
- :func:`strict` — the schema as OpenAI's strict mode takes it (codex ``--output-schema``):
  every object closed and every key required, optional keys made nullable; a schema strict
  mode cannot express is refused up front, naming the rule.

``jsonschema`` is imported by the functions that validate, never at module import: the
supervisor may import this module, and its start path stays lean.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from subagents.errors import UsageError

if TYPE_CHECKING:
    from referencing import Registry
    from referencing._core import Resolver

    from subagents.types import JsonObject, JsonValue, StructuredComparison

# The largest schema accepted (a schema is instructions, not data).
MAX_SCHEMA_BYTES = 256 * 1024
FIELD = "output_schema"

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\r?\n(.*?)```", re.S)


def load_schema(given: str | Mapping[str, object], cwd: Path | None = None) -> JsonObject:
    """A schema from ``--output-schema``: a path to a file, inline JSON text, or (API, MCP,
    plan files) a mapping already. Raises ``UsageError`` naming the problem. A mapping is
    taken through its JSON text too, so every source is checked (and copied) the same way."""
    if isinstance(given, Mapping):
        source = "the output schema"
        try:
            raw = json.dumps(dict(given), ensure_ascii=False).encode()
        except (TypeError, ValueError) as exc:
            raise UsageError(f"{source} is not JSON: {exc}", FIELD) from None
        except RecursionError:
            raise UsageError(f"{source} is nested too deeply", FIELD) from None
    else:
        text = given.strip()
        if not text:
            raise UsageError("the output schema is empty", FIELD)
        if text[0] in "{[":
            source, raw = "the output schema", text.encode()
        else:
            path = Path(text).expanduser()
            if not path.is_absolute() and cwd is not None:
                path = cwd / path
            raw = _read_schema_file(path)
            source = f"output schema {path}"
    size = len(raw)
    if size > MAX_SCHEMA_BYTES:
        # A file is read one byte past the limit, so its size here is "more than".
        raise UsageError(f"{source} is over the limit of 256 KiB", FIELD)
    try:
        schema: JsonValue = json.loads(raw)
    except UnicodeDecodeError:
        raise UsageError(f"{source} is not UTF-8 text", FIELD) from None
    except ValueError as exc:
        raise UsageError(f"{source} is not JSON: {exc}", FIELD) from None
    except RecursionError:
        raise UsageError(f"{source} is nested too deeply", FIELD) from None
    if not isinstance(schema, dict):
        raise UsageError("the output schema must be a JSON object (a JSON Schema)", FIELD)
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        raise UsageError(
            f"the output schema is not a valid JSON Schema (2020-12)"
            f"{f' at {where}' if where else ''}: {_one_line(exc.message)}",
            FIELD,
        ) from None
    except RecursionError:
        raise UsageError("the output schema is nested too deeply", FIELD) from None
    found = ref_problem(schema)
    if found is not None:
        raise UsageError(f"the output schema {found}", FIELD)
    return schema


def _read_schema_file(path: Path) -> bytes:
    """The file's bytes, at most one over the limit: it is opened only if it is a regular
    file (a FIFO would block the open or the read, ``/dev/zero`` never ends), and never
    read whole when it is too large."""

    def refuse(why: str) -> UsageError:
        return UsageError(f"output schema {path}: {why}", FIELD)

    try:
        # O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise refuse(f"cannot read it: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise refuse("not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(MAX_SCHEMA_BYTES + 1)
    except OSError as exc:
        raise refuse(f"cannot read it: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


# Keywords whose values are data, not schemas: a "$ref" inside them is not a reference.
_DATA_KEYWORDS = frozenset({"const", "enum", "examples", "default"})
# Keywords that apply their subschemas to the same value: a cycle through only these (and
# references) never reaches a smaller part of the value, so it never ends.
_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_MANY = ("allOf", "anyOf", "oneOf")


def _closed_registry() -> Registry[Any]:
    from referencing import Registry

    return Registry()  # no ``retrieve``: a reference outside the schema is unresolvable


def ref_problem(schema: JsonObject) -> str | None:
    """Why the schema's references cannot be used, as the end of a sentence starting "the
    output schema": one that points outside the schema (a URL, a ``file:`` path: nothing
    is ever fetched or read), or a cycle of references that never descends into the value
    (``{"$ref": "#"}``, a → b → a) and so could never finish. None: they are fine."""
    # jsonschema's bundled meta-schemas (a reference to one resolves without a fetch)
    from jsonschema_specifications import REGISTRY as SPECIFICATIONS  # type: ignore[import-untyped]
    from referencing.exceptions import Unresolvable
    from referencing.jsonschema import DRAFT202012

    registry = SPECIFICATIONS.combine(_closed_registry())
    root = registry.resolver_with_root(DRAFT202012.create_resource(schema))
    # Every subschema with the resolver its references are read against (``$id`` moves it).
    stack: list[tuple[JsonValue, Resolver[Any], str]] = [(schema, root, "")]
    edges: dict[int, list[tuple[int, str]]] = {}
    while stack:
        node, resolver, where = stack.pop()
        if isinstance(node, list):
            stack.extend((item, resolver, f"{where}/{i}") for i, item in enumerate(node))
            continue
        if not isinstance(node, dict):
            continue
        if isinstance(node.get("$id"), str):
            resolver = resolver.in_subresource(DRAFT202012.create_resource(node))
        out = edges.setdefault(id(node), [])
        for key in ("$ref", "$dynamicRef"):
            ref = node.get(key)
            if not isinstance(ref, str):
                continue
            try:
                target = resolver.lookup(ref).contents
            except Unresolvable:
                return (
                    f"refers to {ref!r} (at {where or '/'}), outside itself: a reference must"
                    " resolve inside the schema (nothing is fetched or read)"
                )
            if isinstance(target, dict):
                out.append((id(target), f"{key} {ref!r} at {where or '/'}"))
        for key in _IN_PLACE_ONE:
            if isinstance(node.get(key), dict):
                out.append((id(node[key]), ""))
        for key in _IN_PLACE_MANY:
            subs = node.get(key)
            if isinstance(subs, list):
                out.extend((id(sub), "") for sub in subs if isinstance(sub, dict))
        stack.extend(
            (value, resolver, f"{where}/{key}")
            for key, value in node.items()
            if key not in _DATA_KEYWORDS and isinstance(value, dict | list)
        )
    cycle = _cycle(edges)
    if cycle is None:
        return None
    return (
        f"refers to itself without going into the value ({cycle}), so no answer could"
        " ever be checked against it"
    )


def _cycle(edges: dict[int, list[tuple[int, str]]]) -> str | None:
    """The first reference on a cycle of ``edges`` (iterative depth-first search), or None."""
    done: set[int] = set()
    for start in edges:
        if start in done:
            continue
        on_path: dict[int, str] = {start: ""}
        stack = [(start, iter(edges.get(start, ())))]
        while stack:
            node, successors = stack[-1]
            step = next(successors, None)
            if step is None:
                stack.pop()
                on_path.pop(node, None)
                done.add(node)
                continue
            target, via = step
            if target in on_path:
                refs = [v for v in (*on_path.values(), via) if v]
                return refs[-1] if refs else "a cycle of in-place keywords"
            if target not in done:
                on_path[target] = via
                stack.append((target, iter(edges.get(target, ()))))
    return None


def schema_hash(schema: JsonObject) -> str:
    """``sha256:<hex>`` of the schema's canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def answer_value(answer: str) -> tuple[bool, JsonValue]:
    """``(True, value)`` for the JSON value in ``answer`` — the whole answer, else the last
    fenced block that parses — or ``(False, None)`` when there is none."""
    text = answer.strip()
    if text:
        try:
            return True, json.loads(text)
        except ValueError:
            pass
    for _lang, body in reversed(_FENCE.findall(answer)):
        try:
            return True, json.loads(body)
        except ValueError:
            continue
    return False, None


def problem(schema: JsonObject, value: JsonValue) -> str | None:
    """The first reason ``value`` does not satisfy ``schema`` (the most relevant error, with
    its place in the value), or None when it does."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    # An empty registry (jsonschema adds its bundled meta-schemas) resolves references inside
    # the schema only: without it jsonschema would fetch any URL a ``$ref`` names.
    validator = Draft202012Validator(schema, registry=_closed_registry())
    error = best_match(validator.iter_errors(value))
    if error is None:
        return None
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return f"{'$' + where if where else 'the answer'}: {_one_line(error.message)}"


def check_answer(schema: JsonObject, answer: str) -> tuple[JsonValue, str | None]:
    """The answer's value and the first problem with it (None: valid)."""
    found, value = answer_value(answer)
    if not found:
        return None, "the answer is not JSON (neither the whole answer nor a fenced block)"
    return value, problem(schema, value)


def instruction(schema: JsonObject) -> str:
    """What a task says when the backend has no schema flag of its own."""
    return (
        "\n\nAnswer with a single JSON value that satisfies this JSON Schema (2020-12), and"
        " nothing else: no prose before or after it.\n\n```json\n"
        + json.dumps(schema, indent=2, ensure_ascii=False)
        + "\n```\n"
    )


def repair(error: str) -> str:
    """The one repair turn: the validation error, and the instruction again."""
    return (
        f"Your answer does not satisfy the required JSON Schema: {error}\n"
        "Reply again with only the corrected JSON value, nothing else."
    )


# Keywords OpenAI's strict mode refuses (its structured outputs' "supported schemas").
_STRICT_REFUSED = (
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "patternProperties",
    "propertyNames",
    "unevaluatedProperties",
)


def strict(schema: JsonObject) -> JsonObject:
    """``schema`` as OpenAI's strict mode takes it: each object gets ``additionalProperties:
    false`` and every property in ``required``; a property that was optional becomes
    nullable (``anyOf`` with ``null``), which keeps its meaning for a caller that treats null
    as absent. Raises ``UsageError`` naming the rule a schema breaks that this cannot fix."""
    if schema.get("type") != "object":
        raise UsageError(
            "codex's strict mode needs an object at the top of the output schema"
            ' ("type": "object"); wrap the value in one',
            FIELD,
        )
    return _strict_object(schema, "$")


def _strict(node: JsonValue, where: str) -> JsonValue:
    if isinstance(node, list):
        return [_strict(item, f"{where}[{i}]") for i, item in enumerate(node)]
    if isinstance(node, dict):
        return _strict_object(node, where)
    return node


def _strict_object(node: JsonObject, where: str) -> JsonObject:
    for key in _STRICT_REFUSED:
        if key in node:
            raise UsageError(
                f"the output schema uses {key!r} at {where}, which codex's strict mode refuses",
                FIELD,
            )
    out: JsonObject = {}
    for key, value in node.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _strict(sub, f"{where}.{name}") for name, sub in value.items()}
        elif key in ("$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: _strict(sub, f"{where}.{key}.{name}") for name, sub in value.items()}
        elif isinstance(value, dict | list):
            out[key] = _strict(value, f"{where}.{key}")
        else:
            out[key] = value
    is_object = node.get("type") == "object" or "properties" in node
    if is_object:
        extra = node.get("additionalProperties", False)
        if extra is not False:
            raise UsageError(
                f"the output schema lets the object at {where} have other keys"
                " (additionalProperties), which codex's strict mode refuses",
                FIELD,
            )
        out["additionalProperties"] = False
        given = out.get("properties")
        props: JsonObject = given if isinstance(given, dict) else {}
        listed = node.get("required")
        required = (
            {name for name in listed if isinstance(name, str)}
            if isinstance(listed, list)
            else set()
        )
        for name in props:
            if name not in required:
                props[name] = _nullable(props[name])
        out["properties"] = props
        out["required"] = list(props)
    return out


def _nullable(schema: JsonValue) -> JsonValue:
    if not isinstance(schema, dict):
        return schema
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return schema
    if isinstance(kind, str) and set(schema) <= {"type", "description"}:
        return {**schema, "type": [kind, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def compare(answers: Mapping[str, JsonValue]) -> StructuredComparison:
    """Where members' structured answers agree and where they differ, field by field:
    ``{"agree": [path, ...], "differ": {path: {member: value}}}``. A path is a JSON pointer
    into the values (``/verdict``, ``/findings/0``); objects are compared key by key, any
    other value (a list, a scalar) as a whole at its path, so two lists in another order
    differ. A member that lacks a path counts as ``null`` there."""
    agree: list[str] = []
    differ: dict[str, dict[str, JsonValue]] = {}

    def walk(path: str, values: dict[str, JsonValue]) -> None:
        objects = {m: v for m, v in values.items() if isinstance(v, dict)}
        if values and len(objects) == len(values):
            keys = sorted({k for v in objects.values() for k in v})
            for key in keys:
                pointer = f"{path}/{key.replace('~', '~0').replace('/', '~1')}"
                walk(pointer, {m: v.get(key) for m, v in objects.items()})
            return
        canonical = {m: json.dumps(v, sort_keys=True) for m, v in values.items()}
        if len(set(canonical.values())) <= 1:
            agree.append(path or "/")
        else:
            differ[path or "/"] = dict(values)

    walk("", dict(answers))
    return {"agree": agree, "differ": differ}
