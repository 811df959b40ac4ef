"""The answer engine's comments and docstrings speak of kinds, not of the evaluation sets.

Comments speak of kinds of documents and questions ("a company named in one
line of another company's filing", "the composer of Vellmar Suite"), not of one
company, one question or one document of the evaluation sets: a rule explained
by one filing or one question reads as fitted to it, and the next reader cannot
tell whether it holds for any other. An example, where one helps, is made up
and keeps the shape of the case it stands for.

Two checks: no company of the SEC set is named, and no name of the evaluation
questions (a run of two or more capitalised words, such as a person, a film or
a river, in the SQuAD prose set's questions in the repository and in the
MuSiQue questions beside the clone) appears. Only comments and docstrings are
read; string literals the code uses (a regular expression, a fixture) may name
what they must.
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ROOT = REPO / "docsum"
TOP_LEVEL = ("layout", "lexical", "tablerows", "tableheadings", "tablecells", "citations")
NAMED = re.compile(r"\b(?:Apple|Microsoft|Intel|NVIDIA|Amazon|Tesla)\b", re.IGNORECASE)

# The questions whose names no comment may quote: the prose set lives in the
# repository; the MuSiQue set beside the clone, where the shared corpora are.
PROSE_QUESTIONS = REPO / "bench" / "prose" / "questions.jsonl"
MUSIQUE_QUESTIONS = REPO.parent / "shared" / "eval" / "corpora" / "musique" / "questions.jsonl"

# A capitalised word with a lower-case letter in it ("Quinn", "McAlder", "Mr."),
# or an initial ("W."): a one-letter word without its full stop ("R&B") and a
# code in capitals ("NATO", "Q1") are no part of a name here.
_WORD = r"(?:[A-ZÀ-Þ][^\W\d_]*[a-zß-ÿ][^\W\d_]*\.?|[A-Z]\.)"
_RUN = re.compile(rf"(?<![\w.]){_WORD}(?: {_WORD})+")
# Capitalised because they open a question or sit at its edge, not because
# they name anything: dropped from the ends of a run ("What Is").
_STOP = frozenset(
    """What Who Whom Whose When Where Which Why How Is Are Was Were Did Do Does
    In On At Of The A An And Or For To By From With As If Has Have Had Can
    Could Would Will Name Describe List Give Tell""".split()
)


def question_names(question: str) -> set[str]:
    """The runs of two or more capitalised words in `question` ("Mara J.
    Quinn", "Glass Harbor"), without a question word at either end."""
    found = set()
    for run in _RUN.finditer(question):
        words = run.group(0).split(" ")
        while words and words[0].rstrip(".") in _STOP:
            words.pop(0)
        while words and words[-1].rstrip(".") in _STOP:
            words.pop()
        if len(words) >= 2:
            if len(words[-1]) > 2:
                words[-1] = words[-1].rstrip(".")
            found.add(" ".join(words))
    return found


@cache
def names_in(path: Path) -> frozenset[str]:
    """The names of every question of a JSON-lines question file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    questions = [json.loads(line)["question"] for line in lines if line.strip()]
    return frozenset().union(*map(question_names, questions))


def _modules() -> list[Path]:
    paths = sorted((ROOT / "models").rglob("*.py")) + sorted((ROOT / "query").rglob("*.py"))
    return paths + [ROOT / f"{name}.py" for name in TOP_LEVEL]


def _comments(source: str) -> list[tuple[int, str]]:
    """Each block of comments on consecutive lines as one text, so a name a
    comment wraps over two lines is read whole."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    blocks: list[tuple[int, str]] = []
    last = -2
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        line, text = tok.start[0], tok.string.lstrip("#").strip()
        if line == last + 1 and blocks:
            blocks[-1] = (blocks[-1][0], f"{blocks[-1][1]} {text}")
        else:
            blocks.append((line, text))
        last = line
    return blocks


def _docstrings(source: str) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    found.append((body[0].lineno, body[0].value.value))
    return found


@cache
def _texts(path: Path) -> tuple[tuple[int, str], ...]:
    """The comments and docstrings of `path`, whitespace runs made one space."""
    source = path.read_text(encoding="utf-8")
    return tuple((line, " ".join(text.split())) for line, text in _comments(source) + _docstrings(source))


def named_companies(path: Path) -> list[tuple[int, str]]:
    """The (line, company) pairs the comments and docstrings of `path` name."""
    return sorted((line, match.group(0)) for line, text in _texts(path) for match in NAMED.finditer(text))


def quoted_names(path: Path, names: frozenset[str]) -> list[tuple[int, str]]:
    """The (line, name) pairs of `names` the comments and docstrings of `path` quote."""
    if not names:
        return []
    alternatives = "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))
    pattern = re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)")
    return sorted((line, match.group(0)) for line, text in _texts(path) for match in pattern.finditer(text))


def _quoting(names: frozenset[str]) -> list[str]:
    """Each quoted name as `path:line: name`, for the failure's message."""
    return [
        f"{path.relative_to(REPO)}:{line}: {name}" for path in _modules() for line, name in quoted_names(path, names)
    ]


def test_the_modules_exist() -> None:
    assert all(path.is_file() for path in _modules())


def test_no_comment_or_docstring_names_a_company() -> None:
    found = {str(path.relative_to(REPO)): hits for path in _modules() if (hits := named_companies(path))}
    assert found == {}


def test_question_names_are_runs_of_capitalised_words() -> None:
    assert question_names("When was Mara J. Quinn born?") == {"Mara J. Quinn"}
    assert question_names("Who sang Glass Harbor and What Is It?") == {"Glass Harbor"}
    assert question_names("What Is the name of Tomas Vell's band?") == {"Tomas Vell"}
    assert question_names("Who won the Best R&B Performance at NATO Q1?") == set()


def test_no_comment_or_docstring_quotes_a_prose_question_name() -> None:
    names = names_in(PROSE_QUESTIONS)
    assert names, "the prose set's questions name something"
    found = _quoting(names)
    assert not found, "\n".join(found)


def test_no_comment_or_docstring_quotes_a_musique_question_name() -> None:
    if not MUSIQUE_QUESTIONS.is_file():
        pytest.skip(f"no MuSiQue questions at {MUSIQUE_QUESTIONS}")
    names = names_in(MUSIQUE_QUESTIONS)
    assert names, "the MuSiQue questions name something"
    found = _quoting(names)
    assert not found, "\n".join(found)
