"""Chaining hops, for the offline engine: a question such as "Who was the
first president of the society which published the Journal of Quiet
Studies?" is answered by no one sentence. One sentence names the question's
entity and, beside it, the bridge ("… published by the Society for Quiet
Studies"); another document's sentence names the bridge, or is about it, and
says the rest ("Ilse Varga was the first president of the Society for Quiet
Studies").

`chain` finds such a chain of sentences across the passages of a context; the
engine answers with its last hop first and the earlier ones as support, or,
when a question shaped like a chain (`is_chained`) cannot be chained, declines
rather than quote the first hop's fact (or an unrelated document's) as the
answer.
"""

from __future__ import annotations

import math
import re
from collections import Counter, OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

from docsum.lexical import CAPITAL, STOPWORDS, terms
from docsum.models.abstain import TextKeys, is_figure, name_terms, phrase_key, question_names
from docsum.models.answerrank import is_quotable
from docsum.models.selection import answer_strength

# A capitalised phrase: "Society for Quiet Studies", "Mara Quinn",
# "Harlow, Westmark" gives two.
PHRASE = re.compile(rf"\b{CAPITAL}[\w&’'.-]*[\w](?:\s+(?:(?:of|the|for|and|on|de|&)\s+)*{CAPITAL}[\w&’'.-]*[\w])*")
# Capitalised only because they open a sentence or a clause, or because they
# are a month or a day (a date links no two things).
_OPENERS = frozenset(
    """the a an in on at it its he she his her they their this that these those there
    after before during when while since from for with by as of to and but or also
    however later today then thus
    january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday""".split()
)
# A chain is at most this many sentences: the answer's length
# (--answer-sentences, 3 by default) bounds it anyway.
MAX_HOPS = 3
# Chains are grown breadth first from each hop-1 sentence; a context of a few
# documents gives a few dozen. This bounds a pathological one.
MAX_CHAINS = 2000
# Tie-breaker for a hop whose sentence names the bridge itself.
NAMED_LINK_BONUS = 0.01
# A name this many documents of the context name is a general one (the
# country they are all in), no bridge between two of them.
GENERAL_DOCUMENTS = 3
_LABEL = re.compile(r"^\[(\d+)\] \(source: ([^,\n)]*)", re.MULTILINE)


# A question's word for a relation, and words a document says it with:
# "Who was in charge of Veldra?" is answered by "… elected Tamas Orr as
# the new President of Veldra", "the spouse of …" by "… married
# …".
_SAID_AS = {
    "charge": "president prime minister governor mayor leader head chief ruler king queen chancellor premier",
    "spouse": "married wife husband marriage",
    "sibling": "brother sister",
    "child": "son daughter",
    "children": "son daughter",
    "author": "wrote written writer novelist",
    "wrote": "author writer",
    "director": "directed",
    "citizen": "nationality",
    "formed": "founded established",
}
SAID_AS: dict[str, frozenset[str]] = {
    next(iter(terms(word))): frozenset(terms(said)) for word, said in _SAID_AS.items()
}


def held_terms(question_terms: set[str], text: str) -> set[str]:
    """The question's words a text holds, itself or as a document says it
    (`SAID_AS`)."""
    bag = set(terms(text))
    return (question_terms & bag) | {t for t in question_terms if SAID_AS.get(t, frozenset()) & bag}


@dataclass(frozen=True)
class Unit:
    """A sentence of the context, with the passage it came from and the
    document that passage belongs to (its source, or the passage itself)."""

    text: str
    mark: int | None
    doc: str


@dataclass(frozen=True)
class Chain:
    """Positions (into the units) of a chain's sentences, hop 1 first, and the
    share of the question's content words they hold together."""

    hops: tuple[int, ...]
    coverage: float


def sources(context: str) -> dict[int, str]:
    """Passage number → source name, from the labels above each passage."""
    return {int(m.group(1)): m.group(2).strip() for m in _LABEL.finditer(context)}


