"""Answers a program can use: schemas read and checked once, the JSON in an answer found,
validation errors as one line, and codex's strict mode made from a schema or refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from subagents.errors import UsageError
from subagents.structured import (
    MAX_SCHEMA_BYTES,
    answer_value,
    check_answer,
    instruction,
    load_schema,
    problem,
    repair,
    schema_hash,
    strict,
)

VERDICT = {
    "type": "object",
    "properties": {
        "verdict": {"enum": ["approve", "reject"]},
        "findings": {"type": "array", "items": {"type": "string"}},
        "note": {"type": "string"},
    },
    "required": ["verdict", "findings"],
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def test_a_schema_comes_from_inline_json_a_file_or_a_mapping(tmp_path: Path) -> None:
    (tmp_path / "v.json").write_text(json.dumps(VERDICT))
    assert load_schema(json.dumps(VERDICT)) == VERDICT
    assert load_schema("v.json", cwd=tmp_path) == VERDICT
    assert load_schema(str(tmp_path / "v.json")) == VERDICT
    assert load_schema(VERDICT) == VERDICT


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("{not json", "is not JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"type": "nonsense"}', "not a valid JSON Schema"),
        ('{"properties": {"a": {"minLength": -1}}}', "at properties/a/minLength"),
        ("   ", "is empty"),
        ("/nowhere/schema.json", "cannot read it"),
    ],
)
def test_a_bad_schema_is_one_line_naming_the_problem(source: str, words: str) -> None:
    with pytest.raises(UsageError, match=words) as caught:
        load_schema(source)
    assert caught.value.field == "output_schema" and "\n" not in str(caught.value)


def test_a_mapping_that_is_not_json_is_one_line_and_a_mapping_is_copied() -> None:
    with pytest.raises(UsageError, match="the output schema is not JSON") as caught:
        load_schema({"type": "object", "default": {1, 2}})
    assert "\n" not in str(caught.value)
    given = {"type": "object", "properties": {"a": {"type": "string"}}}
    schema = load_schema(given)
    assert schema == given and schema is not given


def test_a_schema_over_256_kib_is_refused(tmp_path: Path) -> None:
    big = {"description": "x" * MAX_SCHEMA_BYTES}
    (tmp_path / "big.json").write_text(json.dumps(big))
    for source in (str(tmp_path / "big.json"), json.dumps(big), big):
        with pytest.raises(UsageError, match="over the limit of 256 KiB"):
            load_schema(source)  # type: ignore[arg-type]
    (tmp_path / "latin1.json").write_bytes(b'{"description": "caf\xe9"}')
    with pytest.raises(UsageError, match="not UTF-8"):
        load_schema(str(tmp_path / "latin1.json"))


def test_the_hash_is_the_canonical_jsons() -> None:
    reordered = json.loads(json.dumps(VERDICT, sort_keys=True))
    assert schema_hash(VERDICT) == schema_hash(reordered)
    assert schema_hash(VERDICT) != schema_hash({**VERDICT, "required": ["verdict"]})
    assert schema_hash(VERDICT).startswith("sha256:")


@given(json_values)
def test_a_bare_json_answer_is_its_value(value: object) -> None:
    assert answer_value(json.dumps(value)) == (True, value)
    assert answer_value(f"  {json.dumps(value, indent=2)}\n") == (True, value)


@given(json_values, st.text(alphabet=st.characters(blacklist_characters='`{}[]"')))
def test_the_last_fenced_block_that_parses_is_the_value(value: object, prose: str) -> None:
    answer = f"{prose}\n```json\n{{broken\n```\nthen:\n```json\n{json.dumps(value)}\n```\n{prose}"
    assert answer_value(answer) == (True, value)


def test_an_answer_without_json_says_so() -> None:
    assert answer_value("I could not decide.") == (False, None)
    value, why = check_answer(VERDICT, "I could not decide.")
    assert value is None and why is not None and "not JSON" in why


def test_validation_names_the_place_in_the_value() -> None:
    assert problem(VERDICT, {"verdict": "approve", "findings": []}) is None
    why = problem(VERDICT, {"verdict": "maybe", "findings": []})
    assert why is not None and why.startswith("$.verdict:") and "maybe" in why
    why = problem(VERDICT, {"verdict": "reject", "findings": ["a", 3]})
    assert why is not None and why.startswith("$.findings[1]:")
    assert (
        problem(VERDICT, {"verdict": "reject"}) == "the answer: 'findings' is a required property"
    )


def test_the_instruction_and_repair_carry_the_schema_and_the_error() -> None:
    told = instruction(VERDICT)
    assert "```json\n" in told and json.loads(told.split("```json\n")[1].split("```")[0]) == VERDICT
    assert "$.verdict: 'maybe' is not one of" in repair("$.verdict: 'maybe' is not one of")


def test_strict_mode_closes_objects_and_makes_optional_keys_nullable() -> None:
    made = strict(VERDICT)
    assert made["additionalProperties"] is False
    assert made["required"] == ["verdict", "findings", "note"]
    assert made["properties"]["note"] == {"type": ["string", "null"]}
    # The meaning kept: what was valid (with the optional key as null) still is, and a key
    # the schema never named is refused.
    assert problem(made, {"verdict": "approve", "findings": [], "note": None}) is None
    assert problem(made, {"verdict": "approve", "findings": [], "note": "n"}) is None
    assert problem(made, {"verdict": "approve", "findings": [], "note": None, "x": 1})
    nested = strict(
        {
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"a": {"$ref": "#/$defs/n"}}},
                }
            },
            "$defs": {"n": {"type": "object", "properties": {"v": {"type": "integer"}}}},
            "required": ["items"],
        }
    )
    inner = nested["properties"]["items"]["items"]
    assert inner["additionalProperties"] is False and inner["required"] == ["a"]
    assert inner["properties"]["a"] == {"anyOf": [{"$ref": "#/$defs/n"}, {"type": "null"}]}
    assert nested["$defs"]["n"]["required"] == ["v"]


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"type": "array"}, "needs an object at the top"),
        ({"type": "object", "additionalProperties": True}, "additionalProperties"),
        ({"type": "object", "properties": {"a": {"not": {"type": "null"}}}}, "'not' at \\$.a"),
        ({"type": "object", "patternProperties": {"^x": {}}}, "'patternProperties'"),
        ({"type": "object", "allOf": [{"required": ["a"]}]}, "'allOf'"),
    ],
)
def test_strict_mode_refuses_what_it_cannot_express(schema: dict, words: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(UsageError, match=words):
        strict(schema)


def test_a_council_compares_answers_field_by_field() -> None:
    from subagents.structured import compare

    report = compare(
        {
            "pi": {"verdict": "approve", "findings": ["a"], "score": {"x": 1, "y": 2}},
            "claude": {"verdict": "approve", "findings": ["b"], "score": {"x": 1, "y": 3}},
            "codex": {"verdict": "approve", "findings": ["a"], "score": {"x": 1}, "a/b": 1},
        }
    )
    assert report["agree"] == ["/score/x", "/verdict"]
    assert report["differ"]["/findings"] == {"pi": ["a"], "claude": ["b"], "codex": ["a"]}
    assert report["differ"]["/score/y"] == {"pi": 2, "claude": 3, "codex": None}
    assert report["differ"]["/a~1b"] == {"pi": None, "claude": None, "codex": 1}
    assert compare({"pi": [1, 2], "claude": [1, 2]}) == {"agree": ["/"], "differ": {}}


def test_a_council_record_counts_a_member_never_started_and_a_missing_judge() -> None:
    from subagents.core import events as ev
    from subagents.jobs import council
    from subagents.types import RunNotStarted

    never: RunNotStarted = {
        "runId": None,
        "agent": None,
        "backend": "pi",
        "task": "t",
        "status": "aborted",
        "errorMessage": "stopped before it started",
        "finalText": "",
        "usage": ev.empty_usage(),
        "toolCalls": 0,
    }
    record = council.record([never], quorum=1, schema=True, judge=None)
    [member] = record["members"]
    assert member["label"] == "A" and member["status"] == "aborted"
    assert member["errorMessage"] == "stopped before it started" and member["model"] is None
    assert record["answered"] == 0 and "agreement" not in record and "verdict" not in record
    assert council.status(0, 1, cancelled=False) == "failed"
    # (a judge that failed or timed out is a missing verdict, not a failed council)
    assert council.status(2, 1, cancelled=False) == "completed"
    assert council.status(2, 1, cancelled=True) == "aborted"
    assert council.status(1, 1, cancelled=False) == "completed"
