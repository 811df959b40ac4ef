"""How the offline engine ranks the units of an answer beyond the question's
words: a table row whose label names what the question asks for, units too
long to be one answer, and a form's certification text, which answers no
question a person asks."""

from __future__ import annotations

import math
import re

from docsum.layout import OPEN_ENDINGS, is_title
from docsum.lexical import terms

# A table row quoted by docsum.tablerows ("Total net sales: $81,797 million,
# three months ended July 1, 2023; …"): its label names what its figures are.
_ROW_QUOTE = re.compile(r"^(?P<label>[^:]{2,120}?): (?=[-–—$(]?\d|[—–][;.])")
# A row whose label is the thing asked for ("Acme's total net sales",
# "inventory levels") is the answer to a question about a figure; the bonus
# scales with the share of the label's words the question holds, so
# "Percentage of total net sales" ranks below "Total net sales".
ROW_LABEL_BONUS = 1.0
MIN_LABEL_PRECISION = 0.5
# A label the question names only in part ("Common stock" for "stock
# repurchase activities", "Other current liabilities" for "legal
# contingencies … provisions … for these liabilities") is the thing asked
# only when its named words carry at least this share of the question's
# weight. Below it, one incidental word of a long question had made a
# balance-sheet row lead above the sentence with the answer (bench/RESULTS.md,
# section 18, "The sixth round").
MIN_PARTIAL_LABEL_SHARE = 0.12
# Past this many words a unit is rarely one answer: a glossary, a list of
# risks or a run of cells read as prose. Its score shrinks in proportion.
LONG_UNIT_WORDS = 60
# Words of a row's label that say which period, not which figure ("First
# Quarter", "Three Months Ended"): no match for a question's "quarters".
_PERIOD_TERMS = frozenset({"quarter", "first", "second", "third", "fourth", "month", "year", "period", "fiscal"})
# Words of a label that name a statement's section, not a figure:
# "Operating activities" is the operating cash flow a question about "cash
# flows from operations" asks for, though the question never says "activities".
# "Changes in operating assets and liabilities" is a section of the cash
# flow statement, not the change a question asks about (a question on how
# one product line's revenue changed was answered with "Unearned revenue
# (Changes in operating assets and liabilities)").
_CATEGORY_TERMS = frozenset({"activity", "chang"})
# For a question on a level ("How have the inventory levels changed?"),
# "changed" compares balances: it weighs as a frame word (frame_terms), or
# the cash flow statement's "Changes in operating assets" rows led.
_LEVEL_CHANGE = frozenset({"chang"})
# Words of a question that say where or when to look, not what to find
# ("reported in the most recent quarter", "disclosed in the 10-Q"): grounding
# and "the latest" have already chosen the filing, so in an answer's
# ranking they count at FRAME_WEIGHT. At full weight a sentence about a
# write-down "in the second quarter" that mentions "cost of sales" led the
# answer to "What revenue did Acme report from its sales in the most recent
# quarter?", above the "Net revenue" row.
FRAME_TERMS = _PERIOD_TERMS | {"quarterly", "recent", "latest", "report", "fil", "filing", "disclos", "mention"}
FRAME_WEIGHT = 0.25
# A document's parts a question names to say where to look ("the stated tax
# rate in the financial statements compared with the discussion on tax
# issues in the notes", "the management discussion on debt strategy"):
# their words are frame too. At full weight the auditor's review report
# ("the related condensed consolidated financial statements") and "The
# metrics are disclosed in the MD&A or the Notes to Financial Statements"
# led the answer on a company's tax rate, above "Our effective tax rate was
# 18% and 19% …".
_DOCUMENT_PART = re.compile(
    r"\b(?:(?:consolidated |condensed |interim )*financial statements|(?:the )?notes(?: section)?"
    r"|management(?:'s|’s)? discussion(?: and analysis)?|MD&A|(?:the )?discussion (?:on|of))\b",
    re.IGNORECASE,
)


