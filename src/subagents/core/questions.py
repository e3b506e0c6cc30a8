"""A child's own question for the user, as an inbox item (docs/approvals.md): claude's
``AskUserQuestion`` reaches the run's permission server like any tool call; its questions
(one to four, each with two to four options and a free-text answer besides) wait in the
inbox, and their answers go back as the tool's input (claude reads ``answers``, keyed by
each question's text, as the user's). Here: what the questions are, in one line, whether an
answer fits, and an option picked by its number. Standard library only: the supervisor
and claude's permission server import it."""

from __future__ import annotations

from subagents.core.childtext import one_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from subagents.types import JsonObject, JsonValue, Question, QuestionOption

# The tools a child asks the user with (claude's name).
ASK_TOOLS = ("AskUserQuestion",)
# claude's own bound on the questions in one call.
MOST = 4
# The most of an answer kept (a person may paste a paragraph; the child reads it).
ANSWER_LIMIT = 4000


def questions_of(tool: str, tool_input: JsonValue) -> list[Question] | None:
    """The questions of a call to an asking tool, or None when ``tool`` is not one or its
    input holds no question (then it is an ordinary request to act)."""
    if tool not in ASK_TOOLS or not isinstance(tool_input, dict):
        return None
    raw = tool_input.get("questions")
    if not isinstance(raw, list):
        return None
    found: list[Question] = []
    for entry in raw[:MOST]:
        asked = entry.get("question") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or not isinstance(asked, str):
            continue
        options: list[QuestionOption] = []
        offered = entry.get("options")
        for option in offered if isinstance(offered, list) else []:
            label = option.get("label") if isinstance(option, dict) else None
            if isinstance(option, dict) and isinstance(label, str):
                about = option.get("description")
                options.append(
                    {
                        "label": label,
                        "description": about if isinstance(about, str) else "",
                    }
                )
        header = entry.get("header")
        found.append(
            {
                "question": asked,
                "header": header if isinstance(header, str) else "",
                "options": options,
                "multiSelect": entry.get("multiSelect") is True,
            }
        )
    return found or None


def summary(questions: list[Question], limit: int) -> str:
    """The questions in one line, as the inbox shows them: ``Which colour? (Red | Blue)``."""
    parts = []
    for q in questions:
        labels = " | ".join(o["label"] for o in q["options"])
        parts.append(f"{q['question']} ({labels})" if labels else q["question"])
    line = one_line(" · ".join(parts))
    return line if len(line) <= limit else line[: limit - 1] + "…"


def answers_problem(questions: list[Question], answers: list[str]) -> str | None:
    """What is wrong with ``answers`` for ``questions`` (a phrase), or None."""
    if len(answers) != len(questions):
        n = len(questions)
        return f"it asks {n} question{'s' if n != 1 else ''}: give one answer for each, in order"
    for i, answer in enumerate(answers, 1):
        if not answer.strip():
            return f"answer {i} is empty"
        if len(answer) > ANSWER_LIMIT:
            return f"answer {i} is over {ANSWER_LIMIT} characters"
    return None


def pick(question: Question, choice: str) -> str:
    """The answer that option number ``choice`` gives (``1``; ``1,3`` for a question that
    takes several: claude reads those comma-separated). ValueError naming the problem."""
    labels = [o["label"] for o in question["options"]]
    if not labels:
        raise ValueError("the question offers no options: answer it in words")
    numbers = [n.strip() for n in choice.split(",")]
    if len(numbers) > 1 and not question["multiSelect"]:
        raise ValueError(f"{question['question']!r} takes one option, not {choice!r}")
    picked = []
    for n in numbers:
        if not n.isdigit() or not 1 <= int(n) <= len(labels):
            raise ValueError(f"no option {n!r}: choose 1 to {len(labels)}")
        picked.append(labels[int(n) - 1])
    return ", ".join(picked)


def claude_input(tool_input: JsonValue, questions: list[Question], answers: list[str]) -> JsonValue:
    """``AskUserQuestion``'s input with the user's answers, as claude's permission prompt
    tool gives it back (``updatedInput``): ``answers`` keyed by each question's text."""
    given: JsonObject = {q["question"]: a for q, a in zip(questions, answers, strict=False)}
    if not isinstance(tool_input, dict):
        return {"answers": given}
    return {**tool_input, "answers": given}
