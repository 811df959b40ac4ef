#!/usr/bin/env python3
"""OCR (issue 24) against its goals; needs the extra: pip install -e '.[ocr]'.

  python3 bench/ocr.py [--corpus DIR] [--pages N] [--wer-pages N] [--engine-pages N]
                      [--skip-wer] [--skip-throughput] [--skip-engines] [--skip-sec]

  wer         clean English text (this repo's LICENSE and docs/*.md prose) drawn
              at 11 pt on Letter pages at 200 dpi, saved as an image-only PDF,
              read by docsum; word error rate = word-level edit distance / words
  throughput  dense 10-Q pages (text-layer pages of the SEC filings) rendered at
              200 dpi into image-only PDFs, two files, `docsum build --jobs 2`
              offline from a fresh DOCSUM_HOME; pages/s and word recall against
              the page's own text layer; then the unchanged rebuild (cached)
  sec         the 20 SEC 10-Q PDFs (no scanned page) built offline with
              --ocr off and --ocr auto, alternating, fresh DOCSUM_HOME each, best of
              --sec-rounds (3)
  engines     each RapidOCR setting compared (its defaults, docsum's before and
              now, batch size, line-box margin, detection size, 150 dpi, 1 or 2
              threads) and Tesseract (if the `tesseract` command is installed),
              on the same --engine-pages dense 10-Q pages and --wer-pages prose
              pages, in this process: CPU s a page (onnxruntime's threads
              included), where the time went (det / rec / layout), recall, WER

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
# This clone's code, in process and in the builds it runs (the cli/ folder is
# the docsum_cli package once installed).
sys.path.insert(0, str(REPO))
DOCSUM = [sys.executable, "-m", "cli.main"]
DEFAULT_CORPUS = Path(os.environ.get("EVAL", REPO.parent / "shared" / "eval" / "corpora")) / "sec-10-q-pdf"
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf"


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def words(text: str) -> list[str]:
    # A 10-Q's text layer writes the typographic apostrophe (Company’s); OCR
    # reads it as ' . Both count as the same word.
    text = text.replace("\u2019", "'").replace("\u2018", "'")
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
    from docsum.ingest.ocr import set_threads

    set_threads(1)  # as a worker of `--jobs 2` on 2 cores: CPU s comparable with the build's
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
        "load": load(),
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


_TICK = os.sysconf("SC_CLK_TCK")


def _tree_cpu(root: int, seen: dict[int, float]) -> None:
    """Update ``seen`` (pid: CPU s) with every process under ``root``, from /proc."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        pid = int(entry.name)
        parent[pid] = int(fields[1])
        cpu[pid] = (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime
    for pid, ticks in cpu.items():
        up = pid
        while up in parent and up != root:
            up = parent[up]
        if up == root:
            seen[pid] = max(seen.get(pid, 0.0), ticks)


def build(folder: Path, home: Path, *args: str) -> tuple[float, dict[str, Any]]:
    """Wall seconds of one `docsum build`, and its JSON report with the CPU
    seconds of the build and its workers (the figure the load inflates least).

    The workers are children of multiprocessing's fork server, which reaps
    them itself: their time never reaches getrusage(RUSAGE_CHILDREN) here
    (1 s measured for 4 OCR'd pages). So the process tree is read from /proc
    every 50 ms and each process's last reading kept; what a process spends
    after its last reading is missed (at most 50 ms each, a few processes)."""
    env = dict(os.environ, DOCSUM_HOME=str(home), PYTHONPATH=str(REPO))
    store = home / "s.sqlite"
    start = time.perf_counter()
    seen: dict[int, float] = {}
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        proc = subprocess.Popen(
            [*DOCSUM, "build", str(folder), "--store", str(store), "--llm", "extractive", "--json", *args],
            stdout=stdout,
            stderr=stderr,
            text=True,
            env=env,
        )
        while proc.poll() is None:
            _tree_cpu(proc.pid, seen)
            time.sleep(0.05)
        seconds = time.perf_counter() - start
        stdout.seek(0)
        stderr.seek(0)
        out, err = stdout.read(), stderr.read()
    if proc.returncode not in (0, 3):
        raise SystemExit(f"build failed: {err[-2000:]}")
    data = json.loads(out)
    data["cpu_s"] = sum(seen.values())
    data["processes"] = len(seen)
    return seconds, data


def bench_throughput(tmp: Path, corpus: Path, pages: int) -> dict[str, Any]:
    chosen = dense_pages(corpus, pages)
    folder = tmp / "scans"
    folder.mkdir()
    half = (len(chosen) + 1) // 2
    scan_of(chosen[:half], folder / "a.pdf")
    scan_of(chosen[half:], folder / "b.pdf")
    home = tmp / "home-scans"
    before = load()
    # A generous --parse-timeout: on a loaded machine two dense pages can pass the default 300 s.
    seconds, data = build(folder, home, "--jobs", "2", "--parse-timeout", "3600")
    after = load()
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
        # What two idle cores would do: the build's CPU seconds (workers and
        # parent) spread over both, as the two workers run in parallel.
        "pages_per_s_2_idle_cores_estimate": 2 * len(chosen) / data["cpu_s"],
        "load_before": before,
        "load_after": after,
        "word_recall": recall(ref, words(text)),
        "ocr_pages": data["pages"]["ocr"],
        "unchanged_rebuild_s": again,
        "unchanged": data2["documents"]["unchanged"],
    }