# A description of something the question does not name: "the association
# which published …", "the country containing Kellmoor", "the composer of
# Vellmar Suite", "the same county as Dunholt", "the city Mara Quinn was born
# in", "the country premiering Glass Harbor", "Tovin's country".
# One word of a description's head: lower case, and no article or
# preposition ("the spouse of the director of Glass Harbor" is two).
_W = r"(?:(?!(?:the|a|an|of|in|on|at|by|for|as|to|from|with)\b)[a-z][\w-]*)"
_DESCRIPTIONS = (
    re.compile(
        rf"\b[Tt]he (?:{_W} ){{0,3}}?{_W},? "
        r"(?:where|which|that|who|whose|whom|in which|at which|on which|containing|named)\b"
    ),
    re.compile(rf"\b[Tt]he (?:{_W} ){{0,3}}?(?P<head>{_W}) (?:of|in|by|for|as) (?:the )?[A-Z]"),
    re.compile(rf"\b[Tt]he (?:{_W} ){{0,2}}?{_W} [A-Z][\w.-]*(?: [A-Z][\w.-]*)* (?:is|was|were|are|[a-z]+ed)\b"),
    re.compile(rf"\b[Tt]he (?:{_W} ){{0,2}}?(?P<noun>{_W}) [a-z]+ing [A-Z]"),
    re.compile(r"\b[A-Z][\w.-]*(?: [A-Z][\w.-]*)*['’]s (?:[a-z][\w-]* ){0,2}?(?P<head>[a-z][\w-]*)\b"),
)
# "The revenue of Acme", "Northwind's operating expenses" name a quantity of
# a named thing, answered where the thing is; "the composer of
# Vellmar Suite", "Tovin's country" name another thing, with its own
# documents. Possessives and "of" count as a hop only for the second kind:
# a place or a body, or a person by role (most end in -er or -or).
_ENTITY_NOUNS = frozenset(
    """country countries state states city cities town village county province region district
    capital continent island nation birthplace hometown location area territory colony river
    mountain range team club band group school university college mater company party church
    label network association organization organisation agency government league wife husband
    spouse son daughter child children sibling brother sister father mother parent parents
    king queen president leader ruler member artist actor actress singer star creators
    performers family""".split()
)


# Words ending like a role ("-er", "-or") that name no one: "the chief
# factor affecting Acme's operating income" is asked of Acme.
_NOT_ROLES = frozenset(
    """factor factors number numbers order orders matter matters quarter quarters sector sectors error
    errors center centers centre chapter chapters letter letters paper papers water border borders
    power other others major minor interior exterior""".split()
)


def _entity(head: str | None) -> bool:
    if head is None:
        return True
    if head in _NOT_ROLES:
        return False
    return head in _ENTITY_NOUNS or head.endswith(("er", "or", "ers", "ors", "place", "ist"))


# What the question asks for, when a description is all it asks about:
# "What is the state where …", "Which is …" (after "the name of" is dropped).
_ASKS_FOR = re.compile(r"^\W*(?:what|which|who|whom)(?: (?:is|was|are|were))?\W*$", re.IGNORECASE)
# "The main director of Glass Harbor was who?": the description is asked for.
_ASKED_AT_END = re.compile(r"\b(?:is|was|are|were) (?:who|whom|what)\W*$", re.IGNORECASE)
# An instruction, or a question of manner ("How does NORVEC bundle the
# countries of the Far Coast?"), asks for no one thing reached through
# another.
_INSTRUCTION = re.compile(
    r"^\W*(?:describe|summari[sz]e|list|explain|outline|compare|analy[sz]e|examine|give|tell|identify|discuss"
    r"|how (?:does|do|did|is|are|was|were|has|have|can|could|would|should|might|will)\b)",
    re.IGNORECASE,
)
# "Which country is considered one of the creators of the Aldmere Pact?": the question
# equates its answer with the description, which runs to its end (no word
# in lower case after the name): it asks for the described thing.
_EQUATES = re.compile(
    r"^\W*(?:what|which|who)(?: [a-z]+){0,2} (?:is|was|are|were)"
    r"(?: (?:considered|known as|regarded as|called|thought to be))?(?: one of)?\W*$",
    re.IGNORECASE,
)
_NAME_OF = re.compile(r"\b(?:the )?(?:name|term) (?:of|for) (?=the\b)", re.IGNORECASE)


