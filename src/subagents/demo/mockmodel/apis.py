"""The wire formats: one answer encoded for OpenAI Chat, Anthropic Messages, OpenAI Responses and Gemini."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from subagents.demo.mockmodel.script import (
    ANTHROPIC,
    GEMINI,
    RESPONSE_ID,
    TOOL_CALL_ID,
    Answer,
    Script,
    halves,
    split_parts,
)

if TYPE_CHECKING:
    # What the mock sends: JSON bodies of its own making.
    from subagents.types import JsonObject, JsonValue

# --------------------------------------------------------------------------- OpenAI Chat


def _usage(script: Script) -> JsonObject:
    prompt, completion = script.usage
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _chunk(
    answer: Answer, model: str, created: int, delta: JsonObject, finish: str | None = None
) -> JsonObject:
    return {
        "id": answer.uid(RESPONSE_ID),
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def stream_chunks(
    script: Script, answer: Answer, model: str, include_usage: bool
) -> Iterator[JsonObject]:
    created = int(time.time())
    yield _chunk(answer, model, created, {"role": "assistant", "content": ""})
    if answer.text is not None:
        for piece in split_parts(answer.text, script.text_chunks):
            yield _chunk(answer, model, created, {"content": piece})
    if answer.tool is not None:
        name, args = answer.tool
        yield _chunk(
            answer,
            model,
            created,
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": answer.uid(TOOL_CALL_ID),
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }
                ]
            },
        )
        for part in halves(json.dumps(args)):
            yield _chunk(
                answer,
                model,
                created,
                {"tool_calls": [{"index": 0, "function": {"arguments": part}}]},
            )
    yield _chunk(answer, model, created, {}, answer.finish_reason)
    if include_usage:
        yield {
            "id": answer.uid(RESPONSE_ID),
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": _usage(script),
        }


def completion(script: Script, answer: Answer, model: str) -> JsonObject:
    message: JsonObject = {"role": "assistant", "content": answer.text}
    if answer.tool is not None:
        name, args = answer.tool
        message["tool_calls"] = [
            {
                "id": answer.uid(TOOL_CALL_ID),
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ]
    return {
        "id": answer.uid(RESPONSE_ID),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": answer.finish_reason}],
        "usage": _usage(script),
    }


# --------------------------------------------------------------------------- Anthropic


def _anthropic_usage(script: Script, output: bool = True) -> JsonObject:
    prompt, completion = script.usage
    return {
        "input_tokens": prompt,
        "output_tokens": completion if output else 1,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def _anthropic_block(answer: Answer, whole: bool = True) -> JsonObject:
    """The answer's one content block (``whole``: with its input or text; else as a stream
    starts it)."""
    if answer.tool is not None:
        name, args = answer.tool
        return {
            "type": "tool_use",
            "id": answer.uid("toolu_mock_1"),
            "name": name,
            "input": args if whole else {},
        }
    return {"type": "text", "text": (answer.text or "") if whole else ""}


def anthropic_message(script: Script, answer: Answer, model: str) -> JsonObject:
    return {
        "id": answer.uid("msg_mock"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [_anthropic_block(answer)],
        "stop_reason": "tool_use" if answer.tool else "end_turn",
        "stop_sequence": None,
        "usage": _anthropic_usage(script),
    }


def anthropic_events(
    script: Script, answer: Answer, model: str
) -> Iterator[tuple[str, JsonObject]]:
    start = anthropic_message(script, answer, model)
    start.update(content=[], stop_reason=None, usage=_anthropic_usage(script, output=False))
    yield "message_start", {"type": "message_start", "message": start}
    block = _anthropic_block(answer, whole=False)
    deltas: list[JsonValue]
    if answer.tool is not None:
        deltas = [
            {"type": "input_json_delta", "partial_json": p}
            for p in halves(json.dumps(answer.tool[1]))
        ]
    else:
        deltas = [
            {"type": "text_delta", "text": p}
            for p in split_parts(answer.text or "", script.text_chunks)
        ]
    yield "content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}
    for delta in deltas:
        yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": "tool_use" if answer.tool else "end_turn",
                "stop_sequence": None,
            },
            "usage": {"output_tokens": script.usage[1]},
        },
    )
    yield "message_stop", {"type": "message_stop"}


# --------------------------------------------------------------------------- OpenAI Responses


def _responses_item(answer: Answer, done: bool) -> JsonObject:
    status = "completed" if done else "in_progress"
    if answer.tool is not None:
        name, args = answer.tool
        return {
            "type": "function_call",
            "id": answer.uid("fc_mock_1"),
            "call_id": answer.uid(TOOL_CALL_ID),
            "name": name,
            "arguments": json.dumps(args) if done else "",
            "status": status,
        }
    content: list[JsonValue] = [
        {"type": "output_text", "text": answer.text or "", "annotations": []}
    ]
    return {
        "type": "message",
        "id": answer.uid("msg_mock_1"),
        "role": "assistant",
        "status": status,
        "content": content if done else [],
    }


def responses_object(script: Script, answer: Answer | None, model: str, n: int = 1) -> JsonObject:
    """The response object; ``answer`` None = the in-progress one of ``response.created``
    (the ``n``th answer)."""
    prompt, completion = script.usage
    obj: JsonObject = {
        "id": (answer or Answer(None, None, n)).uid("resp_mock"),
        "object": "response",
        "created_at": int(time.time()),
        "status": "in_progress" if answer is None else "completed",
        "model": model,
        "output": [] if answer is None else [_responses_item(answer, done=True)],
        "usage": None,
    }
    if answer is not None:
        obj["usage"] = {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion,
        }
    return obj


def responses_events(
    script: Script, answer: Answer, model: str
) -> Iterator[tuple[str, JsonObject]]:
    events: list[JsonObject] = [
        {"type": "response.created", "response": responses_object(script, None, model, answer.n)}
    ]
    item = _responses_item(answer, done=False)
    done = _responses_item(answer, done=True)
    at: JsonObject = {"output_index": 0, "item_id": item["id"]}
    events.append({"type": "response.output_item.added", "output_index": 0, "item": item})
    if answer.tool is not None:
        arguments = json.dumps(answer.tool[1])
        for part in halves(arguments):
            events.append({"type": "response.function_call_arguments.delta", **at, "delta": part})
        events.append(
            {"type": "response.function_call_arguments.done", **at, "arguments": arguments}
        )
    else:
        text = answer.text or ""
        part0: JsonObject = {"type": "output_text", "text": "", "annotations": []}
        events.append(
            {"type": "response.content_part.added", **at, "content_index": 0, "part": part0}
        )
        for piece in split_parts(text, script.text_chunks):
            events.append(
                {"type": "response.output_text.delta", **at, "content_index": 0, "delta": piece}
            )
        events.append({"type": "response.output_text.done", **at, "content_index": 0, "text": text})
        events.append(
            {
                "type": "response.content_part.done",
                **at,
                "content_index": 0,
                "part": {**part0, "text": text},
            }
        )
    events.append({"type": "response.output_item.done", "output_index": 0, "item": done})
    events.append(
        {"type": "response.completed", "response": responses_object(script, answer, model)}
    )
    for seq, event in enumerate(events):
        event["sequence_number"] = seq
        yield str(event["type"]), event


# --------------------------------------------------------------------------- Gemini


def _gemini_usage(script: Script) -> JsonObject:
    prompt, completion = script.usage
    return {
        "promptTokenCount": prompt,
        "candidatesTokenCount": completion,
        "totalTokenCount": prompt + completion,
    }


def _gemini_response(script: Script, part: JsonObject, model: str, last: bool) -> JsonObject:
    candidate: JsonObject = {"content": {"role": "model", "parts": [part]}, "index": 0}
    out: JsonObject = {"candidates": [candidate], "modelVersion": model, "responseId": "mock"}
    if last:
        candidate["finishReason"] = "STOP"
        out["usageMetadata"] = _gemini_usage(script)
    return out


def gemini_chunks(script: Script, answer: Answer, model: str) -> list[JsonObject]:
    if answer.tool is not None:
        name, args = answer.tool
        call: JsonObject = {"functionCall": {"name": name, "args": args}}
        return [_gemini_response(script, call, model, last=True)]
    pieces = split_parts(answer.text or "", script.text_chunks)
    return [
        _gemini_response(script, {"text": p}, model, last=i == len(pieces) - 1)
        for i, p in enumerate(pieces)
    ]


def gemini_whole(script: Script, answer: Answer, model: str) -> JsonObject:
    if answer.tool is not None:
        return gemini_chunks(script, answer, model)[0]
    return _gemini_response(script, {"text": answer.text or ""}, model, last=True)


GEMINI_PATH = re.compile(r"^(?:/v1beta|/v1alpha|/v1)?/models/([^/:]+):([A-Za-z]+)$")
_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    503: "UNAVAILABLE",
}


def error_body(api: str, status: int, message: str) -> JsonObject:
    if api == ANTHROPIC:
        kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(
            status, "api_error" if status >= 500 else "invalid_request_error"
        )
        return {"type": "error", "error": {"type": kind, "message": message}}
    if api == GEMINI:
        name = _GEMINI_STATUS.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")
        return {"error": {"code": status, "message": message, "status": name}}
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return {"error": {"message": message, "type": kind, "code": None}}


def count_tokens(body: JsonValue) -> int:
    return max(1, len(json.dumps(body)) // 4)