def bench_sec(tmp: Path, corpus: Path, rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {"rounds": rounds}
    for mode in ("off", "auto") * rounds:  # alternating, so a change in load hits both
        home = Path(tempfile.mkdtemp(dir=tmp))
        seconds, data = build(corpus, home, "--ocr", mode)
        out.setdefault(mode, []).append(round(seconds, 2))
        out.setdefault(f"{mode}_cpu", []).append(round(data["cpu_s"], 2))
        out[f"{mode}_ocr_pages"] = data["pages"]["ocr"]
        shutil.rmtree(home)
    out["slowdown_wall"] = min(out["auto"]) / min(out["off"]) - 1
    out["slowdown_cpu"] = min(out["auto_cpu"]) / min(out["off_cpu"]) - 1
    return out


# Settings compared by the engines step: RapidOCR public config keys on top of
# the models docsum hands it (docsum.ingest.ocr._engine builds the shipped set).
_RAPIDOCR_DEFAULTS: dict[str, Any] = {}
_DOCSUM_BEFORE = {  # docsum's settings before this measurement (commit 9b98219)
    "Global.use_cls": False,
    "Det.limit_type": "max",
    "Det.limit_side_len": 1280,
}
SETTINGS: list[tuple[str, dict[str, Any]]] = [
    ("rapidocr defaults (det min 736, cls on, rec batch 6, unclip 1.6, max side 2000)", _RAPIDOCR_DEFAULTS),
    ("docsum before (det max 1280, no cls; rest as defaults)", _DOCSUM_BEFORE),
    ("before + rec batch 12", {**_DOCSUM_BEFORE, "Rec.rec_batch_num": 12}),
    ("before + rec batch 1", {**_DOCSUM_BEFORE, "Rec.rec_batch_num": 1}),
    ("before + rec batch 1 + unclip 2.0", {**_DOCSUM_BEFORE, "Rec.rec_batch_num": 1, "Det.unclip_ratio": 2.0}),
    ("before + rec batch 1 + unclip 2.4", {**_DOCSUM_BEFORE, "Rec.rec_batch_num": 1, "Det.unclip_ratio": 2.4}),
    ("before + rec batch 1 + det max 960", {**_DOCSUM_BEFORE, "Rec.rec_batch_num": 1, "Det.limit_side_len": 960}),
]


def _pixels(pdf: str | Path, index: int, dpi: int) -> Any:
    import numpy as np
    import pypdfium2

    doc = pypdfium2.PdfDocument(str(pdf))
    try:
        pixels = np.ascontiguousarray(doc[index].render(scale=dpi / 72, grayscale=True).to_numpy())
    finally:
        doc.close()
    return pixels[:, :, 0] if pixels.ndim == 3 else pixels


def _rapidocr(params: dict[str, Any], threads: int) -> Any:
    import rapidocr
    from rapidocr import RapidOCR

    models = Path(rapidocr.__file__).parent / "models"
    return RapidOCR(
        params={
            "Global.log_level": "error",
            "Det.model_path": str(models / "PP-OCRv6_det_small.onnx"),
            "Rec.model_path": str(models / "PP-OCRv6_rec_small.onnx"),
            "Cls.model_path": str(models / "ch_ppocr_mobile_v2.0_cls_mobile.onnx"),
            "EngineConfig.onnxruntime.intra_op_num_threads": threads,
            "EngineConfig.onnxruntime.inter_op_num_threads": 1,
            **params,
        }
    )


def _read_rapidocr(engine: Any, pixels: Any) -> tuple[str, dict[str, float]]:
    """The page's text laid out as docsum does, and where the wall time went."""
    from docsum.ingest.ocr import _bounds, layout_lines

    result = engine(pixels)
    if not getattr(result, "txts", None):
        return "", {}
    start = time.perf_counter()
    text = layout_lines(
        [(_bounds(box), str(t)) for box, t, score in zip(result.boxes, result.txts, result.scores) if score >= 0.5]
    )
    det, _, rec = result.elapse_list
    return text, {"det_s": det or 0.0, "rec_s": rec or 0.0, "layout_s": time.perf_counter() - start}


def _measure(read: Any, dense: list[tuple[Any, list[str]]], prose: list[tuple[Any, list[str]]]) -> dict[str, Any]:
    """CPU seconds a page (this process, onnxruntime's threads included; or the
    children's for a subprocess engine), wall split, recall on the dense pages,
    word error rate on the prose pages."""
    out: dict[str, Any] = {}
    for kind, pages in (("dense", dense), ("prose", prose)):
        cpu = wall = 0.0
        split: dict[str, float] = {}
        ref: list[str] = []
        hyp: list[str] = []
        errors = 0
        for pixels, expected in pages:
            c, c2, w = time.process_time(), children_cpu(), time.perf_counter()
            text, parts = read(pixels)
            cpu += time.process_time() - c + children_cpu() - c2
            wall += time.perf_counter() - w
            for key, value in parts.items():
                split[key] = split.get(key, 0.0) + value
            ref += expected
            hyp += words(text)
            errors += word_errors(expected, words(text))
        n = max(1, len(pages))
        out[f"{kind}_cpu_s_per_page"] = round(cpu / n, 2)
        out[f"{kind}_wall_s_per_page"] = round(wall / n, 2)
        if kind == "dense":
            out["dense_split_s_per_page"] = {k: round(v / n, 2) for k, v in split.items()}
            out["dense_recall"] = round(recall(ref, hyp), 4)
        else:
            out["prose_wer"] = round(errors / max(1, len(ref)), 4)
            out["prose_word_errors"] = errors
    out["load"] = load()
    return out


def bench_engines(tmp: Path, corpus: Path, pages: int, prose_pages: int) -> list[dict[str, Any]]:
    """Each setting on the same pages: `pages` dense 10-Q pages (recall against
    their text layer) and `prose_pages` pages of clean prose (WER), both rendered
    from PDF at 200 dpi as docsum renders them (150 dpi for the row saying so)."""
    from docsum.ingest.ocr import PageImage, recognize, set_threads

    chosen = dense_pages(corpus, pages)
    drawn = text_pages(clean_prose(), prose_pages)
    draw_pdf(drawn, tmp / "engines-prose.pdf")

    def rendered(dpi: int) -> tuple[list[tuple[Any, list[str]]], list[tuple[Any, list[str]]]]:
        dense = [(_pixels(file, index, dpi), words(layer)) for file, index, layer in chosen]
        prose = [(_pixels(tmp / "engines-prose.pdf", i, dpi), words(" ".join(lines))) for i, lines in enumerate(drawn)]
        return dense, prose

    at = {dpi: rendered(dpi) for dpi in (150, 200)}
    rows: list[dict[str, Any]] = []

    def row(name: str, dpi: int, threads: int, read: Any) -> None:
        read(at[dpi][0][0][0][:300])  # warm up: models loaded, not timed
        rows.append({"engine": name, "dpi": dpi, "threads": threads, **_measure(read, *at[dpi])})
        print("engine", rows[-1], flush=True)

    for name, params in SETTINGS:
        engine = _rapidocr(params, 1)
        row(name, 200, 1, lambda pixels, e=engine: _read_rapidocr(e, pixels))
    for dpi, threads in ((200, 1), (150, 1), (200, 2)):
        set_threads(threads)
        row("docsum now (docsum.ingest.ocr.recognize)", dpi, threads, lambda px: (recognize(PageImage(px)), {}))
    if shutil.which("tesseract"):
        from PIL import Image

        def tesseract(pixels: Any) -> tuple[str, dict[str, float]]:
            png = tmp / "page.png"
            Image.fromarray(pixels).save(png, dpi=(200, 200))
            env = dict(os.environ, OMP_THREAD_LIMIT="1")  # one core, as a docsum worker gets
            out = subprocess.run(["tesseract", str(png), "-", "-l", "eng"], capture_output=True, text=True, env=env)
            return out.stdout, {}

        version = subprocess.run(["tesseract", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
        row(f"{version} (Debian; eng, default psm, 1 thread)", 200, 1, tesseract)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--pages", type=int, default=4, help="dense pages for the throughput run")
    parser.add_argument("--wer-pages", type=int, default=2)
    parser.add_argument("--engine-pages", type=int, default=4, help="dense pages for the engines step")
    parser.add_argument("--sec-rounds", type=int, default=3, help="builds of each mode in the sec step (best kept)")
    parser.add_argument("--skip-sec", action="store_true")
    parser.add_argument("--skip-engines", action="store_true")
    parser.add_argument("--skip-wer", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()
    out = HERE / "results" / "ocr.json"
    # Steps run separately (a quiet moment on a shared machine is short) are
    # kept side by side: each step's entry says when, at which commit, and
    # the load before it; a step run again replaces its own entry only.
    results: dict[str, Any] = json.loads(out.read_text()) if out.is_file() else {}
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    steps = [
        ("wer", args.skip_wer, lambda tmp: bench_wer(tmp, args.wer_pages)),
        # Keyed by page count: a run over more pages spreads the build's fixed
        # cost (start-up, two model loads) thinner, and both are worth keeping.
        (f"throughput_{args.pages}p", args.skip_throughput, lambda tmp: bench_throughput(tmp, args.corpus, args.pages)),
        ("engines", args.skip_engines, lambda tmp: bench_engines(tmp, args.corpus, args.engine_pages, args.wer_pages)),
        ("sec", args.skip_sec, lambda tmp: bench_sec(tmp, args.corpus, args.sec_rounds)),
    ]
    for step, skip, run in steps:
        if skip:
            continue
        stamp = {
            "utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
            "commit": commit.stdout.strip(),
            "load_before": load(),
        }
        with tempfile.TemporaryDirectory() as name:
            figures = run(Path(name))
        results[step] = {**stamp, "figures": figures, "load_after": load()}
        print(step, json.dumps(results[step], indent=1), flush=True)
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