def is_chained(question: str) -> bool:
    """The question reaches what it asks through something it does not name:
    it describes a thing ("the state where the Orlen House is", "Tovin's city
    of birth") and asks about something else of it ("Where does the
    Northmere River start in the state where …", "the most popular hotel in
    Tovin's city of birth"), not for the thing itself ("What is the name of
    the state where the Orlen House is located?", "What was Tovin's city of
    birth?"). Read on the words alone, so it errs both ways; `chain`
    decides with the documents."""
    return asked_before(question) is not None


def asked_before(question: str) -> str | None:
    """For a chained question (`is_chained`), its words before the first
    description: what it asks of the described thing ("Who was the first
    president of"). None for any other question."""
    if _INSTRUCTION.match(question):
        return None  # "Describe what the text is about …": asks for no one fact
    text = _NAME_OF.sub("", question)
    # The first description in the question, whichever pattern finds it.
    found = sorted(
        (match.start(), match.end(), match.groupdict().get("head"), match.groupdict().get("noun"))
        for pattern in _DESCRIPTIONS
        for match in pattern.finditer(text)
    )
    for start, end, head, noun in found:
        before = text[:start]
        if _ASKS_FOR.match(before):
            continue
        if _EQUATES.match(before) and not re.search(r"\b[a-z]+\b", text[end:]):
            continue
        if not before.strip() and _ASKED_AT_END.search(text):
            continue
        if not _entity(head) or noun in _NOT_ROLES:
            continue
        return before
    return None


@dataclass
class _Reading:
    """The context's units as chains are grown from them."""

    units: list[Unit]
    question_terms: set[str]
    bags: list[set[str]]
    keys: list[TextKeys]
    titles: dict[str, TextKeys]
    quotable: list[bool]
    own: set[str]

    def extensions(
        self, hops: tuple[int, ...], covered: frozenset[str]
    ) -> Iterator[tuple[tuple[int, ...], frozenset[str], bool]]:
        """Each next hop of a chain: a quotable sentence of another document
        that names one of the last hop's bridges or belongs to a document
        about one, and holds question words the chain does not. With it, the
        words held, and whether it names the bridge."""
        bridges = [b for b in bridges_in(self.units[hops[-1]].text) if b not in self.own]
        if not bridges:
            return
        seen_docs = {self.units[h].doc for h in hops}
        for j, unit in enumerate(self.units):
            if unit.doc in seen_docs or not self.quotable[j]:
                continue
            new = (self.question_terms & self.bags[j]) - covered
            if not new:
                continue
            named = any(self.keys[j].count(b) for b in bridges)
            if named or any(self.titles[unit.doc].has_all(b) for b in bridges):
                yield (*hops, j), covered | new, named


def chain(question: str, units: list[Unit]) -> Chain | None:
    """The best chain of sentences answering `question`: hop 1 names one of
    the question's names and a bridge (a capitalised phrase that is none of
    them); each next hop is in another document and names the bridge or
    belongs to a document about it (its source or opening line names it), and
    holds question words the hops before it do not. The best chain holds the
    most of the question (weighted by rarity), fewer hops winning ties. None
    when no chain of two hops or more exists."""
    names = [n for n in question_names(question) if not is_figure(n)]
    q = set(terms(question))
    if not names or not q:
        return None
    bags = [held_terms(q, u.text) for u in units]
    weight = _weights(q, bags)
    keys = [TextKeys(u.text) for u in units]
    titles = _titles(units)
    quotable = [is_quotable(u.text) for u in units]
    reading = _Reading(units, q, bags, keys, titles, quotable, set(names) | _general(units, keys))
    # Hop 1: a sentence naming one of the question's names, or any sentence
    # of a document about one ("She married Tomas Vell" in
    # Ada_Quinn.txt).
    first = [
        i
        for i, k in enumerate(keys)
        if quotable[i] and any(k.count(n) or titles[units[i].doc].has_all(n) for n in names)
    ]
    best: Chain | None = None
    best_rank = 0.0
    frontier: list[tuple[tuple[int, ...], frozenset[str]]] = [((i,), frozenset(q & bags[i])) for i in first]
    grown = 0
    for _ in range(MAX_HOPS - 1):
        nxt: list[tuple[tuple[int, ...], frozenset[str]]] = []
        for hops, covered in frontier:
            for path, held, named in reading.extensions(hops, covered):
                grown += 1
                # A sentence that names the bridge beats one that only sits
                # in a document about it, other things equal.
                cov = sum(weight[t] for t in held)
                rank = cov + (NAMED_LINK_BONUS if named else 0.0)
                if best is None or rank > best_rank + 1e-9:
                    best, best_rank = Chain(path, cov), rank
                nxt.append((path, held))
                if grown >= MAX_CHAINS:
                    return best
        frontier = nxt
    return best


