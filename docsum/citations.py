"""Citations to the page: numbered passages in, `[n]` markers out, checked.

Every mode that writes text sees its passages numbered (`[3] (source: x.pdf,
pp. 12–14)` above each one) and is asked to put the numbers of the passages
behind each sentence after it. The answer's markers are then validated (one
that points at no passage is removed and reported), mapped to document, pages
and the quote that supports them, and each cited sentence is checked against
its passages: a sentence whose words are mostly not in what it cites is
flagged as unsupported.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Any

from docsum.layout import answer_units
from docsum.lexical import sentences, terms
from docsum.schema import NodeWithScore

# Above each numbered passage. Distinctive on purpose: papers start lines with
# "[1] A. Author", which must not read as a new passage.
_LABEL = re.compile(r"^\[(\d+)\] \(source: [^\n]*\)$", re.MULTILINE)
# "[2]", "[2, 5]", "[2][5]"; at most three digits (a year in brackets is not one).
MARKER = re.compile(r"\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]")
# A cited sentence must find at least this share of its content words in the
# passages it cites, or it is flagged as unsupported.
SUPPORT_FLOOR = 0.5


def page_ranges(pages: list[int] | tuple[int, ...]) -> str:
    """`p. 4`, `pp. 12–14, 31`: consecutive pages as ranges."""
    ordered = sorted(set(pages))
    if not ordered:
        return ""
    spans: list[str] = []
    start = prev = ordered[0]
    following: list[int | None] = [*ordered[1:], None]  # None closes the last range
    for page in following:
        if page is not None and page == prev + 1:
            prev = page
            continue
        spans.append(str(start) if start == prev else f"{start}–{prev}")
        if page is not None:
            start = prev = page
    return ("p. " if len(ordered) == 1 else "pp. ") + ", ".join(spans)


def passage_label(marker: int, name: str, pages: tuple[int, ...]) -> str:
    where = page_ranges(pages)
    return f"[{marker}] (source: {name}{', ' + where if where else ''})"


def number_passages(nodes: list[NodeWithScore]) -> list[str]:
    """Each passage's text under its label, numbered from 1 in order."""
    return [f"{passage_label(i, n.node.path, n.node.pages)}\n{n.node.text}" for i, n in enumerate(nodes, start=1)]


# Room kept in each part of a numbered context for the label it may be given
# (see `labelled_parts`): "[123] (source: a long file name.pdf, pp. 10–12)".
LABEL_TOKENS = 48


def has_labels(context: str) -> bool:
    return _LABEL.search(context) is not None


def labelled_parts(joined: str, parts: list[str]) -> list[str]:
    """Parts cut from a numbered context (`joined`, in order, overlapping),
    each that starts inside a passage headed by that passage's label: without
    it, a part's first sentences come from no numbered passage, and an answer
    quoting them carries no marker."""
    labels = [(m.start(), m.group(0)) for m in _LABEL.finditer(joined)]
    if not labels:
        return parts
    out: list[str] = []
    cursor = 0
    for part in parts:
        at = joined.find(part, cursor)
        if at < 0:
            out.append(part)
            continue
        cursor = at
        above = [label for start, label in labels if start <= at]
        starts_labelled = _LABEL.match(part) is not None
        out.append(part if starts_labelled or not above else f"{above[-1]}\n{part}")
    return out


def split_numbered(context: str) -> list[tuple[int | None, str]]:
    """(marker, text) for each numbered passage in a context; text before the
    first label, or a context without labels, has marker None."""
    out: list[tuple[int | None, str]] = []
    last_marker: int | None = None
    last_end = 0
    for match in _LABEL.finditer(context):
        if context[last_end : match.start()].strip() or last_marker is not None:
            out.append((last_marker, context[last_end : match.start()]))
        last_marker, last_end = int(match.group(1)), match.end()
    if context[last_end:].strip() or last_marker is not None:
        out.append((last_marker, context[last_end:]))
    return out


