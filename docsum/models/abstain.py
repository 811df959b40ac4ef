"""Saying "not in these documents": the pieces every engine and retriever share.

Three signals end in an abstention (exit 5, the abstention text on stdout,
no sources):

- a relevance floor on embedding scores, per scorer (`relevance_floor`): a
  document scoring below it is never handed on, so `--top-k` is a maximum,
  not a quota;
- grounding (`missing_names`): a question that names something (a company, a
  person, a year, a quarter such as "Q1") cannot be answered from a document
  that never mentions it; the offline engine drops such documents;
- the answer step itself: a model (or the offline engine) replying that the
  passages do not answer (`says_cannot_answer`).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter, OrderedDict
from dataclasses import dataclass, field

from docsum.lazyre import LazyPattern
from docsum.lexical import CAPITAL, LEXICAL_EMBED_MODEL, MONTH_PATTERN, SMALL, STOPWORDS, terms
from docsum.models.localembed import LOCAL_EMBED_MODEL
from docsum.models.prompts import ABSTENTION_TEXT

# Relevance floors, per retriever and scorer: a document below its floor is
# never handed on, so --top-k is a maximum, not a quota. Calibrated on the SEC
# 10-Q and MuSiQue question sets together (bench/RESULTS.md, section 10):
# each is the highest value that keeps every gold document the retriever
# ranks in the top 3 (a floor set on the best document alone dropped the
# second hop of multi-hop questions), so the floor only stops what shares
# next to nothing with the question; grounding and the answer step do the rest.
#
# bm25 and fused: the question's share the document holds (its content words,
# weighted by IDF, found in its summary or nodes; docsum.evidence
# DocumentEvidence.coverage). Fusion is by rank and BM25 is unbounded, so
# neither score can carry a floor; the share is comparable across questions.
COVERAGE_FLOOR = 0.1
# ... and a document must hold at least this part of what the best chosen
# document holds: "How much did Brindle & Daughter pay for the oven" is not
# for a newsletter that shares only "pay" (0.15 against the bakery's 0.85).
# At 0.25 every gold document ranked in the top 3 stays, on both sets.
RELATIVE_COVERAGE_FLOOR = 0.25
# ... and the chosen documents together must hold at least this share of the
# question (DocumentEvidence.joint_coverage): each may hold a little, but if
# between them they miss most of what is asked ("who is captain hale in
# the private vow" against a museum, a thriller and a supermarket chain
# that share "private" and "captain"), nothing answers it. Set on MuSiQue
# (bench/RESULTS.md, section 10): 0.35 turned 5 of its 31 answered
# hidden-gold questions into abstentions and cost 2 of 138 answers (two
# sub-questions without a referent, "In what year did the founder retire?");
# 0.4 cost 3 and 0.45 cost 6. Checked on the SEC filings afterwards, where
# the chosen filings together hold over half of every question.
JOINT_COVERAGE_FLOOR = 0.35
# embedding: the cosine, per embedding model. A server's model has no default
# (its scale is its own): `--min-score` sets one.
EMBEDDING_FLOORS: dict[str, float] = {LEXICAL_EMBED_MODEL: 0.02}
# Summaries embedded by these are offline; with them the fused retriever's
# cosine signal is one of three, and the share floor applies.
_OFFLINE_EMBEDDERS = (None, LEXICAL_EMBED_MODEL, LOCAL_EMBED_MODEL)


def relevance_floor(retriever: str, embedding_model: str | None, override: float | None = None) -> float | None:
    """The relevance a document must reach to be handed on, for this
    retriever over summaries embedded by `embedding_model` (None: mixed or
    missing vectors, which are scored lexically). LLM choice has its own
    "none of these" and no floor."""
    if override is not None:
        return override
    if retriever in ("bm25", "fused"):
        return COVERAGE_FLOOR if retriever == "bm25" or embedding_model in _OFFLINE_EMBEDDERS else None
    if retriever == "embedding":
        return EMBEDDING_FLOORS.get(embedding_model or LEXICAL_EMBED_MODEL)
    return None


def joint_floor(floor: float | None) -> float | None:
    """The share of the question the chosen documents must hold together,
    for a share floor of `floor` (None: no floor, none either). `--min-score`
    moves it in proportion, so 0 turns both off."""
    if floor is None:
        return None
    return min(JOINT_COVERAGE_FLOOR, floor * JOINT_COVERAGE_FLOOR / COVERAGE_FLOOR)


# What a reply that declines to answer says. Matched on the opening sentence
# only, so an answer that merely mentions a gap ("The report does not give a
# date, but the bridge opened after the flood") is still an answer.
_CANNOT = LazyPattern(
    r"^\W*(?:"
    r"the (?:documents?|passages?|context|material|text|sources?)(?: provided| given| above)? (?:do|does|did) not"
    r" (?:answer|contain|provide|mention|say|include|state|specify|give|address|cover)"
    r"|(?:i|we) (?:can ?not|can't|cannot|am unable to|are unable to|could not|couldn't|do not|don't) (?:answer|find|determine|tell|know)"
    r"|(?:i|we) (?:do not|don't) have (?:enough )?information"
    r"|there is no (?:information|mention|answer|data)"
    r"|no (?:information|answer) (?:is|was) (?:given|provided|available|found)"
    r"|(?:the )?(?:answer|information) (?:is )?not (?:found|available|provided|given|mentioned|stated)"
    r"|(?:it is )?not (?:mentioned|stated|specified|provided|given) in the (?:documents?|passages?|context|material)"
    r"|unknown\W*$|n/?a\W*$|none\W*$|not in (?:the|these) documents"
    r")",
    re.IGNORECASE,
)
# A decline is a short reply: a long one that opens with a caveat still answers.
MAX_DECLINE_CHARS = 400


def says_cannot_answer(reply: str) -> bool:
    text = " ".join(reply.split())
    if not text:
        return False
    if text.startswith(ABSTENTION_TEXT.rstrip(".")):
        return True
    return len(text) <= MAX_DECLINE_CHARS and bool(_CANNOT.search(text))


# Words that are capitalised because of where they stand or what they are,
# not because they name something a document must mention.
_NOT_NAMES = frozenset(
    """what which who whom whose when where why how is are was were do does did can could
    should would will has have had in on at for from of to by with as and or but if the a an
    this that these those there it its please list give describe explain compare analyze
    analyse examine outline summarize summarise tell name identify according based
    january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday""".split()
)
# Hyphenated words stay whole ("10-Q", "Sha-tao"), so a form code is one key.
_TOKEN = re.compile(r"[^\W_]+(?:-[^\W_]+)*(?:['’][^\W_]+)?", re.UNICODE)
# Parts of a period: "Q3 2023", "H1 FY2024".
_PERIOD = re.compile(r"^(?:q[1-4]|h[12]|fy\d{2,4}|\d{4})$")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|\n)\s*[\"'“(\[]*$")


def fold(text: str) -> str:
    """Lower case without accents, so "Vellmarskold" finds "Vellmarsköld"."""
    if text.isascii():
        return text.lower()  # what the decomposition below gives ASCII, at a fraction of its cost
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


# A name in capitals with a small "s": an acronym's plural.
_ACRONYM_PLURAL = re.compile(r"[A-Z]{2,}s")


# A document's words repeat: each distinct one is folded and cut once per
# process (an offline question keys some 6,000 words of 3 to 9 documents).
@functools.lru_cache(maxsize=1 << 16)
def _key(word: str) -> str:
    """Folded, without a possessive, apostrophes and a plural or final "e", so "Services",
    "Service" and "service" meet (the lexical stemmer keeps them apart)."""
    if _ACRONYM_PLURAL.fullmatch(word):
        word = word[:-1]  # "DVDs" is the plural of "DVD"
    word = fold(word)
    if word.endswith(("'s", "’s")):
        word = word[:-2]
    # An apostrophe inside a name is often left out ("Lin Sha-t'ao" is also
    # written "Lin Sha-tao", "O'Neill" "ONeill"): both spellings meet.
    word = word.replace("'", "").replace("’", "")
    if word.isalpha() and len(word) > 4:
        word = word.removesuffix("s").removesuffix("e")
    elif len(word) > 2 and word[-1] == "s" and any(c.isdigit() for c in word) and any(c.isalpha() for c in word[:-1]):
        word = word[:-1]  # "10-Qs" and "XR7s" are plurals of "10-Q" and "XR7"; "1990s" is a decade
    return word


def question_names(question: str) -> list[str]:
    """The names and figures a question hinges on, as folded keys: runs of
    capitalised words that are not there only because they open the sentence
    ("Mara J. Quinn", "Glass Harbor" become one phrase each, words joined by a
    space), numbers, and codes mixing letters and digits ("Q1", "FY2023";
    "the first quarter of 2023" is "Q1 2023")."""
    return _names_of(question)[0]


def subject_names(question: str) -> set[str]:
    """The question's names that own what it asks about, written with a
    possessive: "Acme" in "Acme's Services segment revenue". Their thing is
    asked about, so a source must be about them, not mention them in passing
    (see `missing_names`)."""
    return _names_of(question)[1]


@dataclass
class _NameRun:
    """The names of a question as its words are read: a run of capitalised
    words is one name, closed by any other word."""

    question: str
    out: list[str] = field(default_factory=list)
    owners: set[str] = field(default_factory=set)
    run: list[str] = field(default_factory=list)
    start: int = 0
    owns: bool = False

    def add(self, key: str, at: int, owned: bool) -> None:
        if not self.run:
            self.start = at
        self.run.append(key)
        self.owns = owned

    def close(self) -> None:
        owns, self.owns = self.owns, False
        if not self.run:
            return
        lone_initial = len(self.run) == 1 and len(self.run[0]) < 2
        opens_sentence = len(self.run) == 1 and bool(_SENTENCE_START.search(self.question[: self.start]))
        if not lone_initial and not opens_sentence:
            name = " ".join(self.run)
            if name not in self.out:
                self.out.append(name)
            if owns:
                self.owners.add(name)
        self.run.clear()


def _names_of(question: str) -> tuple[list[str], set[str]]:
    """`question_names` and, of them, `subject_names`."""
    question = quarters_as_codes(question)
    names = _NameRun(question)
    last_end = -1
    possessive = False
    figure_at = -2  # where the last figure ended
    for match in _TOKEN.finditer(question):
        word = re.sub(r"['’]s$", "", match.group(0))
        gap = question[last_end : match.start()] if last_end >= 0 else ""
        if possessive:
            names.close()  # "Acme's Services": two names, not one
        possessive = word != match.group(0)
        if any(c.isdigit() for c in word):
            names.close()
            if len(word) >= 2 or word.isdigit():
                _add_figure(names.out, _key(word), figure_at == last_end and bool(re.fullmatch(r"[ \t]+", gap)))
                figure_at = match.end()
        elif word[:1].isupper() and word.lower() not in _NOT_NAMES and word.lower() not in STOPWORDS:
            if names.run and not re.fullmatch(r"[\s.\-]*", gap):
                names.close()
            names.add(_key(word), match.start(), possessive)
        else:
            names.close()
        last_end = match.end()
    names.close()
    return _dates_whole(question, names.out), names.owners  # `question` with its dates month first


def _add_figure(out: list[str], key: str, adjacent: bool) -> None:
    """A figure of the question as a name: one right after a period joins
    it ("Q3 2023" is one period, not "Q3" and "2023")."""
    if adjacent and out and _PERIOD.match(out[-1].split(" ")[-1]) and _PERIOD.match(key):
        out[-1] = f"{out[-1]} {key}"
    elif key not in out:
        out.append(key)


# "July 1, 2023" (or "1 July 2023", see quarters_as_codes): one name, not a
# day and a year.
_FULL_DATE = re.compile(rf"\b(?:{MONTH_PATTERN})\s+\d{{1,2}},?\s+\d{{4}}\b")


def _dates_whole(question: str, names: list[str]) -> list[str]:
    """`names` with a question's full dates as one name each: a document must
    name "July 1, 2023" (the end of the quarter one company's third-quarter
    filing is for), not any "1" and "2023" (every one of its filings)."""
    dates = _FULL_DATE.findall(question)
    if not dates:
        return names
    rest = _FULL_DATE.sub(" ", question)
    elsewhere = {_key(m.group(0)) for m in _TOKEN.finditer(rest)}
    keys = [phrase_key(date) for date in dates]
    out: list[str] = []
    for name in names:
        for date in keys:
            if name in date.split(" ") and name not in elsewhere:
                name = date
        if name not in out:
            out.append(name)
    return out


def either_names(question: str, names: list[str]) -> list[frozenset[str]]:
    """Names the question offers as alternatives, joined by "or" ("Acme's
    Data Center Group or IoT segment revenues"): a document about one of
    them is about what is asked, though the filing calls the other by a
    newer name."""
    sequence = TextKeys(question).sequence
    spans: dict[str, tuple[int, int]] = {}
    for name in names:
        parts = name.split(" ")
        for i in range(len(sequence) - len(parts) + 1):
            if sequence[i : i + len(parts)] == parts:
                spans[name] = (i, i + len(parts))
                break
    groups: list[frozenset[str]] = []
    for a, (_, a_end) in spans.items():
        for b, (b_start, _) in spans.items():
            between = sequence[a_end:b_start]
            # "A or B", "A segment or the B": a word or two beside the "or".
            if a != b and 0 < len(between) <= MAX_EITHER_GAP and "or" in between and "and" not in between:
                groups.append(frozenset({a, b}))
    return groups


MAX_EITHER_GAP = 3


# A name a document mentions only in passing (once, outside its file name,
# title and summary) is not what the document is about: a company named in
# one line of another company's filing (as a customer, say) does not make
# that filing a source on it.
MIN_MENTIONS = 2


def name_terms(question: str) -> set[str]:
    """The lexical terms (docsum.lexical.terms) of the question's names."""
    keys = {part for name in question_names(question) for part in name.split(" ")}
    return {
        t
        for m in _TOKEN.finditer(question)
        if _key(re.sub(r"['’]s$", "", m.group(0))) in keys
        for t in terms(m.group(0))
    }


def phrase_key(phrase: str) -> str:
    """A phrase as a name key, its words folded and joined by a space, as
    `question_names` and `TextKeys.count` read them ("Mara Quinn's" is
    "mara quinn")."""
    return " ".join(_key(re.sub(r"['’]s$", "", m.group(0))) for m in _TOKEN.finditer(phrase))


# "the third quarter of 2023" names the period "Q3 2023" does, and so does
# "the third quarter of fiscal year 2023" (one company's filings write it so).
_QUARTER_WORDS = re.compile(
    r"\b(first|second|third|fourth)\s+(?:fiscal\s+)?quarter(?:\s+of(?:\s+fiscal)?(?:\s+year)?)?\b", re.IGNORECASE
)
_QUARTER_NUMBER = {"first": "Q1", "second": "Q2", "third": "Q3", "fourth": "Q4"}


_DAY_FIRST = re.compile(rf"\b(\d{{1,2}})\s+({MONTH_PATTERN})\s+(\d{{4}})\b")
# "Q1 FY2024", "Q1 FY 2024": the fiscal quarter filings write "the first quarter of fiscal year 2024".
_FISCAL_QUARTER = re.compile(r"\b(Q[1-4])\s+FY\s?((?:19|20)\d\d)\b", re.IGNORECASE)


def quarters_as_codes(text: str) -> str:
    """Quarters as codes ("the third quarter of 2023" is "Q3 2023") and
    dates month first ("14 September 2019" is "September 14 2019"), so a
    question and a document that write them differently name the same."""
    text = _DAY_FIRST.sub(r"\2 \1 \3", text)
    text = _FISCAL_QUARTER.sub(r"\1 \2", text)
    return _QUARTER_WORDS.sub(lambda m: _QUARTER_NUMBER[m.group(1).lower()], text)


# A run of capitalised words, small linking words allowed inside ("Bank of
# Westmark", "Glass Harbor City"): what an acronym abbreviates.
_CAPITALISED_RUN = re.compile(rf"{CAPITAL}{SMALL}+(?:\s+(?:(?:of|and|for|de)\s+)?{CAPITAL}{SMALL}+)+")


def acronyms(text: str) -> list[str]:
    """The acronyms of `text`'s runs of capitalised words, as keys: "Glass
    Harbor City's" says "ghc", "Bank of Westmark" "bw" (a leading "The" is
    not part of the name)."""
    found = []
    for match in _CAPITALISED_RUN.finditer(text):
        words = [w for w in match.group(0).split() if w[0].isupper()]
        if words[0] == "The":
            words = words[1:]
        if len(words) >= 2:
            found.append(fold("".join(w[0] for w in words)))
    return found


class TextKeys:
    """A text's words as keys, answering how often a name (a phrase of keys
    joined by spaces) occurs in it, words in order and adjacent. A name in
    capitals the text never writes is said by the words it abbreviates
    ("GHC" by "Glass Harbor City")."""

    def __init__(self, text: str) -> None:
        self.sequence = [_key(m.group(0)) for m in _TOKEN.finditer(quarters_as_codes(text))]
        self.words = Counter(self.sequence)
        # Only an acronym the text never writes: "Executable and Linkable
        # Format (ELF)" says ELF once, not twice.
        written = set(self.words)
        self.words.update(a for a in acronyms(text) if a not in written)
        self._grams: dict[int, Counter[tuple[str, ...]]] = {}

    def has_all(self, name: str) -> bool:
        return all(part in self.words for part in name.split(" "))

    def count(self, name: str) -> int:
        parts = tuple(name.split(" "))
        if len(parts) == 1:
            return self.words.get(parts[0], 0)
        if not all(p in self.words for p in parts):
            return 0
        n = len(parts)
        if n not in self._grams:
            seq = self.sequence
            self._grams[n] = Counter(tuple(seq[i : i + n]) for i in range(len(seq) - n + 1))
        return self._grams[n].get(parts, 0)


# How often a long text must name something to be about it: once every this
# many words. One company's 25,000-word filing names another company three
# times as a customer, a second company's names a third four times; each
# company's own filings name it 40 to 150 times.
WORDS_PER_MENTION = 2500
# How much more often a filing must name another period than the one its file
# name gives to be about that period too (a fiscal quarter; see is_about).
PERIOD_DOMINANCE = 2


@dataclass
class DocumentKeys:
    """What grounding knows of a document: its name (file name and title),
    its summary and its text."""

    name: TextKeys
    summary: TextKeys
    body: TextKeys
    # Words the summary and text write only in lower case: in the summary, a
    # one-word name there is a word ("was caught in the undertow"), not the
    # name the question writes with a capital ("Who directed Undertow?").
    # The text keeps counting them: it writes "the euro" for the Euro.
    lower_only: frozenset[str] = frozenset()

    def _said(self, keys: TextKeys, name: str) -> int:
        """How often `keys` says the name; never, for a one-word name the text
        writes only in lower case."""
        return 0 if name in self.lower_only else keys.count(name)

    def is_about(self, name: str, fiscal: bool = False) -> bool:
        """The document is about `name`: the words of it in the file name or
        title in any order ("Q3 2023" is in `2023_Q3_ACME.txt`), the phrase in
        the summary (not for a figure: the summary of a 2023 filing says what
        changed since 2022), or the phrase in the text at least twice and at
        least once every WORDS_PER_MENTION words."""
        if self.name.has_all(name) or (self._said(self.summary, name) and not is_figure(name)):
            return True
        # A name that opens with what the document is about, mentioned
        # whole: a company's filing is about the product lines named after
        # it ("Acme Cloud", "Acme Web Services"), though a product line is
        # named less often than the company. Without this, a question on how
        # such a product line's revenue changed in one fiscal quarter found
        # no filing about it and was not answered.
        first, _, rest = name.partition(" ")
        if rest and not is_figure(name) and self.body.count(name) >= MIN_MENTIONS and self.is_about(first):
            return True
        often = self.body.count(name) >= max(MIN_MENTIONS, len(self.body.sequence) / WORDS_PER_MENTION)
        if all(_PERIOD.match(part) for part in name.split(" ")) and any(
            _PERIOD.match(word) for word in self.name.words
        ):
            # A file named for its period (2023_Q3_ACME.txt) is about that
            # period, however often it compares itself with Q3 2022 (one
            # company's filings name the year-ago quarter a little more often
            # than their own). A question about a fiscal period ("the second
            # quarter of fiscal 2024") may be about another: the one its text
            # names at least PERIOD_DOMINANCE times as often as the file's
            # (another company's 2023_Q2 filing is for "the second quarter of
            # fiscal year 2024": 20 mentions against 8). Without "fiscal" the
            # file's name rules: "Acme's Q3 2023 10-Q" is the one named
            # 2023_Q3.
            named = self.name_period()
            said = self.body.count(name)
            # Not `often`: one company's filing names "the first quarter of
            # fiscal year 2024" 8 times in 29,000 words, and no other quarter
            # as often.
            dominant = said >= MIN_MENTIONS and said >= PERIOD_DOMINANCE * self.body.count(named)
            return fiscal and bool(named) and dominant
        return often

    def name_period(self) -> str:
        """The period a file name gives ("q2 2023" for 2023_Q2_ACME.pdf), or ''."""
        words = self.name.sequence[:8]
        code = next((w for w in words if _PERIOD.match(w) and not w.isdigit()), "")
        year = next((w for w in words if w.isdigit() and len(w) == 4), "")
        return f"{code} {year}" if code and year else ""

    def mentions(self, name: str) -> bool:
        """The phrase is in the text at least twice (a side name: one
        product's name in its maker's filing)."""
        return self.is_about(name) or self.body.count(name) >= MIN_MENTIONS


_CACHE: OrderedDict[tuple[str, int], DocumentKeys] = OrderedDict()
_CACHE_SIZE = 256


def document_keys(doc_id: str, name: str, summary: str, body: str) -> DocumentKeys:
    """Keys of a document, kept for the next question in this process (an
    evaluation asks hundreds); keyed by content so a rebuilt one is re-read."""
    key = (doc_id, hash((name, summary, body)))
    found = _CACHE.get(key)
    if found is None:
        found = _CACHE[key] = DocumentKeys(TextKeys(name), TextKeys(summary), TextKeys(body), lower_only(summary, body))
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    else:
        _CACHE.move_to_end(key)
    return found


def lower_only(*texts: str) -> frozenset[str]:
    """The keys of the words `texts` write only in lower case."""
    lower: set[str] = set()
    cased: set[str] = set()
    for text in texts:
        for match in _TOKEN.finditer(text):
            word = match.group(0)
            (lower if word.islower() else cased).add(_key(word))
    return frozenset(lower - cased)


def missing_names(
    names: list[str], doc: DocumentKeys, subjects: set[str] | frozenset[str] = frozenset(), fiscal: bool = False
) -> list[str]:
    """The names a document does not cover: a document about none of them
    covers none (a passing mention of one company in another's filing does
    not make that filing a source on it); one about some of them also covers
    the names (not the figures, not the `subjects`) it merely mentions."""
    about = [n for n in names if doc.is_about(n, fiscal)]
    # Being about the period ("Q1 2023" in one company's file name) does not
    # make a document about the question's subject (another company).
    if not about or (all(is_figure(n) for n in about) and not all(is_figure(n) for n in names)):
        return [n for n in names if n not in about]
    # A figure (a year, "Q3 2022") must be what the document is about: a
    # filing for 2023 compares itself with "the third quarter of 2022" on
    # every other page. So must the owner of what is asked: one company's
    # filing, about "Services" of its own, names Acme seven times, and is no
    # source on "Acme's Services segment revenue".
    return [n for n in names if n not in about and (is_figure(n) or n in subjects or not doc.mentions(n))]


def is_figure(name: str) -> bool:
    return any(ch.isdigit() for ch in name)


# A period a report is for: a quarter, a half, a fiscal year ("q3 2023", "fy2024").
_PERIOD_CODE = re.compile(r"^(?:q[1-4]|h[12]|fy\d{0,4})$")


def is_period(name: str) -> bool:
    """A figure naming a reporting period, not merely a year or a number:
    "q3 2023" is; "1871" in "the Harbor Act of 1871" is not."""
    return any(_PERIOD_CODE.match(part) for part in name.split(" "))