def _general(units: list[Unit], keys: list[TextKeys]) -> set[str]:
    """Names too general to be a bridge: those GENERAL_DOCUMENTS documents
    of the context or more name ("Westmark" in a village's, an
    airport's and a radio station's), unless one of the documents is about
    it: then it is the next hop (Westmark.txt, beside a wind farm and a
    township of Westmark)."""
    named: dict[str, set[str]] = {}
    for unit in units:
        for key in bridges_in(unit.text):
            named.setdefault(key, set()).add(unit.doc)
    titles = _titles(units)
    return {
        key
        for key, docs in named.items()
        if len(docs) >= GENERAL_DOCUMENTS and not any(titles[d].count(key) for d in docs)
    }


def single_coverage(question: str, units: list[Unit], asked: str = "") -> float:
    """The most of the question (weighted as in `chain`) one sentence about
    one of its names holds (it names it, or its document is about it): a
    sentence of another document ("It issues the country's currency") is no
    answer to compare a chain with. Names of the `asked` part (the words
    before the description) do not count: in "What currency predated the Euro
    in the country Tovin is from?", a sentence on the euro says nothing of
    Tovin's country."""
    q = set(terms(question))
    bags = [held_terms(q, u.text) for u in units]
    weight = _weights(q, bags)
    of_asked = set(question_names(asked)) if asked else set()
    names = [n for n in question_names(question) if not is_figure(n) and n not in of_asked]
    titles = _titles(units)
    return max(
        (
            sum(weight[t] for t in q & bag)
            for unit, bag in zip(units, bags)
            if not names or any(TextKeys(unit.text).count(n) or titles[unit.doc].has_all(n) for n in names)
        ),
        default=0.0,
    )


# "Eastern Region of Veldra": what follows "of" in a name is a place or a
# body the named thing belongs to.
_OF_NAME = re.compile(rf"\bof\s+(?:the\s+)?({CAPITAL}[\w&’'.-]*[\w](?:\s+{CAPITAL}[\w&’'.-]*[\w])*)$")


# A participle opening a sentence ("Founded", "Located", "Released"), capitalised only for that.
_PARTICIPLE = re.compile(r"^[A-Z][a-z]{3,}ed$")


def bridges_in(sentence: str) -> list[str]:
    """The capitalised phrases of a sentence as name keys (abstain.phrase_key),
    without the words that are capitalised only for opening it; a phrase
    ending "of" a name also gives that name ("the Eastern Region of Veldra"
    is a bridge to Veldra too)."""
    out: list[str] = []
    opening = sentence.lstrip(" \t\n\"'“‘(")
    for found in PHRASE.finditer(opening):
        phrase = found.group(0)
        owner = _OF_NAME.search(phrase)
        for piece in [phrase, owner.group(1)] if owner else [phrase]:
            words = piece.split()
            while words and words[0].lower() in _OPENERS:
                words = words[1:]
            if found.start() == 0 and words and words[0] == phrase.split()[0] and _PARTICIPLE.match(words[0]):
                words = words[1:]  # "Founded in 1930 by …": a verb opening the sentence, no name
            if not words or (len(words) == 1 and (len(words[0]) < 3 or words[0].lower() in STOPWORDS)):
                continue
            key = phrase_key(" ".join(words))
            if key and key not in out:
                out.append(key)
    return out


