"""The weights of the answer scorer's features (docsum.models.unitscore).

Written by bench/fit_scorer.py, which fits them on the development half of
each evaluation set and reports them on the held-out half; do not edit by
hand: rerun the fit. These first values carry over the rules they replace
(coverage 0.75 and centrality 0.25 of the score, a quarter for each kind of
fact asked for, a full point for a named table row, the period and length
penalties as logs of their old factors). The `document` weight was chosen
among 0.1, 0.2 and 0.4 by the development halves of all three sets, measured
with `docsum eval` (bench/RESULTS.md, section 21).
"""

WEIGHTS: dict[str, float] = {
    "lexical": 0.0,
    "coverage": 0.75,
    "centrality": 0.25,
    "proximity": 0.0,
    "answer_type": 0.25,
    "figure": 0.2,
    "amount": 0.1,
    "row_label": 1.0,
    "period": 1.3,
    "length": 1.0,
    "fragment": -0.69,
    "position": 0.0,
    "document": 0.1,
}
# A further unit joins the answer only when its score is within this much of
# the best unit's: the answer stops after the fact.
STOP_GAP = 0.6
# One further than this from the best joins only when it holds a term of the
# question the units before it lack (it answers another part of the question).
NEAR_GAP = 0.2
# The offline engine declines when no unit scores this much (fitted to
# decline at most 8% of any development set's answerable questions).
ANSWER_SCORE_FLOOR = 0.263
