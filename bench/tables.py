#!/usr/bin/env python3
"""Markdown tables for bench/RESULTS.md from the JSON files in bench/results/.

  python3 bench/tables.py side    bench/results   # docsum vs the reference, with ratios
  python3 bench/tables.py sec10q  bench/results   # build cost on the SEC 10-Q corpus
  python3 bench/tables.py cold    bench/results   # process start-up
  python3 bench/tables.py quality bench/results   # retrieval quality (docsum eval), one row per run
  python3 bench/tables.py quality-full bench/results   # the same with precision, per kind
  python3 bench/tables.py all     bench/results

Standard library only.  Ratios are written "reference / docsum" for costs
(so > 1 means docsum spends less) unless a column says otherwise.
"""

from __future__ import annotations

import glob
import json
import os
import re
import statistics
import sys

# ---------------------------------------------------------------- helpers


def g(d, *path, default=None):
    for p in path:
        if not isinstance(d, dict) or p not in d or d[p] is None:
            return default
        d = d[p]
    return d


def num(v, nd=1):
    if v is None:
        return "–"
    if isinstance(v, int) or (isinstance(v, float) and nd == 0):
        return f"{v:,.0f}"
    return f"{v:,.{nd}f}"


def ratio(a, b, nd=1):
    if a is None or b is None:
        return "–"
    if b == 0:
        return "∞" if a else "–"
    return f"{a / b:,.{nd}f}×"


def versus(ref, ds):
    """docsum's figure against the reference's, in words (for times)."""
    if ref is None or ds is None or ref <= 0 or ds <= 0:
        return "–"
    if ds <= ref:
        return f"docsum {ref / ds:,.1f}× faster"
    return f"docsum {ds / ref:,.1f}× slower"


def size_h(b):
    if b is None:
        return "–"
    if b >= 1 << 20:
        return f"{b / (1 << 20):.1f} MiB"
    return f"{b / 1024:.0f} KiB"


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------- side by side

REP_RE = re.compile(r"^(?P<tool>[a-z0-9-]+?)-n(?P<n>\d+)-w(?P<w>\d+)-lat(?P<lat>\d+)(?P<tag>-r\d+)?\.json$")


def load_side(results):
    """{(tool, n, latency): [main run, repeat runs...]} from runbench JSON files."""
    groups = {}
    for p in sorted(glob.glob(os.path.join(results, "*.json"))):
        m = REP_RE.match(os.path.basename(p))
        if not m:
            continue
        r = load_json(p)
        if not r or "run" not in r:
            continue
        r["_file"] = os.path.basename(p)
        r["_rep"] = m.group("tag") or ""
        key = (m.group("tool"), int(m.group("n")), int(m.group("lat")))
        groups.setdefault(key, []).append(r)
    for runs in groups.values():
        runs.sort(key=lambda r: r["_rep"])  # "" (the main run) first
    return groups


def docsum_report(results, tool, n, lat, kind, rep=""):
    return load_json(os.path.join(results, "docsum-reports", f"{tool}-n{n}-w1000-lat{lat}{rep}.{kind}.json"))


def cold_start(results):
    d = load_json(os.path.join(results, "cold_start.json")) or {}
    return {c["name"]: c for c in d.get("commands", [])}