def frame_terms(question: str) -> frozenset[str]:
    """FRAME_TERMS and the words of the document parts `question` names
    (see _DOCUMENT_PART)."""
    parts = " ".join(m.group(0) for m in _DOCUMENT_PART.finditer(question))
    compared = _LEVEL_CHANGE if asks_level(question) else frozenset()
    return FRAME_TERMS | frozenset(answer_terms(parts)) | compared


# Stems (docsum.lexical.terms, folded) a question and a table's label use for the
# same figure: "sales" for "revenue", "buybacks" for "repurchases",
# "spending" or "costs" for "expenses".
_LABEL_SYNONYMS = {
    "sal": "revenue",
    "revenu": "revenue",
    "buyback": "repurchas",
    "expenditur": "expens",
    "spend": "expens",
    "cost": "expens",
    "operational": "operat",
    "operation": "operat",
    "earning": "income",
}
# Abbreviations a question uses for what a filing spells out.
_ABBREVIATIONS = {
    re.compile(r"\bR&D\b"): "research and development",
    re.compile(r"\bM&A\b"): "mergers and acquisitions",
    # Not an abbreviation but the everyday word for what filings call a
    # repurchase ("How many shares did Acme buy back …?").
    re.compile(r"\b(?:buy|bought|buying)[ -]?backs?\b", re.IGNORECASE): "repurchase",
}
# Text every filing carries for the form's sake (officers' certifications,
# exhibit and XBRL notes, the forward-looking-statements notice): it holds
# the words of many questions ("any change … during the most recent fiscal
# quarter") and answers none.
_FORM_TEXT = (
    "based on my knowledge",
    "i have reviewed this",
    "disclosed in this report any change",
    "any fraud, whether or not material",
    "fully complies with the requirements of section 13(a)",
    "designed such disclosure controls",
    "to which this certification",
    "hereby certif",
    "fairly presents, in all material respects",
    "we have reviewed the accompanying",
    "standards of the public company accounting oversight board",
    "pursuant to section 906",
    "inline xbrl",
    "forward-looking statements may appear",
    "within the meaning of the private securities litigation reform act",
    "we are aware that our report dated",
    "copies of",
)


def spelled_out(question: str) -> str:
    """The question with its abbreviations written out beside them ("R&D"
    is two one-letter words, which no term matches)."""
    for pattern, words in _ABBREVIATIONS.items():
        question = pattern.sub(rf"\g<0> ({words})", question)
    return question


# A table's lead-in: "… was as follows:", "… (in millions, except …):".
_LEAD_IN = re.compile(r"\bas follows\b|\(in (?:millions|thousands|billions)\b", re.IGNORECASE)


def _runs_into_headings(text: str) -> bool:
    """A table's lead-in run into its column headings ("… was as follows (in
    millions …): Periods Total Number of Shares Purchased …"): four words or
    more after the colon, title-cased, with no list's commas."""
    lead_in, colon, headings = text.rpartition(": ")
    headings = headings.rstrip(".")
    return (
        bool(colon and _LEAD_IN.search(lead_in))
        and len(headings.split()) >= 4
        and "," not in headings
        and is_title(headings)
    )


def is_fragment(unit: str) -> bool:
    """Half a sentence: one that a passage's edge or a page break cut ("… the
    three months ended July 1," or "basis, developments in our legal
    proceedings …", "… shares of our common stock for", where a page break
    cut it: its last word is one no sentence ends on), or a table's
    lead-in ("… was as follows (in millions):"), alone or run into the
    table's headings.
    Quoted, it runs into the next unit with nothing between them."""
    text = unit.strip()
    if _ROW_QUOTE.match(text):
        return False  # a table row ("eWidget®: $39,669, …")
    first = text.split(" ", 1)[0]
    last = text.rsplit(" ", 1)[-1]
    return (
        text.endswith((",", ":"))
        or (first[:1].islower() and first.lower() == first)
        or last in OPEN_ENDINGS
        or _runs_into_headings(text)
    )


