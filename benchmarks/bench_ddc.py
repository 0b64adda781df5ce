"""Deep divergence-based clustering on the shipped MNIST subset against its peers, in one run.

Issue 55's acceptance for Paper IV of [Lokse2020] ([Kampffmeyer2019]): one
``DeepDivergenceClustering`` run at its defaults (the CNN on the 5 000 images, grey levels / 255)
reaches ACC >= 0.80 and NMI >= 0.75 within 30 minutes on the 2-core machine; against it
scikit-learn's ``KMeans`` and dkernel's ``SpectralClustering`` (defaults, k = 10) on the pixels
as vectors, and DEC / IDEC from ClustPy at their defaults.

ClustPy imports torchvision, and the package registry's torchvision wheels are built against the
CUDA PyTorch (they do not import beside the CPU build the ``deep`` extra pins). ``--peer-python``
runs the DEC / IDEC rows with another environment's interpreter, one with ClustPy, the CUDA
PyTorch and torchvision (which run on the CPU) and dkernel itself:

    uv venv /path/peers && uv pip install --python /path/peers/bin/python \
        clustpy "torch==2.14.1" "torchvision==0.29.1" -e .
    python benchmarks/bench_ddc.py --peer-python /path/peers/bin/python
Paper Table 1 (all of MNIST, best of 20 by the unsupervised loss): DDC 86.58 % / 0.83,
DEC 84.31 % / 0.81, k-means 53.33 % / 0.50.

Wall time and the process's CPU time are both printed: on a machine shared with other work the
CPU time is the cost of the method, the wall time what a user waited.

    python benchmarks/bench_ddc.py                       # everything, markdown to stdout
    python benchmarks/bench_ddc.py --only ddc --out benchmarks/results/ddc.md

``--auto``: DDC chooses its number of clusters (``n_clusters='auto'``; the chosen number in the
note column), the others keep k = 10:

    python benchmarks/bench_ddc.py --auto --only ddc kmeans --out benchmarks/results/ddc_auto.md

``--holes``: a random 14 × 14 block of every image is missing (NaN; a quarter of the image, as
``bench_realdata.py``'s holed MNIST, drawn from ``--seed``), issue 57's "every clusterer ≥
mean-imputed k-means on data with missing entries". DDC fills each image's hole with its
conditional means (``missing_model_``) and ``SpectralClustering`` takes the NaN vectors; k-means
and DEC / IDEC get the mean-imputed vectors (each pixel's mean over the images that show it).

    python benchmarks/bench_ddc.py --holes --only ddc kmeans spectral \
        --out benchmarks/results/ddc_holes.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from dkernel.data.mnist import load_mnist_5k
from dkernel.metrics import clustering_scores

PAPER = {"DDC": (86.58, 0.83), "DEC": (84.31, 0.81), "k-means": (53.33, 0.50)}
METHODS = ("ddc", "kmeans", "spectral", "dec", "idec")


def _timed(fit: Callable[[], np.ndarray]) -> tuple[np.ndarray, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    labels = np.asarray(fit())
    return labels, time.perf_counter() - wall, time.process_time() - cpu


def _ddc(images: np.ndarray, seed: int, verbose: int, **params: Any) -> np.ndarray:
    from dkernel import DeepDivergenceClustering

    params.setdefault("n_clusters", 10)
    model = DeepDivergenceClustering(random_state=seed, progress=bool(verbose), **params)
    return model.fit(images).labels_


def _kmeans(vectors: np.ndarray, seed: int, verbose: int) -> np.ndarray:
    from sklearn.cluster import KMeans

    return KMeans(n_clusters=10, random_state=seed).fit(vectors).labels_


def _spectral(vectors: np.ndarray, seed: int, verbose: int) -> np.ndarray:
    from dkernel import SpectralClustering

    return SpectralClustering(n_clusters=10, random_state=seed).fit(vectors).labels_


def _clustpy(name: str) -> Callable[[np.ndarray, int, int], np.ndarray]:
    def fit(vectors: np.ndarray, seed: int, verbose: int) -> np.ndarray:
        import clustpy.deep as deep

        model = getattr(deep, name)(n_clusters=10, random_state=seed)
        return model.fit(vectors).labels_

    return fit


RUNNERS: dict[str, tuple[str, str, Callable[[np.ndarray, int, int], np.ndarray]]] = {
    # key: (row name, input, fit)
    "ddc": ("DDC (dkernel, CNN)", "images", _ddc),
    "kmeans": ("k-means (scikit-learn)", "imputed", _kmeans),
    "spectral": ("SpectralClustering (dkernel)", "vectors", _spectral),
    "dec": ("DEC (ClustPy)", "imputed", _clustpy("DEC")),
    "idec": ("IDEC (ClustPy)", "imputed", _clustpy("IDEC")),
}
#: The rows ``peer_python`` runs in its own environment.
CLUSTPY = ("dec", "idec")


def _peer_row(
    python: str, key: str, seed: int, n_images: int | None, verbose: int, holes: bool
) -> dict:
    """One method's row, run by this script under another interpreter (``--json``)."""
    command = [python, __file__, "--only", key, "--seed", str(seed), "--json"]
    if holes:
        command.append("--holes")
    if n_images is not None:
        command += ["--n-images", str(n_images)]
    # the peer's environment has ClustPy, not dkernel: this checkout loads the MNIST subset
    root = str(Path(__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        command,
        stdout=subprocess.PIPE,
        stderr=None if verbose else subprocess.DEVNULL,
        text=True,
        env=env,
    )
    if done.returncode != 0:
        name = RUNNERS[key][0]
        note = f"not run: {python} exited with status {done.returncode}"
        return {"method": name, "acc": None, "nmi": None, "wall_s": None, "cpu_s": None,
                "note": note}  # fmt: skip
    row = json.loads(done.stdout.strip().splitlines()[-1])[0]
    row["note"] = (row["note"] + "; " if row["note"] else "") + f"run by {python}"
    return row


def ddc_rows(
    methods: tuple[str, ...] = METHODS,
    seed: int = 0,
    verbose: int = 0,
    *,
    n_images: int | None = None,
    ddc_params: dict[str, Any] | None = None,
    peer_python: str | None = None,
    holes: bool = False,
) -> list[dict[str, Any]]:
    """One run of each method on the MNIST subset: a dict per method with ``method``, ``acc``,
    ``nmi``, ``wall_s``, ``cpu_s`` and ``note`` (why a method did not run); for
    ``benchmarks/bench_deep.py``. ``n_images`` (the first ``n_images / 10`` images of each
    digit) and ``ddc_params`` (parameters other than the defaults) are for a quick
    check only: the acceptance is all 5 000 images at the defaults. ``peer_python`` runs the
    ClustPy rows with that interpreter (its own environment). ``holes``: a quarter of each
    image missing (the module docstring)."""
    images, labels = load_mnist_5k()
    if n_images is not None:
        keep = np.sort(
            np.concatenate([np.flatnonzero(labels == d)[: n_images // 10] for d in range(10)])
        )
        images, labels = images[keep], labels[keep]
    data = {"images": (images / 255.0).astype(np.float32)}
    if holes:
        data["images"] = _missing_block(data["images"], np.random.default_rng(seed))
    data["vectors"] = data["images"].reshape(len(images), -1)
    data["imputed"] = np.where(
        np.isnan(data["vectors"]), np.nanmean(data["vectors"], axis=0), data["vectors"]
    )
    rows = []
    for key in methods:
        if key in CLUSTPY and peer_python:
            rows.append(_peer_row(peer_python, key, seed, n_images, verbose, holes))
            if verbose:
                r = rows[-1]
                print(f"{r['method']}: ACC {r['acc']} NMI {r['nmi']} wall {r['wall_s']} s "
                      f"cpu {r['cpu_s']} s {r['note']}", flush=True)  # fmt: skip
            continue
        name, kind, fit = RUNNERS[key]
        if key == "ddc" and ddc_params:
            fit = partial(_ddc, **ddc_params)
        try:
            pred, wall, cpu = _timed(lambda fit=fit, kind=kind: fit(data[kind], seed, verbose))
        except ImportError as exc:
            rows.append({"method": name, "acc": None, "nmi": None, "wall_s": None,
                         "cpu_s": None, "note": f"not run: {exc}"})  # fmt: skip
            continue
        scores = clustering_scores(labels, pred)
        note = ""
        if key == "ddc" and (ddc_params or {}).get("n_clusters") == "auto":
            note = f"n_clusters='auto': {np.unique(pred).size} clusters"
        rows.append({"method": name, "acc": scores["acc"], "nmi": scores["nmi"],
                     "wall_s": wall, "cpu_s": cpu, "note": note})  # fmt: skip
        if verbose:
            print(f"{name}: ACC {scores['acc']:.4f} NMI {scores['nmi']:.4f} "
                  f"wall {wall:.1f} s cpu {cpu:.1f} s", flush=True)  # fmt: skip
    return rows


def _missing_block(images: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random (side/2)² block of every square image NaN (a quarter of the image)."""
    out = images.copy()
    side = images.shape[1]
    half = side // 2
    r, c = rng.integers(0, side - half + 1, (2, len(images)))
    for i in range(len(images)):
        out[i, r[i] : r[i] + half, c[i] : c[i] + half] = np.nan
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    ddc = next((r for r in rows if r["method"].startswith("DDC") and r["wall_s"]), None)
    lines = [
        "| method | ACC | NMI | wall s | CPU s | wall / DDC's | CPU / DDC's | note |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        if r["wall_s"] is None:
            lines.append(f"| {r['method']} | – | – | – | – | – | – | {r['note']} |")
            continue
        wall = f"{r['wall_s'] / ddc['wall_s']:.3g}" if ddc else "–"
        cpu = f"{r['cpu_s'] / ddc['cpu_s']:.3g}" if ddc else "–"
        lines.append(
            f"| {r['method']} | {r['acc']:.4f} | {r['nmi']:.4f} | {r['wall_s']:.1f} | "
            f"{r['cpu_s']:.1f} | {wall} | {cpu} | {r['note']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    parser.add_argument("--verbose", type=int, default=1)
    parser.add_argument(
        "--peer-python",
        default=None,
        help="run the DEC / IDEC rows with this interpreter (an environment with ClustPy)",
    )
    parser.add_argument("--n-images", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON only")
    parser.add_argument(
        "--holes", action="store_true", help="a quarter of each image missing (NaN)"
    )
    parser.add_argument(
        "--auto", action="store_true", help="DDC with n_clusters='auto' (the others: k = 10)"
    )
    args = parser.parse_args()
    if args.json:
        rows = ddc_rows(
            tuple(args.only), seed=args.seed, verbose=0, n_images=args.n_images, holes=args.holes
        )
        print(json.dumps(rows))
        return
    import torch

    rows = ddc_rows(
        tuple(args.only),
        seed=args.seed,
        verbose=args.verbose,
        n_images=args.n_images,
        peer_python=args.peer_python,
        holes=args.holes,
        ddc_params={"n_clusters": "auto"} if args.auto else None,
    )
    table = markdown(rows)
    n_images = args.n_images or 5000
    header = (
        f"MNIST subset ({f'{n_images:,}'.replace(',', ' ')} images, {n_images // 10} per digit"
        + ("; a random 14 × 14 block of each missing" if args.holes else "")
        + f"), seed {args.seed}, one run each; "
        f"{platform.node() or 'this machine'}: {os.cpu_count()} cores, "
        f"torch {torch.__version__} with {torch.get_num_threads()} threads.\n"
        "Paper Table 1 (all of MNIST, best of 20): "
        + ", ".join(f"{m} {a} % / {n}" for m, (a, n) in PAPER.items())
        + "."
    )
    print(header)
    print(table)
    if args.out:
        args.out.write_text(header + "\n\n" + table + "\n")


if __name__ == "__main__":
    main()
