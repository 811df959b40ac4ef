"""Cut documents into token-bounded chunks without altering a single character.

Every chunk is a span ``[start_char, end_char)`` of the original text, so the
store can always point back at the exact source passage (and its pages).

The text is first cut into small contiguous *atoms*: sentences inside
paragraphs, and — only where a sentence is still larger than the chunk budget —
phrases, words and finally character runs (where each of those may be cut is
docsum.ingest.boundaries; this module counts and packs).  Atoms are then packed greedily.
Paragraphs that fit the budget are packed as a unit (a chunk ends at a
paragraph break rather than in the middle of one), while overlaps are built
from whole trailing sentences, which is why paragraphs are always split into
sentences even when they would fit.

Token counts are taken once per atom and summed.  BPE counts are not exactly
additive across a cut, so every finished chunk (and overlap) is re-counted for
real and trimmed if the estimate was optimistic; this keeps the hard
``chunk_size`` guarantee while staying linear in the text length.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from docsum.ingest.boundaries import Cutter, Span, cut_spans, paragraph_cuts, phrase_cuts, sentence_cuts, word_cuts
from docsum.ingest.tables import Table
from docsum.models.tokens import Tokenizer
from docsum.settings import default


@dataclass(frozen=True)
class Chunk:
    text: str  # exactly document_text[start_char:end_char]
    start_char: int
    end_char: int
    pages: tuple[int, ...]  # 1-based pages the span touches; () for page-less documents
    token_count: int  # of node_text
    # The heading lines of the table this chunk starts inside ("" for none):
    # repeated above the rows so every row still says what its columns are.
    heading: str = ""

    @property
    def node_text(self) -> str:
        """The text a node holds: the repeated table heading, then the span."""
        return f"{self.heading}\n{self.text}" if self.heading else self.text


_NON_SPACE = re.compile(r"\S")


def _validate(chunk_size: int, chunk_overlap: int) -> None:
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1 (got {chunk_size})")
    if chunk_overlap < 0:
        raise ValueError(f"chunk_overlap must not be negative (got {chunk_overlap})")
    if chunk_overlap >= chunk_size:
        raise ValueError(f"chunk_overlap ({chunk_overlap}) must be smaller than chunk_size ({chunk_size})")


@dataclass(frozen=True)
class _Budget:
    """Limits in raw encoder tokens.

    Pieces are counted without the tokenizer's margin and the margin is applied
    once to a sum (see ``Tokenizer.raw_budget``); ``raw <= limit`` here is
    exactly ``tokenizer.count(text) <= chunk_size`` for the caller.
    """

    tokenizer: Tokenizer
    limit: int
    overlap: int

    def raw_counts(self, texts: list[str]) -> list[int]:
        if self.tokenizer.margin:
            return Tokenizer(self.tokenizer.encoding).count_many(texts)
        return self.tokenizer.count_many(texts)

    def raw_count(self, text: str) -> int:
        return len(self.tokenizer.encoding.encode_ordinary(text)) if text else 0


def _make_budget(tokenizer: Tokenizer, chunk_size: int, chunk_overlap: int) -> _Budget:
    return _Budget(tokenizer, tokenizer.raw_budget(chunk_size), tokenizer.raw_budget(chunk_overlap))


def _hard_split(text: str, start: int, end: int, budget: _Budget) -> list[tuple[int, int, int]]:
    """Cut an unbreakable run (a long word, CJK without punctuation) by tokens.

    Encodes a window sized from the characters-per-token seen so far, maps the
    token at the budget back to a character offset and verifies the piece with
    a real count.  Only a single character that alone exceeds the budget can
    yield an oversize piece.
    """
    encoding = budget.tokenizer.encoding
    limit = max(1, budget.limit)
    out: list[tuple[int, int, int]] = []
    chars_per_token = 4.0
    pos = start
    while pos < end:
        window = min(end - pos, int(limit * chars_per_token * 1.25) + 16)
        while True:
            ids = encoding.encode_ordinary(text[pos : pos + window])
            if len(ids) > limit or pos + window >= end:
                break
            window = min(end - pos, window * 2)
        if len(ids) <= limit:
            # The window reached the end; the rest is one piece (the window was
            # the whole remainder, so its count is already exact).
            out.append((pos, end, len(ids)))
            break
        k = limit
        while True:
            # Characters fully covered by the first k tokens: a token ending
            # inside a multi-byte character leaves that character to the next
            # piece ("ignore" drops the incomplete tail), so no character is split.
            cut = max(1, len(encoding.decode_bytes(ids[:k]).decode("utf-8", errors="ignore")))
            raw = budget.raw_count(text[pos : pos + cut])
            if raw <= limit or cut <= 1:
                break
            k = max(0, k - max(1, raw - limit))
        out.append((pos, pos + cut, raw))
        chars_per_token = max(0.25, cut / max(1, raw))
        pos += cut
    return out


# --------------------------------------------------------------------------- atoms


@dataclass
class _Atoms:
    starts: list[int]
    ends: list[int]
    counts: list[int]  # raw tokens
    glue: list[bool]  # True: same packing group as the previous atom (a paragraph that fits)


def _refine(  # noqa: C901 (listed when the check came in: simplify, then drop this)
    text: str,
    spans: list[Span],
    counts: list[int],
    budget: _Budget,
    cutters: Sequence[Cutter],
) -> tuple[list[Span], list[int], list[bool]]:
    """Split oversize spans level by level; returns spans, counts and which
    spans came from splitting (those never glue to neighbours)."""
    limit = budget.limit
    split_flags = [False] * len(spans)
    for cutter in cutters:
        if all(c <= limit for c in counts):
            break
        replaced: dict[int, list[Span]] = {}
        pending: list[Span] = []
        for idx, (s, e) in enumerate(spans):
            if counts[idx] > limit:
                parts = cut_spans(s, e, cutter(text, s, e))
                if len(parts) > 1:
                    replaced[idx] = parts
                    pending.extend(parts)
        if not replaced:
            continue
        # One batched count per level keeps counting linear in the text size.
        new_counts = iter(budget.raw_counts([text[s:e] for s, e in pending]))
        next_spans: list[Span] = []
        next_counts: list[int] = []
        next_flags: list[bool] = []
        for idx, span in enumerate(spans):
            pieces = replaced.get(idx)
            if pieces is None:
                next_spans.append(span)
                next_counts.append(counts[idx])
                next_flags.append(split_flags[idx])
            else:
                for part in pieces:
                    next_spans.append(part)
                    next_counts.append(next(new_counts))
                    next_flags.append(True)
        spans, counts, split_flags = next_spans, next_counts, next_flags

    if any(c > limit for c in counts):
        final_spans: list[Span] = []
        final_counts: list[int] = []
        final_flags: list[bool] = []
        for (s, e), c, flag in zip(spans, counts, split_flags):
            if c <= limit:
                final_spans.append((s, e))
                final_counts.append(c)
                final_flags.append(flag)
                continue
            # Leading whitespace belongs to a piece but is stripped from any
            # chunk it starts, so a word that fits without it stays whole (its
            # count without the whitespace is what matters when it leads a chunk).
            m = _NON_SPACE.search(text, s, e)
            core = m.start() if m else e
            core_count = budget.raw_count(text[core:e])
            if core_count <= limit:
                final_spans.append((s, e))
                final_counts.append(core_count)
                final_flags.append(flag)
                continue
            for k, (ps, pe, pc) in enumerate(_hard_split(text, core, e, budget)):
                final_spans.append((s if k == 0 else ps, pe))
                final_counts.append(pc)
                final_flags.append(True)
        spans, counts, split_flags = final_spans, final_counts, final_flags
    return spans, counts, split_flags


def _row_cuts(text: str, start: int, end: int, tables: Sequence[Table]) -> list[int]:
    """Line starts inside a table within text[start:end]: a table's rows are
    its sentences, so a chunk starts at a row, never inside one."""
    cuts: list[int] = []
    for table in tables:
        lo, hi = max(start, table.heading_start), min(end, table.end)
        pos = text.find("\n", lo, hi)
        while pos >= 0:
            if pos > start:
                cuts.append(pos)
            pos = text.find("\n", pos + 1, hi)
    return cuts


def _document_atoms(text: str, budget: _Budget, tables: Sequence[Table] = ()) -> _Atoms:
    paragraphs = cut_spans(0, len(text), paragraph_cuts(text, 0, len(text)))
    sentences: list[Span] = []
    para_of: list[int] = []
    table_starts = [t.heading_start for t in tables]
    table_ends = [t.end for t in tables]  # tables never overlap, so these ascend too
    for p_idx, (s, e) in enumerate(paragraphs):
        cuts = sentence_cuts(text, s, e)
        lo, hi = bisect.bisect_right(table_ends, s), bisect.bisect_left(table_starts, e)
        if lo < hi:  # the paragraph holds (part of) a table
            cuts = sorted(set(cuts).union(_row_cuts(text, s, e, tables[lo:hi])))
        for span in cut_spans(s, e, cuts):
            sentences.append(span)
            para_of.append(p_idx)
    counts = budget.raw_counts([text[s:e] for s, e in sentences])

    para_totals = [0] * len(paragraphs)
    for p_idx, c in zip(para_of, counts):
        para_totals[p_idx] += c

    # Oversize sentences of all paragraphs are refined together (one batched
    # count per level), then mapped back to their paragraphs by position.
    spans, sub_counts, split_flags = _refine(text, sentences, counts, budget, (phrase_cuts, word_cuts))
    para_starts = [s for s, _ in paragraphs]
    glue: list[bool] = []
    prev_para = -1
    for (s, _), was_split in zip(spans, split_flags):
        p_idx = bisect.bisect_right(para_starts, s) - 1
        glue.append(para_totals[p_idx] <= budget.limit and not was_split and p_idx == prev_para)
        prev_para = p_idx
    return _Atoms([s for s, _ in spans], [e for _, e in spans], sub_counts, glue)


def _word_atoms(text: str, budget: _Budget) -> _Atoms:
    words = cut_spans(0, len(text), word_cuts(text, 0, len(text)))
    counts = budget.raw_counts([text[s:e] for s, e in words])
    spans, counts, _ = _refine(text, words, counts, budget, ())
    return _Atoms([s for s, _ in spans], [e for _, e in spans], counts, [False] * len(spans))


# --------------------------------------------------------------------------- packing


def _strip_span(text: str, start: int, end: int) -> tuple[int, int, str]:
    segment = text[start:end]
    stripped = segment.strip()
    if not stripped:
        return start, start, ""
    lead = len(segment) - len(segment.lstrip())
    return start + lead, start + lead + len(stripped), stripped


def _split_further(text: str, start: int, end: int, budget: _Budget) -> list[tuple[int, int, int]]:
    """Re-split one atom whose estimate fit but whose real, stripped count does not.

    Only the stripped core is cut; the atom's leading whitespace stays with the
    first part so the atoms keep tiling the text.
    """
    m = _NON_SPACE.search(text, start, end)
    core = m.start() if m else end
    core_end = core + len(text[core:end].rstrip())
    if core_end - core <= 1:
        return [(start, end, budget.raw_count(text[start:end]))]
    spans = [(core, core_end)]
    counts = [budget.raw_count(text[core:core_end])]
    cutters: tuple[Cutter, ...] = (sentence_cuts, phrase_cuts, word_cuts)
    spans, counts, _ = _refine(text, spans, counts, budget, cutters)
    parts = [(s, e, c) for (s, e), c in zip(spans, counts)]
    parts[0] = (start, parts[0][1], parts[0][2])
    parts[-1] = (parts[-1][0], end, parts[-1][2])  # trailing whitespace rides along
    return parts


# The repeated heading of a chunk starting at a position: (text, raw tokens).
HeadingAt = Callable[[int], tuple[str, int]]


def _no_heading(_pos: int) -> tuple[str, int]:
    return "", 0


def _pack(  # noqa: C901 (listed when the check came in: simplify, then drop this)
    text: str, atoms: _Atoms, budget: _Budget, heading_at: HeadingAt = _no_heading
) -> list[tuple[int, int, str, int, str]]:
    """Greedy packing; returns (start, end, text, real token count, heading) per chunk.

    A chunk that starts inside a table spends ``heading_at``'s tokens on the
    repeated heading, so its budget for the span is that much smaller."""
    limit, overlap_limit = budget.limit, budget.overlap

    def head_cost(atom: int) -> int:
        return heading_at(starts[atom])[1]

    starts, ends, counts, glue = atoms.starts, atoms.ends, atoms.counts, atoms.glue
    if not counts:
        return []
    prefix: list[int] = []
    group_end: list[int] = []

    def index() -> None:
        prefix[:] = [0]
        for c in counts:
            prefix.append(prefix[-1] + c)
        # group_end[idx]: one past the last atom of the group containing idx.
        group_end[:] = [0] * len(counts)
        nxt = len(counts)
        for idx in range(len(counts) - 1, -1, -1):
            group_end[idx] = nxt
            if not glue[idx]:
                nxt = idx

    index()
    out: list[tuple[int, int, str, int, str]] = []
    first = 0  # first atom of the current chunk (overlap included)
    fresh = 0  # first atom not yet in any chunk
    while fresh < len(counts):
        n = len(counts)
        total = prefix[fresh] - prefix[first] + head_cost(first)
        stop = fresh
        while stop < n:
            g_end = group_end[stop]
            g_total = prefix[g_end] - prefix[stop]
            if total + g_total > limit:
                if stop > fresh:
                    break
                # The overlap was sized so this cannot happen unless the group
                # alone is oversize (an indivisible character); give it room.
                first = fresh
                total = head_cost(fresh)
            total += g_total
            stop = g_end

        # Verify with a real count; summed estimates can be a little low.
        resplit = False
        while True:
            s, e, piece = _strip_span(text, starts[first], ends[stop - 1])
            heading = heading_at(s)[0] if piece else ""
            real = budget.raw_count(f"{heading}\n{piece}" if heading else piece)
            if real <= limit:
                break
            if stop - 1 > fresh:
                stop -= 1
            elif first < fresh:
                first += 1
            else:
                # One atom whose estimate fit but whose stripped text does not
                # (BPE counts change at the cut): split it and retry.
                parts = _split_further(text, starts[fresh], ends[fresh], budget)
                if len(parts) > 1:
                    starts[fresh : fresh + 1] = [p[0] for p in parts]
                    ends[fresh : fresh + 1] = [p[1] for p in parts]
                    counts[fresh : fresh + 1] = [p[2] for p in parts]
                    glue[fresh : fresh + 1] = [False] * len(parts)
                    index()
                    resplit = True
                break  # otherwise: a single character; it cannot shrink
        if resplit:
            continue
        # New atoms that are only whitespace (the document's tail) would yield
        # a chunk lying wholly inside the previous one.
        if piece and (not out or e > out[-1][1]):
            out.append((s, e, piece, budget.tokenizer.inflate(real), heading))
        if stop >= n:
            break

        # Overlap: whole trailing atoms of this chunk, newest first, never the
        # entire chunk (so every chunk makes progress).
        ov_first = stop
        ov_total = 0
        while ov_first - 1 > first and ov_total + counts[ov_first - 1] <= overlap_limit:
            ov_first -= 1
            ov_total += counts[ov_first]
        next_group = prefix[group_end[stop]] - prefix[stop]
        while ov_first < stop and ov_total + head_cost(ov_first) + next_group > limit:
            ov_total -= counts[ov_first]
            ov_first += 1
        while ov_first < stop:
            _, _, ov_text = _strip_span(text, starts[ov_first], ends[stop - 1])
            if not ov_text or budget.raw_count(ov_text) <= overlap_limit:
                break
            ov_first += 1
        first = ov_first
        fresh = stop
    return out


# --------------------------------------------------------------------------- public API


def split_document(
    text: str,
    tokenizer: Tokenizer,
    chunk_size: int = default("chunk_size"),
    chunk_overlap: int = default("chunk_overlap"),
    page_starts: list[int] | None = None,
    tables: Sequence[Table] = (),
) -> list[Chunk]:
    """Split ``text`` into overlapping chunks of at most ``chunk_size`` tokens.

    ``page_starts[i]`` is the offset where page ``i + 1`` begins.  The only
    chunks that can exceed ``chunk_size`` are a single character or a single
    token that by itself counts as more than that (tiny budgets, emoji).
    ``tables`` are the tables of ``text`` (docsum.ingest.tables.find_tables):
    they are cut at rows, and a chunk that starts inside one carries the
    table's heading lines in ``Chunk.heading`` (its count includes them).
    """
    _validate(chunk_size, chunk_overlap)
    if not text.strip():
        return []
    budget = _make_budget(tokenizer, chunk_size, chunk_overlap)
    atoms = _document_atoms(text, budget, tables)
    chunks: list[Chunk] = []
    for s, e, piece, count, heading in _pack(text, atoms, budget, _heading_lookup(text, tables, budget)):
        chunks.append(Chunk(piece, s, e, _pages_for(text, page_starts, s, e), count, heading))
    return chunks


def _heading_lookup(text: str, tables: Sequence[Table], budget: _Budget) -> HeadingAt:
    """What a chunk starting at a position repeats: the heading lines of the
    table it starts inside that lie before it (all of them for a start among
    the rows), as many of the last lines as fit in half the budget."""
    if not tables:
        return _no_heading
    heading_starts = [t.heading_start for t in tables]
    memo: dict[tuple[int, int], tuple[str, int]] = {}

    def heading_at(pos: int) -> tuple[str, int]:
        k = bisect.bisect_right(heading_starts, pos) - 1
        if k < 0 or not (tables[k].heading_start < pos < tables[k].end):
            return "", 0
        table = tables[k]
        upto = min(pos, table.heading_end)
        if pos < table.body_start:  # inside the heading: only its whole lines above pos
            upto = text.rfind("\n", table.heading_start, pos)
            if upto < 0:
                return "", 0
        key = (k, upto)
        if key not in memo:
            lines = [ln.rstrip() for ln in text[table.heading_start : upto].split("\n") if ln.strip()]
            heading, count = "", 0
            while lines:
                heading = "\n".join(lines)
                count = budget.raw_count(heading + "\n")
                if count <= budget.limit // 2:
                    break
                lines.pop(0)
                heading, count = "", 0
            memo[key] = (heading, count)
        return memo[key]

    return heading_at


def _pages_for(text: str, page_starts: list[int] | None, start: int, end: int) -> tuple[int, ...]:
    """Pages holding at least one non-whitespace character of ``text[start:end]``.

    A chunk that runs across a blank page (only the page separator lies in it)
    must not cite that page.
    """
    if not page_starts:
        return ()
    first = max(0, bisect.bisect_right(page_starts, start) - 1)
    last = max(first, bisect.bisect_right(page_starts, end - 1) - 1)
    pages: list[int] = []
    for page in range(first, last + 1):
        lo = max(start, page_starts[page])
        hi = min(end, page_starts[page + 1]) if page + 1 < len(page_starts) else end
        if lo < hi and _NON_SPACE.search(text, lo, hi):
            pages.append(page + 1)
    return tuple(pages)


def split_tokens(text: str, chunk_size: int, chunk_overlap: int, tokenizer: Tokenizer) -> list[str]:
    """Split ``text`` into stripped pieces of at most ``chunk_size`` tokens on
    word boundaries (characters for over-long words), consecutive pieces
    sharing up to ``chunk_overlap`` tokens of whole words."""
    return list(iter_split_tokens(text, chunk_size, chunk_overlap, tokenizer))


# Word atoms cost ~150 bytes each; a whole 50 MB text at once would need well
# over a gigabyte. Long texts are packed a window at a time instead.
WINDOW_CHARS = 1 << 20


def iter_split_tokens(text: str, chunk_size: int, chunk_overlap: int, tokenizer: Tokenizer) -> Iterator[str]:
    """The pieces of ``split_tokens``, produced lazily with memory bounded by a
    window of the text rather than by the whole text (take the first piece of
    a huge text without splitting all of it).

    A window is packed, every piece but its last is emitted, and the next
    window starts at that last piece's first atom. That piece began with its
    overlap and is packed greedily from the same atom in both windows, so the
    result is the single-pass result, piece for piece (except around a word
    longer than a whole piece, whose character runs may then fall
    differently; every piece still respects the limits).
    """
    _validate(chunk_size, chunk_overlap)
    if not text.strip():
        return
    budget = _make_budget(tokenizer, chunk_size, chunk_overlap)
    n = len(text)
    window = max(WINDOW_CHARS, chunk_size * 64)
    pos = 0
    last_end = -1
    while True:
        end = n if n - pos <= window else _window_end(text, pos, pos + window)
        segment = text[pos:end]
        pieces = _pack(segment, _word_atoms(segment, budget), budget)
        final = end >= n
        if not final and len(pieces) < 2:
            window *= 2  # a window must hold at least one finished piece
            continue
        for _s, e, piece, _, _ in pieces if final else pieces[:-1]:
            if pos + e > last_end:
                last_end = pos + e
                yield piece
        if final:
            return
        # Restart at the last piece's first atom: word atoms carry the
        # whitespace before the word, which the piece's text was stripped of.
        restart = pieces[-1][0]
        while restart > 0 and segment[restart - 1].isspace():
            restart -= 1
        pos += max(restart, 1)


def _window_end(text: str, start: int, limit: int) -> int:
    """A cut at most ``limit``, at the start of a whitespace run when there is
    one in the second half of the window (so no word is cut in two)."""
    half = start + (limit - start) // 2
    cut = max(text.rfind(" ", half, limit), text.rfind("\n", half, limit))
    if cut <= half:
        return limit
    while cut > half and text[cut - 1].isspace():
        cut -= 1
    return cut