# A cover page's lines: the registrant's address and telephone number, the
# form's title ("FORM 10-Q For the Quarterly Period Ended June 30, 2023").
_COVER = re.compile(r"\(\d{3}\)\s?\d{3}-\d{4}|^form 10-[qk]\b", re.IGNORECASE)
# An exhibit index's entry: the exhibit's number, its title, and the form it
# was filed with or a certification ("4.1 Officer’s Certificate of the
# Registrant, dated as of May 10, 2023, including forms of global notes
# representing the 4.421% Notes due 2026 … 8-K" led an answer on a company's
# tax rate with its percentages). A contract's numbered clause is no entry.
_EXHIBIT = re.compile(
    r"^\d{1,3}\.\d{1,2}[*†#+]*\s+(?=[A-Z][a-z])"
    r"(?=.*(?:\b(?:8-K|10-K|10-Q|S-[1-8])\b|\bfiled herewith\b|\bfurnished herewith\b|\bCertificat(?:e|ion)\b))"
)


def is_form_text(unit: str) -> bool:
    low = unit.lower()
    text = unit.strip()
    return any(cue in low for cue in _FORM_TEXT) or bool(_COVER.search(text) or _EXHIBIT.match(text))


# A sentence that only says where to read ("Refer to Note 10 – Debt … for
# further discussion", "Refer also to the other information set forth in
# this Form 10-Q", "For a discussion of … market risk, refer to … Part II,
# Item 7A", "See Item 1 of Part I …", "This report should be read in
# conjunction with the Consolidated Financial Statements in our Form 10-K",
# "We have defined certain terms and abbreviations used throughout our Form
# 10-Q in "Key Terms"", "… market risk is set forth below and in Item 2 of
# Part I"): it shares the question's words and answers nothing.
_POINTER = re.compile(
    r"^(?:refer (?:also )?to|see|for (?:additional|further|more) (?:information|discussion),? (?:see|refer))\b"
    r"|^for a discussion of [^.]*?, (?:see|refer to)\b"
    r"|\b(?:terms|abbreviations) used throughout\b"
    r"|\bshould be read in conjunction with\b"
    r"|\b(?:is|are) (?:described|discussed|disclosed|included|set forth)(?: below and)? in (?:the )?(?:part|item|note|md&a)\b",
    re.IGNORECASE,
)
_AMOUNT = re.compile(r"[$€£%]|\b(?:million|billion)\b", re.IGNORECASE)


def is_pointer(unit: str) -> bool:
    """A cross-reference to another part of the document, holding no amount
    of its own (see _POINTER)."""
    return bool(_POINTER.search(unit)) and not _AMOUNT.search(unit)


# A unit this short that is no table row is a heading or a fragment.
MIN_ANSWER_WORDS = 4
# Four amounts or percentages in a row with no word between them: a chart's
# or a table's cells run together ("… of total revenue) $4.4 $4.1 23.8%
# 35.1% Q1 2022 Q1 2023 …"), which no reader can take apart. A sentence
# lists amounts with words ("$740 million, $1.5 billion, and $3.0 billion").
_AMOUNT_CELL = r"(?:\(?\$\s?\d[\d,.]*\)?|\(?\d[\d,.]*\)?%)"
_CELLS_RUN_TOGETHER = re.compile(rf"{_AMOUNT_CELL}(?:\s+{_AMOUNT_CELL}){{3}}")


def is_quotable(unit: str) -> bool:
    """A unit an answer may quote: not a heading (short or all capitals,
    "ITEM 1. FINANCIAL STATEMENTS"), not the form's own words
    (`is_form_text`), not half a sentence (`is_fragment`), not a pointer to
    another part of the document (`is_pointer`), not cells run together
    (`_CELLS_RUN_TOGETHER`)."""
    text = unit.strip()
    return not (
        len(text.split()) < MIN_ANSWER_WORDS
        or text.upper() == text
        or is_form_text(text)
        or is_fragment(text)
        or is_pointer(text)
        or bool(_CELLS_RUN_TOGETHER.search(text))
    )


