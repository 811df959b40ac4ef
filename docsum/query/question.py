"""The question itself, checked before anything else is done with it.

A question is refused (exit 2) when it is empty or when it would take more
than its share of the model's context window: the check needs only the
window, the answer's reserve and a tokenizer (`QuestionRoom`), so the command
line runs it from the settings before it creates the engine or says anything
about it, and `docsum.query.ask` runs it again for a question asked from Python.
Questions read from a `--questions` file are parsed here too.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from docsum.errors import ConfigError

if TYPE_CHECKING:  # the tokenizer tables load with the engine or the check that needs them
    from docsum.models.llm import LLMMetadata
    from docsum.models.tokens import Tokenizer

# Room a question may take in the prompt: at most this share of the context
# window left after the answer's budget, so the documents still fit beside it.
MAX_QUESTION_SHARE = 0.5


@dataclass(frozen=True)
class QuestionRoom:
    """How long a question may be: from a model's window, the tokens kept for
    the answer, and the tokenizer that counts the question."""

    context_window: int
    num_output: int
    tokenizer: Tokenizer

    @classmethod
    def of(cls, metadata: LLMMetadata) -> QuestionRoom:
        return cls(metadata.context_window, metadata.num_output, metadata.tokenizer)

    @property
    def limit(self) -> int:
        # Never below 0: a message must not offer a negative room.
        return max(0, int((self.context_window - self.num_output) * MAX_QUESTION_SHARE))

    def check(self, question: str) -> str:
        """The question, stripped, or ConfigError (exit 2) before anything is spent."""
        question = question.strip()
        if not question:
            raise ConfigError("the question is empty")
        length = self.tokenizer.count(question)
        if length > self.limit:
            raise ConfigError(
                f"the question is {length} tokens long; with a {self.context_window}-token context window at most "
                f"{self.limit} fit beside the documents (shorten it, or set --context-window for a model with a bigger window)"
            )
        return question


@dataclass(frozen=True)
class Question:
    """One question of a `--questions` file: its id (given, else its line
    number) and its text, or why the line could not be read."""

    id: Any
    text: str
    error: str = ""


def read_questions(lines: Iterable[str | bytes], where: str) -> list[Question]:
    """JSON lines ({"question": ..., "id": ...}) or one plain question per
    line; blank lines are skipped. A line that starts like JSON but is not a
    usable object, or (given as bytes) is not UTF-8, is kept as an error
    (reported in its place, exit 2): one bad line never costs the others. A
    byte-order mark before the first line (Windows editors write one) is not
    part of it."""
    out: list[Question] = []
    for number, raw in enumerate(lines, start=1):
        if isinstance(raw, bytes):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                out.append(Question(number, "", f"{where}:{number}: not UTF-8 text (byte {exc.start + 1} of the line)"))
                continue
        else:
            line = raw
        text = (line.removeprefix("\ufeff") if number == 1 else line).strip()
        if not text:
            continue
        if not text.startswith("{"):
            out.append(Question(number, text))
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            out.append(Question(number, "", f"{where}:{number}: not valid JSON ({exc.msg})"))
            continue
        except RecursionError:  # json recurses per nesting level; a hostile line must not end the batch
            out.append(Question(number, "", f"{where}:{number}: not valid JSON (nested too deeply)"))
            continue
        qid = data.get("id", number) if isinstance(data, dict) else number
        if not isinstance(qid, (str, int, float)) or isinstance(qid, bool):
            qid = number
        question = data.get("question") if isinstance(data, dict) else None
        if not isinstance(question, str):
            out.append(Question(qid, "", f'{where}:{number}: no "question" string in the JSON object'))
            continue
        out.append(Question(qid, question))
    return out