def _titles(units: list[Unit]) -> dict[str, TextKeys]:
    """Per document, the words of its source name: what it is about. (Its
    first sentence is not: a biography's names a dozen places.)"""
    return {u.doc: TextKeys(u.doc) for u in units}


def _weights(q: set[str], bags: list[set[str]]) -> dict[str, float]:
    """Each question word's share of the question, rarer words weighing more
    (a word every sentence holds says nothing about which one answers)."""
    df = Counter(t for bag in bags for t in bag & q)
    n = len(bags)
    raw = {t: math.log((n + 1) / (df.get(t, 0) + 1)) + 1.0 for t in q}
    total = sum(raw.values()) or 1.0
    return {t: v / total for t, v in raw.items()}


def hop_answer(question: str, texts: list[str], marks: list[int | None], context: str) -> list[int] | None:
    """For a question shaped like a chain (`is_chained`): the positions of the
    sentences to answer with, the last hop first (it holds what is asked; the
    hops before it say how it was reached). None to answer as usual: any
    other question, or a chain that holds less of the question than one
    sentence or says nothing of what is asked; the answer scorer's floor
    then decides whether anything is quoted, as for any question."""
    before = asked_before(question)
    if before is None:
        return None
    labels = sources(context)
    units = [Unit(t, m, labels.get(m, f"passage {m}") if m is not None else "") for t, m in zip(texts, marks)]
    found = chain(question, units)
    asked = set(terms(before))
    # The chain must say something of what is asked ("first president"),
    # not only link names: a village, then an airport of the same county.
    relation = asked - name_terms(question)
    if (
        found is not None
        and found.coverage >= single_coverage(question, units, before) - 1e-9
        and (not relation or any(held_terms(relation, units[i].text) for i in found.hops))
    ):
        # The hop saying most of what is asked leads (a third hop that only
        # adds "country" is support); otherwise the last hop first.
        return sorted(reversed(found.hops), key=lambda i: -len(held_terms(relation, units[i].text)))
    return None


# A sentence holding this share of a question's terms answers it where it
# stands, however the question is shaped: no chain is looked for.
ANSWERED_SHARE = 0.6


def stated_whole(question: str, texts: list[str]) -> bool:
    """Some unit of `texts` names one of the question's names, holds every
    word of what a chained question asks (its words before the description,
    less names: "first president") and ANSWERED_SHARE of all its terms. The
    journal's own sentence holds most of "Who was the first president of the
    society which published the Journal of Quiet Studies?" but not what is
    asked; "The first president of the Society of Quiet Machines Studies was
    Per Lind" holds that, and names another society."""
    names = [n for n in question_names(question) if not is_figure(n)]
    relation = set(terms(asked_before(question) or "")) - name_terms(question)
    naming = [
        t
        for t in texts
        if (not names or any(TextKeys(t).count(n) for n in names)) and len(held_terms(relation, t)) == len(relation)
    ]
    strength = answer_strength(question, naming) if naming else None
    return strength is not None and strength.coverage >= ANSWERED_SHARE


# Questions whose passages are remembered at once: more than the questions
# an evaluation runs side by side.
MAX_REMEMBERED = 64


class SeenPassages:
    """The passages the steps of one question's answer have been shown so
    far. Refine shows them one prompt at a time ("[1]", then "[2]", …), so
    hop 1's document and hop 2's never meet in one context; a step whose
    first passage continues the numbering of the last step for the same
    question sees the earlier passages too. A context numbered from 1 starts
    afresh (compact, or the same question asked again)."""

    def __init__(self) -> None:
        self._seen: OrderedDict[str, tuple[int, str]] = OrderedDict()

    def context(self, question: str, context: str) -> str:
        numbers = sorted(sources(context))
        if not numbers:
            return context
        last, earlier = self._seen.pop(question, (0, ""))
        # compact may split a long passage between two parts: the next part
        # then opens with the passage the last one closed with.
        if earlier and numbers[0] <= last + 1 and numbers[-1] > last:
            context = f"{earlier}\n\n{context}"
        self._seen[question] = (numbers[-1], context)
        if len(self._seen) > MAX_REMEMBERED:
            self._seen.popitem(last=False)
        return context