def folded(term: str) -> str:
    """A term without the final "e" docsum.lexical.stem leaves on some forms,
    so "revenue" meets "revenues" and "repurchase" meets "repurchased"."""
    return term[:-1] if len(term) > 4 and term.endswith("e") else term


# A question asks for a role with a noun ("the director of", "her spouse");
# the sentence that answers says it with a verb or a kinder noun ("directed
# by", "the second wife of"). Terms (folded stems) of both sides meet here.
_SAID_AS = {
    "wife": "spous",
    "wiv": "spous",
    "husband": "spous",
    "marri": "spous",
    "marry": "spous",
    "director": "direct",
    "founder": "found",
    "creator": "creat",
    "composer": "compos",
    "inventor": "invent",
    "publisher": "publish",
    "designer": "design",
    "owner": "own",
}


def answer_terms(text: str) -> list[str]:
    """docsum.lexical.terms, folded (see folded), a role's noun as its verb
    (see _SAID_AS): used to rank an answer's units only, so stored indexes
    and summaries are untouched."""
    return [_SAID_AS.get(f, f) for f in map(folded, terms(text))]


# The group a quote names after its label ("More Personal Computing
# (Revenue)", docsum.tablerows): it says which table part, not which figure.
_GROUP = re.compile(r"^(?P<own>.*\S) \((?P<group>[^()]+)\)$")
# A question about a share, a rate or a margin is answered by a row of
# percentages; any other question is not ("% of net revenue" for "total
# net sales").
_ASKS_SHARE = re.compile(
    r"%|percent|\bshare\b|\bratio\b|\brate\b|\bmargin\b|proportion|\brelative to\b"
    r"|\bcompared? (?:to|with) (?:its |the |total |net )*(?:revenues?|sales)\b",
    re.IGNORECASE,
)


def _own_and_group(label: str) -> tuple[str, str]:
    """A quoted row's own label and the group it is quoted with ("" if none)."""
    grouped = _GROUP.match(label)
    return (grouped.group("own"), grouped.group("group")) if grouped else (label, "")


def _row_label(unit: str) -> str | None:
    """A quoted row's own label, in lower case (None for anything else)."""
    row = _ROW_QUOTE.match(unit)
    return _own_and_group(row.group("label"))[0].lower() if row else None


def asks_share(question: str) -> bool:
    return bool(_ASKS_SHARE.search(question))


def row_label_bonus(
    text: str, asked: dict[str, float], shares: bool = False, definitions: frozenset[str] = frozenset()
) -> float:
    """ROW_LABEL_BONUS for a table row whose label the question names, more
    the more of the label it names and the more of the question's weight the
    label and its group hold (a rare word such as "inventories" counts more
    than "total"); 0 for anything else, and for a row of percentages unless
    `shares` (the question asks for one). Words a question and a table use
    for the same figure ("sales" and "revenue") match. A sentence defining
    one of `definitions` with the question's words (see defined_labels)
    counts as a row of it: quoted beside the row, it says why that row
    answers, and it keeps the row's label named when a later part of the
    context is read."""
    row = _ROW_QUOTE.match(text)
    defined = None if row else _definition_of(text, definitions)
    if not asked or (row is None and defined is None):
        return 0.0
    if row is not None:
        parts = text[row.end() :].rstrip(".").split("; ")
        if not shares and all(p.split(",")[0].strip().endswith("%") for p in parts):
            return 0.0
    label = row.group("label") if row is not None else defined.group("term") if defined is not None else ""
    own_text, group_text = _own_and_group(label)
    weights: dict[str, float] = {}
    for t, w in asked.items():
        key = _LABEL_SYNONYMS.get(t, t)
        weights[key] = max(w, weights.get(key, 0.0))

    def words(label: str) -> set[str]:
        # A number names no figure ("Due after 10 years" is not about a "10-Q").
        return (
            {_LABEL_SYNONYMS.get(t, t) for t in answer_terms(label) if not t.isdigit()}
            - _PERIOD_TERMS
            - _CATEGORY_TERMS
        )

    own = words(own_text)
    named = own & weights.keys()
    if not own or not named or len(named) / len(own) < MIN_LABEL_PRECISION:
        return 0.0
    # "Cost of sales" is a cost, "Proceeds of divestitures" proceeds: a
    # question must name what the label's head word says, not only its "of".
    head = words(own_text.split(" of ", 1)[0])
    if head and not head & named:
        return 0.0
    held = sum(weights[t] for t in named | (words(group_text) & weights.keys())) / sum(weights.values())
    if len(named) < len(own) and held < MIN_PARTIAL_LABEL_SHARE:
        return 0.0
    # The definition says why the row answers; the row, with the figure, leads.
    share = DEFINITION_BONUS_SHARE if row is None else 1.0
    return share * ROW_LABEL_BONUS * math.sqrt(len(named) / len(own) * held)


