"""How many clusters: the rules and graphs tried beyond ``dkernel.model_order``'s defaults.

Issue 52 asks for the true k on 18 of the 23 sets of ``bench_defaults.py`` at 2 000 points.
``bench_auto_k.py`` measures the rules that ship (timescale gap: 10 of 23). This script records
the wider search, so that the next attempt starts from it instead of repeating it. Every rule
reads the 23 sets as ``bench_defaults.py`` loads them (standardised, ≤ 2 000 rows, seed 0) and
the candidates ``dkernel.model_order.candidate_range(n)``:

* **graph grid** — the timescale gap on the nearly mutual self-tuning k-NN graph for
  neighbours g ∈ {8, 12, 20, 30}, one-sided edge weight w ∈ {0.05, 0.3, 1} and floor
  ∈ {10⁻³, 0.003, 0.01, 0.03} (the shipped graph: g = 8, w = 0.05, floor 0.003);
* **timescale gap + stability** — among the candidates whose timescale-gap score is at least a
  fraction of the best, the most stable (mean ARI of four 80 % subsamples, as
  ``bench_auto_k.py``), ties to the larger timescale gap;
* **silhouette in the commute-time embedding** — k-means on the k leading normalised
  eigenvectors, scored by the silhouette in the coordinates ψ_j / √(1 − λ_j) of every
  candidate's eigenvector (a fixed space for every k);
* **consensus** — the co-association matrix of the k-means partitions of the embedding for
  every candidate k (evidence accumulation, Fred & Jain 2005; iterative consensus clustering,
  Meyer, Race & Valakuzhy 2013, the thesis's pointer): the eigengap of its normalised matrix,
  and the longest-lived k of its average- and single-linkage trees.

Writes ``--out`` (``benchmarks/results/defaults_auto_k_search``) ``.md``::

    DKERNEL_DATA=../shared/data python benchmarks/bench_auto_k_search.py   # ~6 min, 2 cores
"""

from __future__ import annotations

import argparse
import itertools
import sys
import warnings
from pathlib import Path

import numpy as np
from scipy.cluster.hierarchy import linkage
from scipy.spatial.distance import squareform
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_auto_k as bak  # noqa: E402
import bench_defaults as bd  # noqa: E402


def _load() -> dict[str, tuple[np.ndarray, int]]:
    sets = {}
    for name, (_, needs_data) in bd.DATASETS.items():
        if needs_data and not bd.data_dir().exists():
            print(f"skip {name}: no datasets at {bd.data_dir()}", file=sys.stderr)
            continue
        X, _, k = bd.load_dataset(name, 2000)
        sets[name] = (X, k)
    return sets


def _spectrum(X: np.ndarray, top: int, g: int = 8, w: float = 0.05):
    from dkernel.spectral.sparse import fit_sparse_embedding

    n = X.shape[0]
    Z, model = fit_sparse_embedding(
        X, min(top, n - 2), graph_neighbors=min(g, n - 1), seed=0, one_sided_weight=w
    )
    return np.asarray(model.spectrum), Z


def _partitions(Z: np.ndarray, candidates: np.ndarray, n_init: int = 3) -> dict[int, np.ndarray]:
    out = {}
    for k in candidates:
        V = Z[:, :k] / np.maximum(np.linalg.norm(Z[:, :k], axis=1, keepdims=True), 1e-12)
        out[int(k)] = KMeans(int(k), n_init=n_init, random_state=0).fit_predict(V)
    return out


