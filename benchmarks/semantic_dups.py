"""Semantic duplicates on labelled caption pairs: precision and recall of the default step's pair decision
(candidate by cosine, then the meaning checks and the score, ``curation.pipeline.meaning``) against the
cosine alone at 0.85 (the step before the checks), with the packaged all-MiniLM-L6-v2 and en_core_web_sm.

    .venv/bin/python benchmarks/semantic_dups.py --pairs tests/curation/data/semantic_pairs_dev.tsv [--show]

The pairs file is a TSV with the header ``label<TAB>kind<TAB>text_a<TAB>text_b`` (label 1: same meaning; the
kind may be left out, and other columns are ignored).
Printed: for each method, precision, recall and F1 over the pairs it calls the same, and per kind how many
pairs it calls the same; with ``--show``, each pair's cosine, score and reasons. Nothing is written; no
database is used (the encoder and spaCy are loaded from their installed packages, as the step loads them).
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class PairsFileError(ValueError):
    pass


def read_pairs(path: Path) -> list[dict]:
    """The rows of a pairs TSV (columns label, text_a, text_b, and kind where there is one; others ignored;
    lines starting with '#' are comments); PairsFileError with the line for a file in another format."""
    if not path.is_file():
        raise PairsFileError(f"{path}: no such file")
    with path.open(encoding="utf-8", newline="") as handle:
        lines = [(n, text) for n, text in enumerate(handle, start=1) if not text.startswith("#")]
    reader = csv.reader((text for _, text in lines), delimiter="\t", quoting=csv.QUOTE_NONE)
    header = [h.strip().lower() for h in next(reader, None) or []]
    if not {"label", "text_a", "text_b"} <= set(header):
        raise PairsFileError(f"{path}: the header must be label, kind, text_a, text_b (tab-separated), not {header}")
    col = {name: header.index(name) for name in ("label", "kind", "text_a", "text_b") if name in header}
    rows = []
    for (line, _), row in zip(lines[1:], reader):
        if not row or not any(cell.strip() for cell in row):
            continue
        if len(row) < len(header) or row[col["label"]].strip() not in ("0", "1") or not row[
                col["text_a"]].strip() or not row[col["text_b"]].strip():
            raise PairsFileError(f"{path}, line {line}: expected label 0 or 1 and two texts")
        rows.append({"label": int(row[col["label"]]), "kind": row[col["kind"]] if "kind" in col else "pair",
                     "a": row[col["text_a"]].strip(), "b": row[col["text_b"]].strip()})
    if len({r["label"] for r in rows}) < 2:
        raise PairsFileError(f"{path}: precision and recall need pairs of both labels")
    return rows


def figures(labels: list[int], predicted: list[bool]) -> tuple[float, float, float]:
    tp = sum(1 for y, p in zip(labels, predicted) if y and p)
    fp = sum(1 for y, p in zip(labels, predicted) if not y and p)
    fn = sum(1 for y, p in zip(labels, predicted) if y and not p)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", required=True, type=Path)
    parser.add_argument("--show", action="store_true", help="print every pair with its score and reasons")
    args = parser.parse_args(argv)
    try:
        rows = read_pairs(args.pairs)
    except PairsFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import django

    django.setup()
    from sentence_transformers import SentenceTransformer

    from curation.pipeline import nlp
    from curation.pipeline.meaning import SPACY_NEEDS, judge_texts
    from curation.pipeline.semantic_dups import SemanticDuplicates
    from pack.packaged import PACKAGED_TEXT_ENCODER, packaged_directory

    net = SentenceTransformer(str(packaged_directory(PACKAGED_TEXT_ENCODER["package"])), device="cpu",
                              local_files_only=True)

    def encode(texts):
        return net.encode(list(texts), batch_size=128, normalize_embeddings=True, show_progress_bar=False)

    step = SemanticDuplicates()
    started = time.perf_counter()
    judged = judge_texts([(r["a"], r["b"]) for r in rows], encode=encode,
                         parse=lambda texts: nlp.parse_unique(texts, SPACY_NEEDS), scorer=step.scorer(),
                         synonym=step.params["synonym"])
    seconds = time.perf_counter() - started
    labels = [r["label"] for r in rows]
    candidate = step.params["min_similarity"]
    methods = {
        "default step": [j.cosine >= candidate and j.same for j in judged],
        "cosine >= 0.85": [j.cosine >= 0.85 for j in judged],
    }
    print(f"{len(rows)} pairs from {args.pairs} ({sum(labels)} same meaning); default: candidates at cosine >= "
          f"{candidate}, score >= {step.params['threshold']}; judged in {seconds:.1f} s")
    kinds = sorted(Counter(r["kind"] for r in rows))
    print(f"{'method':16s} {'precision':>9s} {'recall':>7s} {'F1':>6s}  " + "  ".join(kinds) + "   (pairs called same)")
    for name, predicted in methods.items():
        precision, recall, f1 = figures(labels, predicted)
        per_kind = "  ".join(f"{sum(p for r, p in zip(rows, predicted) if r['kind'] == k)}/"
                             f"{sum(1 for r in rows if r['kind'] == k)}".rjust(len(k)) for k in kinds)
        print(f"{name:16s} {precision:9.3f} {recall:7.3f} {f1:6.3f}  {per_kind}")
    if args.show:
        for row, j in zip(rows, judged):
            mark = "ok " if (j.cosine >= candidate and j.same) == bool(row["label"]) else "ERR"
            print(f"{mark} {row['label']} {row['kind']:17s} cos {j.cosine:.3f} score {j.score:.3f} | {row['a']} | "
                  f"{row['b']} | {'; '.join(j.reasons)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
