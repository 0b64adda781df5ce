"""The deep kernelized autoencoder on images with missing pixels, against imputing them first.

The shipped MNIST subset split as ``bench_dkae.py`` splits it (3 500 / 750 / 750 images, pixels
/ 255), with a random 14 × 14 block of every image missing (NaN: a quarter of the image, drawn
from ``--seed``), as ``bench_realdata.py``'s holed MNIST. Side by side, in one run:

* ``DeepKernelizedAutoencoder`` at its defaults on the holed images: its PCK prior models the
  missing pixels itself (PCKID, Paper I of [Lokse2020]: the thesis's "synergy" of Papers I and
  III), the network takes each image with its hole at the conditional means under a Gaussian
  of the training images, and its reconstruction is scored on the observed pixels;
* the same estimator on mean-imputed images (each pixel's mean over the training images that
  show it): what a user would do without missing-value support;
* the mean-imputed pixels themselves, and scikit-learn's ``IterativeImputer`` is left out: on
  784 columns it fits 784 regressions per round (minutes to hours), no one's first choice.

Scores on the test split: 1-NN accuracy of the codes (the training codes as the reference set)
and the ARI of k-means (k = 10) on the test codes; ratios against the mean-imputed pixels.

Run:  python benchmarks/bench_dkae_missing.py [--seed 0] [--epochs 50]
Writes benchmarks/results/dkae_missing.md.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
from bench_ddc import _missing_block
from bench_dkae import load_split
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score
from sklearn.neighbors import KNeighborsClassifier

RESULTS = Path(__file__).resolve().parent / "results"


def scores(Ztr: np.ndarray, ytr: np.ndarray, Zte: np.ndarray, yte: np.ndarray) -> dict:
    knn = KNeighborsClassifier(1).fit(Ztr, ytr)
    labels = KMeans(10, random_state=0).fit_predict(Zte)
    return {
        "knn": 100.0 * float(knn.score(Zte, yte)),
        "ari": float(adjusted_rand_score(yte, labels)),
    }


def main() -> None:
    from dkernel import DeepKernelizedAutoencoder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=None, help="default: the estimator's")
    args = parser.parse_args()

    split = load_split(0)
    rng = np.random.default_rng(args.seed)
    holed = {
        k: (_missing_block(X.reshape(-1, 28, 28), rng).reshape(len(X), -1), y)
        for k, (X, y) in split.items()
    }
    means = np.nanmean(holed["train"][0], axis=0)
    imputed = {k: (np.where(np.isnan(X), means, X), y) for k, (X, y) in holed.items()}
    (Ytr, Yte) = holed["train"][1], holed["test"][1]

    rows = []
    rows.append(
        ("mean-imputed pixels", scores(imputed["train"][0], Ytr, imputed["test"][0], Yte), 0.0)
    )
    extra = {} if args.epochs is None else {"max_iter": args.epochs}
    for name, data in (
        ("dkAE on the holed images", holed),
        ("dkAE on mean-imputed images", imputed),
    ):
        model = DeepKernelizedAutoencoder(random_state=args.seed, **extra)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the PCK drops the prior sample's constant pixels
            model.fit(data["train"][0])
        fit_s = time.perf_counter() - start
        Ztr, Zte = model.transform(data["train"][0]), model.transform(data["test"][0])
        rows.append((name, scores(Ztr, Ytr, Zte, Yte), fit_s))
        print(f"{name}: {rows[-1][1]} in {fit_s:.0f} s", flush=True)

    base = rows[0][1]
    lines = [
        "# The deep kernelized autoencoder with missing pixels (`benchmarks/bench_dkae_missing.py`)",
        "",
        f"`python benchmarks/bench_dkae_missing.py --seed {args.seed}"
        + (f" --epochs {args.epochs}" if args.epochs else "")
        + "`: MNIST 5k split 3 500 / 750 / 750 as `bench_dkae.py`, a random 14 × 14 block of "
        "every image missing; `DeepKernelizedAutoencoder` at its defaults"
        + (f" but {args.epochs} epochs" if args.epochs else "")
        + ". Test split: 1-NN accuracy of the codes (training codes as reference) and the ARI of "
        "k-means (k = 10) on the test codes. One run.",
        "",
        "| features | 1-NN accuracy (%) | / imputed pixels' | k-means ARI | / imputed pixels' | fit (s) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, s, fit_s in rows:
        lines.append(
            f"| {name} | {s['knn']:.2f} | {s['knn'] / base['knn']:.3f} | {s['ari']:.3f} | "
            f"{s['ari'] / base['ari']:.3f} | {fit_s:.0f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    (RESULTS / "dkae_missing.md").write_text(text)


if __name__ == "__main__":
    main()