# The end of a unit an answer quotes: its marker group ("[2]", "[2][5]"), then
# the unit's closing punctuation, if any.
_CITED_END = re.compile(r"(?:\[\d{1,3}(?:\s*,\s*\d{1,3})*\])+([.!?。！？]?)[\"'”’)]*(?=\s|$)")


def cited_pieces(text: str) -> list[str]:
    """A text that carries markers (an answer) cut after each unit's markers:
    what comes before a marker group is what that marker cites. A sentence
    splitter cannot be trusted with it: it joins a unit that starts in lower
    case ("…, 2022 [2]. eWidget®: $39,669, …", "a) Income Statements …") to
    the one before, and the two then read as one unit with the first's
    marker. A marker group ends a unit when punctuation closes it or the
    next word starts like a unit ("… 2022 [1] For the quarter …"), never
    before a lower-case word ("Acme [1] and Northwind [2] reported …")."""
    pieces: list[str] = []
    start = 0
    for match in _CITED_END.finditer(text):
        rest = text[match.end() :].lstrip()
        if rest and (match.group(1) or not rest[0].islower()):
            pieces.append(text[start : match.end()].strip())
            start = match.end()
    if text[start:].strip():
        pieces.append(text[start:].strip())
    return pieces


def markers_in(text: str) -> list[int]:
    found: list[int] = []
    for match in MARKER.finditer(text):
        for number in match.group(1).split(","):
            value = int(number)
            if value not in found:
                found.append(value)
    return found


def strip_markers(text: str) -> str:
    text = " ".join(MARKER.sub("", text).split())
    return re.sub(r" ([.,;:!?])", r"\1", text)


def with_marker(sentence: str, marker: int | None) -> str:
    """`sentence [n].`: the marker before the closing punctuation."""
    if marker is None or f"[{marker}]" in sentence:
        return sentence
    match = re.search(r"([.!?。！？][\"'”’)]*)$", sentence)
    if match:
        return f"{sentence[: match.start()]} [{marker}]{match.group(1)}"
    return f"{sentence} [{marker}]"


def validate_markers(answer: str, count: int) -> tuple[str, list[int]]:
    """The answer without markers that point at no passage, and those markers."""
    removed: list[int] = []

    def keep(match: re.Match[str]) -> str:
        numbers = [int(n) for n in match.group(1).split(",")]
        good = [n for n in numbers if 1 <= n <= count]
        removed.extend(n for n in numbers if not 1 <= n <= count and n not in removed)
        return "".join(f"[{n}]" for n in good)

    cleaned = MARKER.sub(keep, answer)
    if removed:
        cleaned = re.sub(r"[ \t]+([.,;:!?])", r"\1", re.sub(r"[ \t]{2,}", " ", cleaned))
    return cleaned, removed


@dataclass(frozen=True)
class Citation:
    """One [n] marker of an answer: the passage's document, its pages and the
    sentence of it that best supports what the answer says there."""

    marker: int
    doc: str
    path: str
    root: str
    pages: tuple[int, ...]
    quote: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "marker": self.marker,
            "doc": self.doc,
            "path": self.path,
            "root": self.root,
            "pages": list(self.pages),
            "quote": self.quote,
        }


@dataclass(frozen=True)
class UnsupportedSentence:
    """A cited sentence whose passages hold too few of its words."""

    sentence: str
    markers: tuple[int, ...]
    support: float  # the share of its content words found there

    def as_dict(self) -> dict[str, Any]:
        return {"sentence": self.sentence, "markers": list(self.markers), "support": self.support}


@dataclass
class CitationReport:
    citations: list[Citation] = field(default_factory=list)
    unsupported: list[UnsupportedSentence] = field(default_factory=list)
    removed_markers: list[int] = field(default_factory=list)