def pooled_query(runs, mode):
    """Median / p95 over every timed query of every run of one configuration."""
    ms = [p["ms"] for r in runs for p in g(r, "query", mode, "per_query", default=[])]
    if not ms:
        return None, None, 0
    s = sorted(ms)
    k = max(0, min(len(s) - 1, -(-95 * len(s) // 100) - 1))
    return statistics.median(ms), s[k], len(ms)


def side_tables(results):
    groups = load_side(results)
    cold = cold_start(results)
    configs = sorted({(n, lat) for (_t, n, lat) in groups})
    out = []

    # ---- build
    out.append("### Build (new store / new index)")
    out.append("")
    out.append(
        "Whole process = the build command from start to exit (docsum) or the reference's build phase process "
        "(imports, reading, `from_documents`, persisting). In-process = the reference's `from_documents` alone "
        "and docsum's own `elapsed_s`. Wall times are medians over the runs listed; everything else is identical "
        "from run to run."
    )
    out.append("")
    out.append(
        "| docs | latency ms | runs ref / docsum | whole process s: ref / docsum | ratio | in-process s: ref / docsum | ratio | LLM calls ref / docsum | prompt tokens ref / docsum | ratio | completion tokens ref / docsum | emb calls ref / docsum | max in-flight ref / docsum | peak RSS MiB ref / docsum | store size ref / docsum |"
    )
    out.append("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for n, lat in configs:
        li, ds = groups.get(("llamaindex", n, lat), []), groups.get(("docsum", n, lat), [])
        if not li or not ds:
            continue
        li_proc = median([g(r, "build", "process_wall_s") for r in li])
        li_in = median([g(r, "build", "build_s") for r in li])
        ds_proc = median([g(r, "build", "build_s") for r in ds])
        ds_in = median([g(docsum_report(results, "docsum", n, lat, "build", r["_rep"]), "elapsed_s") for r in ds])
        lb, db = g(li[0], "build", "server", default={}), g(ds[0], "build", "server", default={})
        out.append(
            "| "
            + " | ".join(
                [
                    num(n),
                    num(lat),
                    f"{len(li)} / {len(ds)}",
                    f"{num(li_proc, 2)} / {num(ds_proc, 2)}",
                    ratio(li_proc, ds_proc),
                    f"{num(li_in, 2)} / {num(ds_in, 2)}",
                    ratio(li_in, ds_in),
                    f"{num(lb.get('llm_calls'))} / {num(db.get('llm_calls'))}",
                    f"{num(lb.get('prompt_tokens_cl100k'))} / {num(db.get('prompt_tokens_cl100k'))}",
                    ratio(lb.get("prompt_tokens_cl100k"), db.get("prompt_tokens_cl100k"), 2),
                    f"{num(lb.get('completion_tokens_cl100k'))} / {num(db.get('completion_tokens_cl100k'))}",
                    f"{num(lb.get('embedding_calls'))} / {num(db.get('embedding_calls'))}",
                    f"{num(lb.get('max_inflight'))} / {num(db.get('max_inflight'))}",
                    f"{num(median([g(r, 'build', 'peak_rss_mib') for r in li]))} / {num(median([g(r, 'build', 'peak_rss_mib') for r in ds]))}",
                    f"{size_h(g(li[0], 'persist', 'bytes'))} / {size_h(g(ds[0], 'persist', 'bytes'))}",
                ]
            )
            + " |"
        )
    c1 = groups.get(("docsum-c1", 100, 300))
    if c1:
        b = g(c1[0], "build", "server", default={})
        out.append("")
        out.append(
            f"docsum with `--concurrency 1` at 100 docs / 300 ms: build {num(g(c1[0], 'build', 'build_s'), 2)} s "
            f"({num(b.get('llm_calls'))} LLM calls, {num(b.get('embedding_calls'))} embedding calls, "
            f"max in-flight {num(b.get('max_inflight'))})."
        )
    out.append("")

    # ---- unchanged folder
    out.append("### The same folder again, unchanged")
    out.append("")
    out.append(
        "Reference: *from scratch* is a second `from_documents` (what a script that re-runs the build does); "
        "*refresh* is `load_index_from_storage` + `refresh_ref_docs` (its incremental API). docsum: *rebuild* is "
        "the same `docsum build` on the same store; *touched* first sets a new mtime on every file (same bytes), "
        "then runs it again. Calls are LLM calls (embedding calls in brackets when not 0); times are whole processes."
    )
    out.append("")
    out.append(
        "| docs | latency ms | ref from scratch: calls / s | ref refresh: calls / s | docsum rebuild: calls / s | docsum touched: calls / s | docsum report (unchanged / updated) |"
    )
    out.append("|--:|--:|--:|--:|--:|--:|--:|")

    def calls_s(step, wall_key):
        if not step:
            return "skipped"
        sv = step.get("server") or {}
        c = num(sv.get("llm_calls"))
        if sv.get("embedding_calls"):
            c += f" (+{sv['embedding_calls']} emb)"
        return f"{c} / {num(step.get(wall_key), 2)}"

    for n, lat in configs:
        li, ds = groups.get(("llamaindex", n, lat), []), groups.get(("docsum", n, lat), [])
        if not li or not ds:
            continue
        rep = docsum_report(results, "docsum", n, lat, "refresh")
        docs = g(rep, "documents", default={})
        out.append(
            "| "
            + " | ".join(
                [
                    num(n),
                    num(lat),
                    calls_s(li[0].get("rebuild"), "process_wall_s"),
                    calls_s(li[0].get("refresh"), "process_wall_s"),
                    calls_s(ds[0].get("rebuild"), "build_s"),
                    calls_s(ds[0].get("refresh"), "build_s"),
                    f"{num(docs.get('unchanged'))} / {num(docs.get('updated'))}",
                ]
            )
            + " |"
        )
    out.append("")

    # ---- queries
    startup = g(cold, "docsum-imports-openai", "median_ms")
    out.append("### Queries (top-1 document, compact answer)")
    out.append("")
    out.append(
        "Reference latencies are in-process (index loaded once); every docsum query is a whole `docsum ask` "
        "process, which loads the store and imports its modules each time. "
        + (
            f"The last column subtracts {num(startup, 0)} ms, the median time to start Python and import what a "
            "server-backed `docsum ask` imports (see the cold-start table): a rough in-process estimate, not a measurement. "
            if startup
            else ""
        )
        + "Latency medians pool every timed query of every run of the configuration; calls and tokens are means per query. "
        "Max in-flight is the server's high-water mark over the LLM-retriever queries (peer_cli/peer_llamaindex do not "
        "reset it between queries, so the embedding rows would only repeat it)."
    )
    out.append("")
    out.append(
        "| docs | latency ms | retriever | queries ref / docsum | LLM calls/q ref / docsum | prompt tokens/q ref / docsum | emb calls/q ref / docsum | max in-flight ref / docsum | hit rate ref / docsum | median ms ref (in-process) | median ms docsum (process) | p95 ms ref / docsum | docsum median − start-up ms |"
    )
    out.append("|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for n, lat in configs:
        li, ds = groups.get(("llamaindex", n, lat), []), groups.get(("docsum", n, lat), [])
        if not li or not ds:
            continue
        for mode in ("llm", "embedding"):
            lq, dq = g(li[0], "query", mode, default={}), g(ds[0], "query", mode, default={})
            lm, lp, ln = pooled_query(li, mode)
            dm, dp, dn = pooled_query(ds, mode)
            est = (dm - startup) if (dm is not None and startup) else None
            out.append(
                "| "
                + " | ".join(
                    [
                        num(n),
                        num(lat),
                        mode,
                        f"{ln} / {dn}",
                        f"{num(lq.get('llm_calls_per_query'))} / {num(dq.get('llm_calls_per_query'))}",
                        f"{num(lq.get('prompt_tokens_cl100k_per_query'), 0)} / {num(dq.get('prompt_tokens_cl100k_per_query'), 0)}",
                        f"{num(lq.get('embedding_calls_per_query'))} / {num(dq.get('embedding_calls_per_query'))}",
                        (f"{num(lq.get('max_inflight'))} / {num(dq.get('max_inflight'))}" if mode == "llm" else "n/a"),
                        f"{num(lq.get('hit_rate'), 2)} / {num(dq.get('hit_rate'), 2)}",
                        num(lm),
                        num(dm),
                        f"{num(lp)} / {num(dp)}",
                        num(est) if est is None or est > 0 else f"{num(est)} (≤ 0: start-up dominates)",
                    ]
                )
                + " |"
            )
    out.append("")
    out.append(
        "First query (not in the medians): the reference's first query after loading its index, in-process; "
        "docsum's first `docsum ask` process."
    )
    out.append("")
    out.append(
        "| docs | latency ms | retriever | ref cold first ms | docsum cold first ms | ref query process: import s / load index s |"
    )
    out.append("|--:|--:|---|--:|--:|--:|")
    for n, lat in configs:
        li, ds = groups.get(("llamaindex", n, lat), []), groups.get(("docsum", n, lat), [])
        if not li or not ds:
            continue
        for mode in ("llm", "embedding"):
            out.append(
                "| "
                + " | ".join(
                    [
                        num(n),
                        num(lat),
                        mode,
                        num(g(li[0], "query", mode, "cold_first_ms")),
                        num(g(ds[0], "query", mode, "cold_first_ms")),
                        f"{num(g(li[0], 'query', 'notes', 'import_s'), 2)} / {num(g(li[0], 'query', 'load_index_s'), 2)}",
                    ]
                )
                + " |"
            )
    out.append("")

    # ---- self-reported vs server
    out.append("### docsum's own report against the server's counters (build)")
    out.append("")
    out.append(
        "| docs | latency ms | LLM calls: server / docsum --json | prompt tokens: server cl100k / docsum | completion tokens: server / docsum | embedding calls: server / docsum | server errors |"
    )
    out.append("|--:|--:|--:|--:|--:|--:|--:|")
    for n, lat in configs:
        ds = groups.get(("docsum", n, lat), [])
        if not ds:
            continue
        sv = g(ds[0], "build", "server", default={})
        rep = g(docsum_report(results, "docsum", n, lat, "build"), "usage", default={})
        out.append(
            "| "
            + " | ".join(
                [
                    num(n),
                    num(lat),
                    f"{num(sv.get('llm_calls'))} / {num(rep.get('llm_calls'))}",
                    f"{num(sv.get('prompt_tokens_cl100k'))} / {num(rep.get('prompt_tokens'))}",
                    f"{num(sv.get('completion_tokens_cl100k'))} / {num(rep.get('completion_tokens'))}",
                    f"{num(sv.get('embedding_calls'))} / {num(rep.get('embedding_calls'))}",
                    num(sv.get("errors")),
                ]
            )
            + " |"
        )
    out.append("")
    return "\n".join(out)


def headline(results):
    """One line per configuration: the ratios that matter."""
    groups = load_side(results)
    configs = sorted({(n, lat) for (_t, n, lat) in groups})
    out = [
        "| docs | latency ms | build wall (whole process) ref ÷ docsum | prompt tokens ref ÷ docsum | LLM calls for an unchanged rebuild: ref from scratch / ref refresh / docsum | max in-flight ref / docsum | LLM-retrieval query median: ref in-process / docsum as a process |",
        "|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for n, lat in configs:
        li, ds = groups.get(("llamaindex", n, lat), []), groups.get(("docsum", n, lat), [])
        if not li or not ds:
            continue
        li_proc = median([g(r, "build", "process_wall_s") for r in li])
        ds_proc = median([g(r, "build", "build_s") for r in ds])
        lm, _, _ = pooled_query(li, "llm")
        dm, _, _ = pooled_query(ds, "llm")
        reb = g(li[0], "rebuild", "server", "llm_calls")
        out.append(
            "| "
            + " | ".join(
                [
                    num(n),
                    num(lat),
                    ratio(li_proc, ds_proc),
                    ratio(
                        g(li[0], "build", "server", "prompt_tokens_cl100k"),
                        g(ds[0], "build", "server", "prompt_tokens_cl100k"),
                        2,
                    ),
                    f"{'skipped' if reb is None else num(reb)} / {num(g(li[0], 'refresh', 'server', 'llm_calls'))} / {num(g(ds[0], 'rebuild', 'server', 'llm_calls'))}",
                    f"{num(g(li[0], 'build', 'server', 'max_inflight'))} / {num(g(ds[0], 'build', 'server', 'max_inflight'))}",
                    f"{num(lm, 0)} ms / {num(dm, 0)} ms ({versus(lm, dm)})",
                ]
            )
            + " |"
        )
    return "\n".join(out)


# ---------------------------------------------------------------- sec-10-q


def sec10q_table(rows):
    out = [
        "| latency ms | system | LLM calls | prompt tokens | completion tokens | emb calls | max in-flight | wall s (whole process) | in-process s | peak RSS MiB | store size | unchanged rebuild: LLM calls / s | server errors |",
        "|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in sorted(rows, key=lambda r: r["latency_ms"]):
        d, reb, ref = r.get("docsum") or {}, r.get("docsum_rebuild") or {}, r.get("reference")
        sv = d.get("server") or {}
        out.append(
            "| "
            + " | ".join(
                [
                    num(r["latency_ms"]),
                    "docsum" + ("" if d.get("rc") == 0 else f" (exit {d.get('rc')})"),
                    num(sv.get("llm_calls")),
                    num(sv.get("prompt_tokens_cl100k")),
                    num(sv.get("completion_tokens_cl100k")),
                    num(sv.get("embedding_calls")),
                    num(sv.get("max_inflight")),
                    num(d.get("wall_s"), 2),
                    num(g(d, "self_reported", "elapsed_s"), 2),
                    num(d.get("peak_rss_mib")),
                    size_h(d.get("store_bytes")),
                    f"{num(g(reb, 'server', 'llm_calls'))} / {num(reb.get('wall_s'), 2)}",
                    num(sv.get("errors")),
                ]
            )
            + " |"
        )
        if ref and "error" not in ref:
            rs = ref.get("server") or {}
            out.append(
                "| "
                + " | ".join(
                    [
                        num(r["latency_ms"]),
                        "reference",
                        num(rs.get("llm_calls")),
                        num(rs.get("prompt_tokens_cl100k")),
                        num(rs.get("completion_tokens_cl100k")),
                        num(rs.get("embedding_calls")),
                        num(rs.get("max_inflight")),
                        num(ref.get("process_wall_s"), 2),
                        num(ref.get("build_s"), 2),
                        num(ref.get("peak_rss_mib")),
                        size_h(ref.get("persist_bytes")),
                        f"refresh {num(g(ref, 'refresh', 'server', 'llm_calls'))} / {num(g(ref, 'refresh', 'process_wall_s'), 2)}",
                        num(rs.get("errors")),
                    ]
                )
                + " |"
            )
        elif ref:
            out.append(f"| {num(r['latency_ms'])} | reference | {ref['error']} |" + " |" * 11)
    out.append("")
    out.append(
        "docsum self-report vs server (LLM calls, prompt tokens): "
        + "; ".join(
            f"{r['latency_ms']} ms: {num(g(r, 'docsum', 'server', 'llm_calls'))} vs {num(g(r, 'docsum', 'self_reported', 'usage', 'llm_calls'))}, "
            f"{num(g(r, 'docsum', 'server', 'prompt_tokens_cl100k'))} vs {num(g(r, 'docsum', 'self_reported', 'usage', 'prompt_tokens'))}"
            for r in sorted(rows, key=lambda r: r["latency_ms"])
        )
    )
    return "\n".join(out)


def load_sec10q(results):
    return [r for p in sorted(glob.glob(os.path.join(results, "sec10q-lat*.json"))) if (r := load_json(p))]


# ---------------------------------------------------------------- cold start


def cold_table(results):
    d = load_json(os.path.join(results, "cold_start.json"))
    if not d:
        return "(no cold_start.json)"
    out = [
        f"{d.get('runs')} runs each, after one untimed warm-up run; whole processes; load average before: {d.get('loadavg_before')}, after: {d.get('loadavg_after')}.",
        "",
        "| what | command | median ms | min ms | max ms | peak RSS MiB (median) |",
        "|---|---|--:|--:|--:|--:|",
    ]
    for c in d["commands"]:
        out.append(
            f"| {c['label']} | `{c['display']}` | {num(c['median_ms'], 0)} | {num(c['min_ms'], 0)} | {num(c['max_ms'], 0)} | {num(c['rss_mib'])} |"
        )
    return "\n".join(out)


# ---------------------------------------------------------------- retrieval quality


def quality_tables(results):
    files = sorted(glob.glob(os.path.join(results, "quality", "*.json")))
    rows = [r for p in files if (r := load_json(p)) and "metrics" in r]
    if not rows:
        return "(no quality results)"
    out = [
        "| corpus | retriever | k | system | kind | n | recall@k | precision@k | MRR | all found | LLM calls | prompt tokens |",
        "|---|---|--:|---|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    order = {"embedding": 0, "llm": 1, "hybrid": 2}
    rows.sort(key=lambda r: (r.get("_corpus", ""), order.get(r["retriever"], 9), r["top_k"]))
    for r in rows:
        for system, kinds in r["metrics"].items():
            for kind in ("all", "single", "multi"):
                m = kinds.get(kind)
                if not m:
                    continue
                out.append(
                    "| "
                    + " | ".join(
                        [
                            r.get("_corpus", "?"),
                            r["retriever"],
                            num(r["top_k"]),
                            "summaries" if system == "summary" else "chunk baseline",
                            kind,
                            num(m["n"]),
                            num(m["recall"], 3),
                            num(m["precision"], 3),
                            num(m["mrr"], 3),
                            num(m["all_found"], 3),
                            num(g(r, "usage", "llm_calls")) if system == "summary" and kind == "all" else "",
                            num(g(r, "usage", "prompt_tokens")) if system == "summary" and kind == "all" else "",
                        ]
                    )
                    + " |"
                )
    un = sorted({u for r in rows for u in r.get("unresolved_gold_docs", [])})
    if un:
        out.append("")
        out.append(f"Unresolved gold documents: {', '.join(un)}")
    return "\n".join(out)


def quality_compact(results):
    """One row per corpus, retriever and k: recall@k overall and per kind, MRR,
    all-found; the chunk baseline beside the embedding retriever."""
    files = sorted(glob.glob(os.path.join(results, "quality", "*.json")))
    rows = [r for p in files if (r := load_json(p)) and "metrics" in r]
    if not rows:
        return "(no quality results)"
    order = {"embedding": 0, "llm": 1, "hybrid": 2}
    rows.sort(key=lambda r: (r.get("_corpus", ""), order.get(r["retriever"], 9), r["top_k"]))
    out = [
        "| corpus | retriever | k | recall@k all / single / multi | MRR | all found | chunk baseline: recall@k all / single / multi | chunk MRR | chunk all found | LLM calls |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]

    def rec(m):
        return " / ".join(num(g(m, kind, "recall"), 3) for kind in ("all", "single", "multi"))

    for r in rows:
        s_, c_ = r["metrics"].get("summary", {}), r["metrics"].get("chunks")
        out.append(
            "| "
            + " | ".join(
                [
                    r.get("_corpus", "?"),
                    r["retriever"],
                    num(r["top_k"]),
                    rec(s_),
                    num(g(s_, "all", "mrr"), 3),
                    num(g(s_, "all", "all_found"), 3),
                    rec(c_) if c_ else "",
                    num(g(c_, "all", "mrr"), 3) if c_ else "",
                    num(g(c_, "all", "all_found"), 3) if c_ else "",
                    num(g(r, "usage", "llm_calls")),
                ]
            )
            + " |"
        )
    return "\n".join(out)


def main(argv):
    if len(argv) < 2:
        raise SystemExit(__doc__)
    what, results = argv[0], argv[1]
    parts = []
    if what in ("side", "all"):
        parts += ["### Headline ratios", "", headline(results), "", side_tables(results)]
    if what in ("sec10q", "all"):
        parts += ["### SEC 10-Q build", "", sec10q_table(load_sec10q(results)), ""]
    if what in ("cold", "all"):
        parts += ["### Cold start", "", cold_table(results), ""]
    if what in ("quality", "all"):
        parts += ["### Retrieval quality", "", quality_compact(results), ""]
    if what == "quality-full":
        parts += ["### Retrieval quality (every kind, precision too)", "", quality_tables(results), ""]
    if not parts:
        raise SystemExit(f"unknown table {what!r}")
    print("\n".join(parts))


if __name__ == "__main__":
    main(sys.argv[1:])
