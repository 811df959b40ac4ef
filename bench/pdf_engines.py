#!/usr/bin/env python3
"""PDFium against pypdf on every PDF of the evaluation set, file by file.

  python3 bench/pdf_engines.py [DIR ...]     # default with EVAL set: $EVAL/../pdfs and $EVAL/sec-10-q-pdf

For each PDF and each engine (docsum.ingest.pdf.pdfium_pages, docsum.ingest.pdf.pypdf_pages,
pypdf with docsum's raised limits), in a child process with a 600 s limit:
whether it opened, pages, characters and letters/digits extracted, the share
of garbled characters (control characters and U+FFFD), and CPU seconds.
Then what docsum's load_pdf chose.  Writes bench/results/pdf_engines.json and
prints a Markdown table.  Run with the checkout's venv Python.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# No default outside the clone: with EVAL (the corpora folder) set, its
# sec-10-q-pdf/ and the pdfs/ folder beside it.
DEFAULTS = (
    [Path(os.environ["EVAL"]).parent / "pdfs", Path(os.environ["EVAL"]) / "sec-10-q-pdf"]
    if os.environ.get("EVAL")
    else []
)
sys.path.insert(0, str(REPO))


def _measure(engine: str, path: str, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    from docsum.errors import LoadError
    from docsum.ingest.pdf import load_pdf, pdfium_pages, pypdf_pages

    data = Path(path).read_bytes()
    started = time.process_time()
    try:
        if engine == "pdfium":
            pages = pdfium_pages(data)
        elif engine == "pypdf":
            pages = pypdf_pages(path, data)
        else:
            doc = load_pdf(Path(path), data)
            queue.put(
                {
                    "ok": True,
                    "chose": doc.extractor,
                    "chars": len(doc.text),
                    "cpu_s": round(time.process_time() - started, 3),
                }
            )
            return
        text = "".join(pages.texts)
        queue.put(
            {
                "ok": True,
                "pages": len(pages.texts),
                "chars": len(text),
                "alnum": sum(ch.isalnum() for ch in text),
                "garbled": round(pages.garbled, 4),
                "cpu_s": round(time.process_time() - started, 3),
            }
        )
    except LoadError as exc:
        queue.put({"ok": False, "error": exc.reason, "cpu_s": round(time.process_time() - started, 3)})
    except Exception as exc:  # noqa: BLE001 - the comparison records every failure
        queue.put(
            {
                "ok": False,
                "error": f"{type(exc).__name__}: {exc}"[:160],
                "cpu_s": round(time.process_time() - started, 3),
            }
        )


def measure(engine: str, path: Path) -> dict:
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_measure, args=(engine, str(path), queue))
    proc.start()
    proc.join(600)
    if proc.is_alive():
        proc.kill()
        return {"ok": False, "error": "timeout 600 s"}
    try:
        return queue.get(timeout=5)
    except Exception:  # noqa: BLE001
        return {"ok": False, "error": f"crashed (exit {proc.exitcode})"}


def main() -> None:
    folders = [Path(a) for a in sys.argv[1:]] or DEFAULTS
    if not folders:
        raise SystemExit("name the PDF folders to read, or set EVAL to the evaluation corpora folder")
    files = sorted(p for folder in folders for p in folder.glob("*.pdf"))
    rows = []
    for path in files:
        row = {"file": path.name, "folder": path.parent.name}
        for engine in ("pdfium", "pypdf", "docsum"):
            row[engine] = measure(engine, path)
        rows.append(row)
        print(f"{path.name}: {row}", file=sys.stderr)
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "pdf_engines.json").write_text(json.dumps({"load": os.getloadavg(), "rows": rows}, indent=2))

    def cell(r: dict) -> str:
        if not r["ok"]:
            return f"fails: {r['error'][:70]}"
        return f"{r['pages']} p, {r['alnum']:,} alnum, {100 * r['garbled']:.1f}% garbled, {r['cpu_s']:.2f} s"

    print("| file | PDFium | pypdf | docsum uses |")
    print("|---|---|---|---|")
    for row in rows:
        chose = row["docsum"]["chose"] if row["docsum"]["ok"] else f"fails: {row['docsum']['error'][:60]}"
        print(f"| {row['file']} | {cell(row['pdfium'])} | {cell(row['pypdf'])} | {chose} |")
    for engine in ("pdfium", "pypdf"):
        ok = [r[engine] for r in rows if r[engine]["ok"]]
        pages = sum(r["pages"] for r in ok)
        cpu = sum(r["cpu_s"] for r in ok)
        print(
            f"{engine}: opened {len(ok)}/{len(rows)}, {pages} pages in {cpu:.1f} CPU s = {pages / cpu if cpu else 0:.0f} pages per CPU-second"
        )


if __name__ == "__main__":
    main()