# A sentence that says what a table's line holds ("Technology and content
# costs include payroll … for employees involved in the research and
# development of new and existing products"): the filing's own name for a
# figure a question asks for by another ("Acme's R&D expenditure").
_DEFINES = re.compile(
    r"^(?P<term>[A-Z][\w&,' -]{2,80}?) (?:costs |expenses |charges )?"
    r"(?:include|includes|consist of|consists of|comprise|comprises) (?P<what>.+)$"
)


def _definition_of(unit: str, definitions: frozenset[str]) -> re.Match[str] | None:
    """`unit` as a sentence defining one of `definitions` (lower case), or None."""
    defined = _DEFINES.match(unit.strip())
    return defined if defined and defined.group("term").lower() in definitions else None


# A definition lists many things ("… associated with finance, legal,
# facilities …", "… engaged in marketing and selling activities"): it names
# what the question asks for only when it holds two words the question
# writes together ("research and development") and they carry this share of
# the question's weight, not words scattered through a list.
MIN_DEFINITION_SHARE = 0.25
# The share of a row's label bonus a sentence defining its label earns.
DEFINITION_BONUS_SHARE = 0.5


def _pairs(words: list[str]) -> set[tuple[str, str]]:
    return set(zip(words, words[1:]))


def defined_labels(
    units: list[str], question: list[str], asked: dict[str, float], where: frozenset[str] = frozenset()
) -> tuple[dict[str, float], frozenset[str]]:
    """Weights for the words of a row label that the document defines with
    the question's words (see _DEFINES), so row_label_bonus reads the label
    as named: each of its words weighs as much as the heaviest question word
    its definition holds. `question` is the question's terms in order
    (answer_terms), `asked` their weights. Only a term that is some row's
    label among `units` counts; a sentence about "our operating expenses"
    defines no row. The question's words in `where` (its names, when and
    where to look) and its numbers say nothing of what is asked: they never
    make a definition. Also returns the labels so defined (lower case), for
    row_label_bonus."""
    labels = {label for label in map(_row_label, units) if label}
    what_asked = {t: w for t, w in asked.items() if t not in where and not t.isdigit()}
    phrases = _pairs([t for t in question if t in what_asked])
    total = sum(what_asked.values())
    found: dict[str, float] = {}
    terms_defined: set[str] = set()
    for unit in units:
        defined = _DEFINES.match(unit.strip())
        if defined is None or defined.group("term").lower() not in labels:
            continue
        term_words = set(answer_terms(defined.group("term")))
        shared = {t for pair in phrases & _pairs(answer_terms(defined.group("what"))) for t in pair} - term_words
        held = [what_asked[t] for t in shared]
        if held and sum(held) >= MIN_DEFINITION_SHARE * total:
            terms_defined.add(defined.group("term").lower())
            for t in term_words - asked.keys():
                found[t] = max(max(held), found.get(t, 0.0))
    return found, frozenset(terms_defined)