def graph_grid(sets) -> list[tuple[str, dict[str, int]]]:
    from dkernel.model_order import candidate_range, timescale_gap_scores

    rows = []
    for g, w in itertools.product([8, 12, 20, 30], [0.05, 0.3, 1.0]):
        chosen: dict[float, dict[str, int]] = {f: {} for f in (1e-3, 0.003, 0.01, 0.03)}
        for name, (X, _) in sets.items():
            c = candidate_range(X.shape[0])
            lam, _ = _spectrum(X, int(c[-1]) + 1, g, w)
            c = c[c < lam.size]
            for floor in chosen:
                s = timescale_gap_scores(lam, c, floor=floor)
                chosen[floor][name] = int(c[np.argmax(s)])
        rows += [(f"g={g}, w={w}, floor={f}", ks) for f, ks in chosen.items()]
        print(f"graph g={g} w={w} done", file=sys.stderr, flush=True)
    return rows


def spectral_rules(sets) -> list[tuple[str, dict[str, int]]]:
    from dkernel.model_order import (
        candidate_range,
        stability_model_order,
        timescale_gap_scores,
    )

    chosen: dict[str, dict[str, int]] = {}

    def put(rule: str, name: str, k: int) -> None:
        chosen.setdefault(rule, {})[name] = int(k)

    for name, (X, _) in sets.items():
        n = X.shape[0]
        c = candidate_range(n)
        lam, Z = _spectrum(X, int(c[-1]) + 2)
        c = c[c < lam.size - 1]
        ts = timescale_gap_scores(lam, c)
        put("timescale gap (shipped)", name, c[np.argmax(ts)])
        st = np.full(c.size, -1.0)
        c_small = c[c < 0.8 * n - 2]
        st[: c_small.size] = stability_model_order(
            X, bak._graph_kmeans, c_small, n_subsamples=4, seed=0
        ).scores
        for frac in (0.3, 0.5, 0.7):
            near = np.flatnonzero(ts >= frac * ts.max())
            best = near[st[near] >= st[near].max() - 0.02]
            put(
                f"timescale gap ≥ {frac} × best, then stability", name, c[best[np.argmax(ts[best])]]
            )
        parts = _partitions(Z, c)
        distance = np.maximum(1 - lam / lam[0], 1e-9)
        E = Z[:, 1 : c[-1] + 1] / np.sqrt(distance[1 : c[-1] + 1])
        sil = [silhouette_score(E, parts[int(k)]) for k in c]
        put("silhouette, commute-time embedding", name, c[int(np.argmax(sil))])
        C = np.zeros((n, n), np.float32)
        for labels in _partitions(Z, c, n_init=1).values():
            C += labels[:, None] == labels[None, :]
        C /= c.size
        d = C.sum(1)
        ev = np.sort(np.linalg.eigvalsh(C / np.sqrt(d[:, None] * d[None, :])))[::-1]
        put("consensus eigengap", name, c[np.argmax(ev[c - 1] - ev[c])])
        for method in ("average", "single"):
            h = linkage(squareform(1 - C, checks=False), method=method)[:, 2][::-1]
            put(f"consensus {method}-linkage lifetime", name, c[np.argmax(h[c - 2] - h[c - 1])])
        print(f"rules {name} done", file=sys.stderr, flush=True)
    return list(chosen.items())


def markdown(sets, rows) -> str:
    truth = {name: k for name, (_, k) in sets.items()}
    lines = [
        "# How many clusters: the wider search (issue 52)",
        "",
        "`python benchmarks/bench_auto_k_search.py` (one run; the 23 sets of `bench_defaults.py` "
        "at ≤ 2 000 points, seed 0). A hit: the chosen k equals the labelled k.",
        "",
        "| rule / graph | true k chosen | misses (set: chosen k) |",
        "|---|---:|---|",
    ]
    for label, ks in rows:
        hits = sum(ks[n] == truth[n] for n in ks)
        miss = ", ".join(f"{n}: {k}" for n, k in ks.items() if k != truth[n])
        lines.append(f"| {label} | {hits} / {len(ks)} | {miss} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=bd.RESULTS / "defaults_auto_k_search")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    sets = _load()
    rows = spectral_rules(sets) + graph_grid(sets)
    text = markdown(sets, rows)
    args.out.with_suffix(".md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
