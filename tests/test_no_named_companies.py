"""The answer engine's comments and docstrings name no company of the evaluation sets.

Comments speak of kinds of documents and questions ("a company named in one
line of another company's filing"), not of one company or one question: a rule
explained by one company's filing reads as fitted to that filing, and the next
reader cannot tell whether it holds for any other. Only comments and docstrings
are read; string literals the code uses (a regular expression, a fixture) may
name what they must.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "docsum"
TOP_LEVEL = ("layout", "lexical", "tablerows", "tableheadings", "tablecells", "citations")
NAMED = re.compile(r"\b(?:Apple|Microsoft|Intel|NVIDIA|Amazon|Tesla)\b", re.IGNORECASE)


def _modules() -> list[Path]:
    paths = sorted((ROOT / "models").rglob("*.py")) + sorted((ROOT / "query").rglob("*.py"))
    return paths + [ROOT / f"{name}.py" for name in TOP_LEVEL]


def _comments(source: str) -> list[tuple[int, str]]:
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [(tok.start[0], tok.string) for tok in tokens if tok.type == tokenize.COMMENT]


def _docstrings(source: str) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    found.append((body[0].lineno, body[0].value.value))
    return found


def named_companies(source: str) -> list[tuple[int, str]]:
    """The (line, company) pairs the comments and docstrings of `source` name."""
    texts = _comments(source) + _docstrings(source)
    return sorted((line, match.group(0)) for line, text in texts for match in NAMED.finditer(text))


def test_the_modules_exist() -> None:
    assert all(path.is_file() for path in _modules())


def test_no_comment_or_docstring_names_a_company() -> None:
    found = {
        str(path.relative_to(ROOT.parent)): hits
        for path in _modules()
        if (hits := named_companies(path.read_text(encoding="utf-8")))
    }
    assert found == {}