def rows_before_definitions(chosen: list[tuple[int, str]], definitions: frozenset[str]) -> list[tuple[int, str]]:
    """`chosen` (an answer's units, best first) with each sentence defining
    one of `definitions` moved to just after the row it defines, when that
    row is chosen too: the row holds the figure asked for, the definition
    says why it answers. Read with the question's words, a definition can
    outscore its row, and its forty words had pushed the row's figure past
    the answer's first lines ("Technology and content costs include …
    research and development …" before the "Technology and content" row)."""
    if not definitions:
        return chosen
    ordered = list(chosen)
    for unit in chosen:
        defined = _definition_of(unit[1], definitions)
        term = defined.group("term").lower() if defined else None
        rows = [i for i, (_, text) in enumerate(ordered) if _row_label(text) == term]
        if term is None or not rows or rows[0] < ordered.index(unit):
            continue
        ordered.remove(unit)
        ordered.insert(rows[0], unit)  # the row moved up one place: just after it
    return ordered


# A question about one quarter ("in its Q3 2023 10-Q", "the most recent
# quarter") is answered by that quarter's figures, not by the year to date
# a filing reports beside them: one filing's "During the nine months ended
# July 1, 2023, the Company repurchased 365 million shares …" led the answer to
# "what was the scale of these buybacks in its Q3 2023 10-Q", above "The
# Company repurchased $18.0 billion … during the third quarter of 2023".
_ASKS_QUARTER = re.compile(r"\bQ[1-4]\b|\bquarter(?:ly)?\b|\bthree months\b", re.IGNORECASE)
_ASKS_LONGER = re.compile(
    r"\b(?:six|nine|twelve) months\b|\byear[- ]to[- ]date\b|\bYTD\b|\b(?:first|second) half\b"
    r"|\b(?:fiscal |full |calendar )?year\b|\bannual\b|\bcumulative\b",
    re.IGNORECASE,
)
_LONGER_PERIOD = re.compile(r"\b(?:six|nine|twelve) months\b|\bYTD\b|\byear[- ]to[- ]date\b", re.IGNORECASE)
_ONE_QUARTER = re.compile(r"\bthree months\b|\bquarter\b|\bQ[1-4]\b", re.IGNORECASE)
OTHER_PERIOD_FACTOR = 0.8


def asks_one_quarter(question: str) -> bool:
    return bool(_ASKS_QUARTER.search(question)) and not _ASKS_LONGER.search(question)


# A question about a level ("How have Acme's inventory levels changed …",
# "the cash position") asks for a balance at a date, not for a period's
# flow: the cash flow statement's "Inventories (Changes in operating assets
# and liabilities): (2,548) million, six months ended April 1, 2023" led
# that answer, above the balance sheet's "Inventories: 7,351 million, July
# 1, 2023". So does one about a date's amount ("How much cash did Acme
# have at the end of Q2 2023?", "… as of June 30, 2023"): the quarter's
# financing cash flows had led it.
_ASKS_LEVEL = re.compile(
    r"\blevels?\b|\bbalances?\b(?! sheet)|\bposition\b|\bon hand\b|\bat the end of\b|\bas of\b", re.IGNORECASE
)
_FLOW = re.compile(
    r"\bmonths ended\b|\bYTD\b|\byear[- ]to[- ]date\b|\bduring (?:the )?(?:Q[1-4]|quarter)\b", re.IGNORECASE
)


def asks_level(question: str) -> bool:
    return bool(_ASKS_LEVEL.search(question))


def period_factor(text: str, one_quarter: bool, level: bool = False) -> float:
    """How much a unit's period fits the one asked for: OTHER_PERIOD_FACTOR
    for a unit that gives only a longer period's figures (six or nine months,
    the year to date) when the question asks about one quarter, and again
    for a period's flow when it asks for a level (see _ASKS_LEVEL); 1
    otherwise."""
    factor = 1.0
    if one_quarter and _LONGER_PERIOD.search(text) and not _ONE_QUARTER.search(text):
        factor *= OTHER_PERIOD_FACTOR
    if level and _FLOW.search(text):
        factor *= OTHER_PERIOD_FACTOR
    return factor
