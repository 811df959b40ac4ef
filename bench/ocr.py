#!/usr/bin/env python3
"""OCR (issue 24) against its goals; needs the extra: pip install -e '.[ocr]'.

  python3 bench/ocr.py [--corpus DIR] [--pages N] [--skip-sec] [--skip-engines]

  wer         clean English text (this repo's LICENSE and docs/*.md prose) drawn
              at 11 pt on Letter pages at 200 dpi, saved as an image-only PDF,
              read by docsum; word error rate = word-level edit distance / words
  throughput  dense 10-Q pages (text-layer pages of the SEC filings) rendered at
              200 dpi into image-only PDFs, two files, `docsum build --jobs 2`
              offline from a fresh DOCSUM_HOME; pages/s and word recall against
              the page's own text layer; then the unchanged rebuild (cached)
  sec         the 20 SEC 10-Q PDFs (no scanned page) built offline with
              --ocr off and --ocr auto, fresh DOCSUM_HOME each, best of 2
  engines     one dense page: RapidOCR's defaults, docsum's settings, and
              Tesseract (if the `tesseract` command is installed): s and recall

Writes bench/results/ocr.json and prints the figures; the machine's load
(`uptime`) is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DOCSUM = [sys.executable, "-m", "docsum_cli.main"]
DEFAULT_CORPUS = Path(os.environ.get("EVAL", REPO.parent / "shared" / "eval" / "corpora")) / "sec-10-q-pdf"
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf"


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9]+(?:[.,'’-][A-Za-z0-9]+)*", text)


def word_errors(ref: list[str], hyp: list[str]) -> int:
    """Word-level Levenshtein distance (substitutions, insertions, deletions)."""
    previous = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        current = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (r != h))
        previous = current
    return previous[-1]


def recall(ref: list[str], hyp: list[str]) -> float:
    found = {w.lower() for w in hyp}
    return sum(1 for w in ref if w.lower() in found) / max(1, len(ref))


def clean_prose() -> str:
    parts = [(REPO / "LICENSE").read_text()]
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for line in doc.read_text().splitlines():
            if line.startswith(("#", "|", "```", "    ", "-", "*")) or "`" in line:
                continue
            parts.append(re.sub(r"[\[\]()*_<>]", "", line))
    return " ".join(" ".join(parts).split())


def text_pages(text: str, pages: int) -> list[list[str]]:
    lines = textwrap.wrap(text, 78)
    per_page = 40
    return [lines[i * per_page : (i + 1) * per_page] for i in range(pages) if lines[i * per_page :]]


def draw_pdf(pages: list[list[str]], path: Path) -> None:
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.truetype(FONT, 31)  # 11 pt at 200 dpi
    images = []
    for lines in pages:
        image = Image.new("L", (1700, 2200), 255)
        draw = ImageDraw.Draw(image)
        for n, line in enumerate(lines):
            draw.text((150, 150 + 47 * n), line, font=font, fill=0)
        images.append(image)
    images[0].save(path, "PDF", resolution=200.0, save_all=True, append_images=images[1:])


def bench_wer(tmp: Path, pages: int) -> dict[str, Any]:
    from docsum.ingest.load import load_file

    drawn = text_pages(clean_prose(), pages)
    pdf = tmp / "prose.pdf"
    draw_pdf(drawn, pdf)
    start, cpu = time.perf_counter(), time.process_time()
    doc = load_file(pdf)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    ends = [s - 2 for s in doc.page_starts[1:]] + [len(doc.text)]
    per_page = []
    for lines, s, e in zip(drawn, doc.page_starts, ends):
        ref, hyp = words(" ".join(lines)), words(doc.text[s:e])
        per_page.append({"words": len(ref), "errors": word_errors(ref, hyp)})
    total = sum(p["words"] for p in per_page)
    errors = sum(p["errors"] for p in per_page)
    return {
        "pages": len(drawn),
        "words": total,
        "wer": errors / total,
        "seconds": seconds,
        "cpu_s": cpu,
        "origins": doc.page_origins,
    }


def dense_pages(corpus: Path, count: int) -> list[tuple[str, int, str]]:
    """(file, page index, text layer) of the densest text pages of the first filings."""
    import pypdfium2

    found = []
    for pdf in sorted(corpus.glob("*.pdf"))[: max(2, count)]:
        doc = pypdfium2.PdfDocument(str(pdf))
        texts = []
        for i in range(min(len(doc), 12)):
            tp = doc[i].get_textpage()
            texts.append((len(tp.get_text_range()), i, tp.get_text_range()))
        doc.close()
        _, index, text = max(texts)
        found.append((str(pdf), index, text))
    return found[:count]


def scan_of(pages: list[tuple[str, int, str]], path: Path, dpi: int = 200) -> None:
    import pypdfium2

    images = []
    for file, index, _ in pages:
        doc = pypdfium2.PdfDocument(file)
        images.append(doc[index].render(scale=dpi / 72, grayscale=True).to_pil().convert("L"))
        doc.close()
    images[0].save(path, "PDF", resolution=float(dpi), save_all=True, append_images=images[1:])
    for image in images:
        image.close()


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def build(folder: Path, home: Path, *args: str) -> tuple[float, dict[str, Any]]:
    """Wall seconds of one `docsum build`, and its JSON report with the CPU
    seconds of the build and its workers (the figure the load inflates least)."""
    env = dict(os.environ, DOCSUM_HOME=str(home))
    store = home / "s.sqlite"
    start, cpu = time.perf_counter(), children_cpu()
    out = subprocess.run(
        [*DOCSUM, "build", str(folder), "--store", str(store), "--llm", "extractive", "--json", *args],
        capture_output=True,
        text=True,
        env=env,
    )
    seconds = time.perf_counter() - start
    if out.returncode not in (0, 3):
        raise SystemExit(f"build failed: {out.stderr[-2000:]}")
    data = json.loads(out.stdout)
    data["cpu_s"] = children_cpu() - cpu
    return seconds, data


def bench_throughput(tmp: Path, corpus: Path, pages: int) -> dict[str, Any]:
    chosen = dense_pages(corpus, pages)
    folder = tmp / "scans"
    folder.mkdir()
    half = (len(chosen) + 1) // 2
    scan_of(chosen[:half], folder / "a.pdf")
    scan_of(chosen[half:], folder / "b.pdf")
    home = tmp / "home-scans"
    # A generous --parse-timeout: on a loaded machine two dense pages can pass the default 300 s.
    seconds, data = build(folder, home, "--jobs", "2", "--parse-timeout", "3600")
    again, data2 = build(folder, home, "--jobs", "2", "--parse-timeout", "3600")
    import sqlite3

    conn = sqlite3.connect(home / "s.sqlite")
    text = " ".join(t for (t,) in conn.execute("SELECT text FROM nodes"))
    conn.close()
    ref = [w for _, _, layer in chosen for w in words(layer)]
    return {
        "pages": len(chosen),
        "seconds": seconds,
        "pages_per_s": len(chosen) / seconds,
        "cpu_s": data["cpu_s"],
        "cpu_s_per_page": data["cpu_s"] / len(chosen),
        "word_recall": recall(ref, words(text)),
        "ocr_pages": data["pages"]["ocr"],
        "unchanged_rebuild_s": again,
        "unchanged": data2["documents"]["unchanged"],
    }


def bench_sec(tmp: Path, corpus: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in ("off", "auto", "off", "auto"):
        home = Path(tempfile.mkdtemp(dir=tmp))
        seconds, data = build(corpus, home, "--ocr", mode)
        out.setdefault(mode, []).append(round(seconds, 2))
        out.setdefault(f"{mode}_cpu", []).append(round(data["cpu_s"], 2))
        out[f"{mode}_ocr_pages"] = data["pages"]["ocr"]
        shutil.rmtree(home)
    out["slowdown_wall"] = min(out["auto"]) / min(out["off"]) - 1
    out["slowdown_cpu"] = min(out["auto_cpu"]) / min(out["off_cpu"]) - 1
    return out


def bench_engines(tmp: Path, corpus: Path) -> list[dict[str, Any]]:
    import numpy as np
    import pypdfium2
    import rapidocr
    from rapidocr import RapidOCR

    from docsum.ingest.ocr import PageImage, recognize, set_threads

    file, index, layer = dense_pages(corpus, 1)[0]
    ref = words(layer)
    doc = pypdfium2.PdfDocument(file)
    rows = []
    for dpi in (150, 200):
        pixels = np.ascontiguousarray(doc[index].render(scale=dpi / 72, grayscale=True).to_numpy())
        if pixels.ndim == 3:
            pixels = pixels[:, :, 0]
        models = Path(rapidocr.__file__).parent / "models"
        default = RapidOCR(
            params={
                "Global.log_level": "error",
                "Det.model_path": str(models / "PP-OCRv6_det_small.onnx"),
                "Rec.model_path": str(models / "PP-OCRv6_rec_small.onnx"),
                "Cls.model_path": str(models / "ch_ppocr_mobile_v2.0_cls_mobile.onnx"),
            }
        )
        start, cpu = time.perf_counter(), time.process_time()
        result = default(pixels)
        rows.append(
            {
                "engine": "rapidocr defaults (det min 736, cls on, all threads)",
                "dpi": dpi,
                "seconds": time.perf_counter() - start,
                "cpu_s": time.process_time() - cpu,
                "recall": recall(ref, words(" ".join(result.txts or ()))),
            }
        )
        for threads in (2, 1):
            set_threads(threads)
            start, cpu = time.perf_counter(), time.process_time()
            text = recognize(PageImage(pixels))
            rows.append(
                {
                    "engine": f"docsum (det max 1280, no cls, {threads} thread{'s' if threads > 1 else ''})",
                    "dpi": dpi,
                    "seconds": time.perf_counter() - start,
                    "cpu_s": time.process_time() - cpu,
                    "recall": recall(ref, words(text)),
                }
            )
        if shutil.which("tesseract"):
            from PIL import Image

            png = tmp / f"page{dpi}.png"
            Image.fromarray(pixels).save(png, dpi=(dpi, dpi))
            start, cpu = time.perf_counter(), children_cpu()
            out = subprocess.run(["tesseract", str(png), "-", "-l", "eng"], capture_output=True, text=True)
            rows.append(
                {
                    "engine": "tesseract 5 (eng, default psm)",
                    "dpi": dpi,
                    "seconds": time.perf_counter() - start,
                    "cpu_s": children_cpu() - cpu,
                    "recall": recall(ref, words(out.stdout)),
                }
            )
    doc.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--pages", type=int, default=4, help="dense pages for the throughput run")
    parser.add_argument("--wer-pages", type=int, default=2)
    parser.add_argument("--skip-sec", action="store_true")
    parser.add_argument("--skip-engines", action="store_true")
    parser.add_argument("--skip-wer", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {"load_before": load()}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        if not args.skip_wer:
            results["wer"] = bench_wer(tmp, args.wer_pages)
            print("wer", results["wer"], load(), flush=True)
        if not args.skip_throughput:
            results["throughput"] = bench_throughput(tmp, args.corpus, args.pages)
            print("throughput", results["throughput"], load(), flush=True)
        if not args.skip_engines:
            results["engines"] = bench_engines(tmp, args.corpus)
            for row in results["engines"]:
                print("engine", row, flush=True)
        if not args.skip_sec:
            results["sec"] = bench_sec(tmp, args.corpus)
            print("sec", results["sec"], load(), flush=True)
    results["load_after"] = load()
    out = HERE / "results" / "ocr.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