def _best_quote(claim: set[str], passage: str) -> tuple[str, float]:
    """The unit of the passage that holds most of the claim: a sentence, or a
    table row with its headings as the offline engine quotes it
    (docsum.layout), so the quote is what the answer's sentence came from."""
    best, share = "", 0.0
    for sentence in answer_units(passage) or sentences(passage):
        words = set(terms(sentence))
        overlap = len(claim & words) / len(claim) if claim else 0.0
        if overlap > share or not best:
            best, share = sentence, overlap
    return best, share


def cite(answer: str, nodes: list[NodeWithScore], roots: dict[str, str] | None = None) -> tuple[str, CitationReport]:
    """Validate the answer's markers against its passages, map each to its
    document, pages and supporting quote, and flag cited sentences the cited
    passages do not support. Returns the cleaned answer and the report."""
    cleaned, removed = validate_markers(answer, len(nodes))
    report = CitationReport(removed_markers=removed)
    seen: dict[int, Citation] = {}
    for sentence in (s for piece in cited_pieces(cleaned) for s in sentences(piece)):
        cited = markers_in(sentence)
        if not cited:
            continue
        claim = set(terms(strip_markers(sentence)))
        support = 0.0
        for marker in cited:
            node = nodes[marker - 1].node
            quote, share = _best_quote(claim, node.text)
            support = max(support, share)
            if marker not in seen:
                seen[marker] = Citation(
                    marker, node.doc_id, node.path, (roots or {}).get(node.doc_id, ""), tuple(node.pages), quote
                )
        # Judged on all its passages together: a sentence joining two facts
        # may need both.
        together = set().union(*(set(terms(nodes[m - 1].node.text)) for m in cited))
        joint = len(claim & together) / len(claim) if claim else 1.0
        if claim and max(support, joint) < SUPPORT_FLOOR:
            report.unsupported.append(
                UnsupportedSentence(strip_markers(sentence), tuple(cited), round(max(support, joint), 2))
            )
    # Markers as a reader follows them: 1..n in order of first use, one per
    # distinct passage quote (two overlapping passages quoting the same
    # sentence of a document are one source).
    renumber: dict[int, int] = {}
    by_quote: dict[tuple[str, str], int] = {}
    citations: list[Citation] = []
    for old in markers_in(cleaned):
        if old not in seen or old in renumber:
            continue
        citation = seen[old]
        same = by_quote.get((citation.doc, citation.quote))
        if same is not None:
            renumber[old] = same
            continue
        new = len(citations) + 1
        renumber[old] = by_quote[(citation.doc, citation.quote)] = new
        citations.append(dataclasses.replace(citation, marker=new))
    cleaned = _renumbered(cleaned, renumber)
    report.citations = citations
    report.unsupported = [
        dataclasses.replace(u, markers=tuple(dict.fromkeys(renumber.get(m, m) for m in u.markers)))
        for u in report.unsupported
    ]
    return cleaned, report


def _renumbered(answer: str, renumber: dict[int, int]) -> str:
    """The answer with each marker group's numbers mapped, each number once."""

    def one(match: re.Match[str]) -> str:
        numbers = list(dict.fromkeys(renumber.get(int(n), int(n)) for n in match.group(1).split(",")))
        return "".join(f"[{n}]" for n in numbers)

    text = MARKER.sub(one, answer)
    # "[1] … [1][1]" after merging: a marker repeated side by side once.
    return re.sub(r"(\[\d{1,3}\])(?:\s*\1)+", r"\1", text)


def display_names(docs: list[tuple[str, str, str]], shared_paths: set[str]) -> dict[str, str]:
    """How to name each document (doc_id, root, path) to a person: its path
    relative to the build root, or, for a path that more than one root holds
    (`shared_paths`), the path with its root (relative to the current folder
    when inside it)."""
    cwd = os.getcwd()
    names: dict[str, str] = {}
    for doc_id, root, path in docs:
        if path not in shared_paths:
            names[doc_id] = path
            continue
        full = os.path.join(root, path)
        try:
            relative = os.path.relpath(full, cwd)
        except ValueError:  # another drive on Windows
            relative = full
        names[doc_id] = relative if not relative.startswith("..") else full
    return names
