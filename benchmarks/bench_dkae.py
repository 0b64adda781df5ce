"""The deep kernelized autoencoder's Tables 1-3 ([Kampffmeyer2018]) on the shipped MNIST subset.

Kampffmeyer, Løkse, Bianchi, Jenssen & Livi (2018), "The deep kernelized autoencoder"
[Kampffmeyer2018], Paper III of [Lokse2020]; table and equation numbers are that paper's.
One run.

Data: ``dkernel.data.mnist.load_mnist_5k()`` (5 000 images, 500 per digit; the paper used
20 000), pixels / 255, shuffled with seed 0 and split 70 / 15 / 15 % (3 500 / 750 / 750).
Prior: the PCK with the paper's Q = G = 30 fitted on 200 training rows, its variance floor
chosen on held-out rows (``DeepKernelizedAutoencoder``'s defaults), architecture
d-500-500-2000-N_c, tied weights, the estimator's λ (the paper's 0.1; another with
``--kernel-weight``), Adam, batches of 200; no layer-wise pretraining, and ``--epochs``
passes (default 60, about 3 minutes a model on this machine; the paper:
30 pretraining epochs per layer + 100 fine-tuning epochs of (n/k)² batches each). The plain
autoencoder (AE) is the same network and schedule with λ = 0.

* Table 2: a linear SVM (C chosen on the validation split) on the dkAE's codes, on the AE's
  codes and on the raw pixels, plus an RBF SVM on the pixels (kSVM); test accuracy. Paper
  (MNIST): SVM 90.60, kSVM 93.80, cSVM 94.80. Each feature set is divided by one number, the
  root mean squared norm of its training rows, so one C grid suits all three; the columns are
  not standardised one by one, which would change the kernel the SVM sees (``Z Zᵀ``, the
  one the dkAE aligns with its prior, into ``Z D⁻² Zᵀ``) and inflates the pixels' near-constant
  borders (standardised, the raw pixels scored 84.27 % against the paper's 90.60 %).
* Table 1: ``L_c(C, K_I) = || C/||C||_F - K_I/||K_I||_F ||_F`` (Eq. 5) on the test split,
  ``C = Z Zᵀ`` of the codes and ``K_I[i, j] = 1`` for two points of one class, else 0; also
  for the prior P (the PCK of the test rows). Paper: P 1.0132, K_AE 1.1417, C 1.0115.
* Table 3: 1-NN accuracy on a 2-D PCA of the codes (PCA and the 1-NN fitted on the training
  split, scored on the test split); KECA ([Jenssen2010], ``dkernel.KECA``, RBF with σ = 15 %
  of the median distance, 10 components) then PCA to 2-D. Paper: KECA 29.5, AE + PCA 30.5,
  dkAE + PCA 39.6.

Run:  python benchmarks/bench_dkae.py [--epochs 60] [--n-components 2000] [--threads 2]
Writes benchmarks/results/dkae.md (and .json). ``run_tables()`` returns the rows for
``benchmarks/bench_deep.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.decomposition import PCA
from sklearn.neighbors import KNeighborsClassifier
from sklearn.svm import SVC, LinearSVC

RESULTS = Path(__file__).resolve().parent / "results"
SVM_C = (1e-2, 1e-1, 1.0, 10.0, 100.0)
KSVM_C = (1.0, 10.0)
PAPER = {
    "table2": {"svm_raw": 90.60, "ksvm_raw": 93.80, "svm_dkae": 94.80},
    "table1": {"prior": 1.0132, "ae": 1.1417, "dkae": 1.0115},
    "table3": {"keca": 29.5, "ae": 30.5, "dkae": 39.6},
}


def load_split(
    seed: int = 0, n_images: int | None = None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """MNIST 5k as (rows / 255 float32, labels), shuffled with ``seed``, split 70 / 15 / 15
    (the first ``n_images`` of the shuffle when given: ``benchmarks/bench_deep.py --quick``)."""
    from dkernel.data.mnist import load_mnist_5k

    images, labels = load_mnist_5k()
    X = images.reshape(len(images), -1).astype(np.float32) / 255.0
    order = np.random.default_rng(seed).permutation(len(X))[:n_images]
    X, y = X[order], labels[order].astype(np.int64)
    a, b = int(0.70 * len(X)), int(0.85 * len(X))
    return {"train": (X[:a], y[:a]), "val": (X[a:b], y[a:b]), "test": (X[b:], y[b:])}


def ideal_kernel_distance(K: np.ndarray, y: np.ndarray) -> float:
    """Eq. 5 between ``K`` and the ideal kernel of labels ``y``."""
    K = np.asarray(K, dtype=np.float64)
    ideal = (y[:, None] == y[None, :]).astype(np.float64)
    return float(np.linalg.norm(K / np.linalg.norm(K) - ideal / np.linalg.norm(ideal)))


def svm_accuracy(
    split: dict, features: Any, *, kernel: str = "linear"
) -> tuple[float, float, float]:
    """Test accuracy (%) of an SVM on ``features(X)``, the C chosen on the validation split,
    and the validation accuracy (%) of that C. The linear SVM sees the features divided by
    the root mean squared norm of the training rows (their geometry kept, see the module's
    docstring)."""
    F = {k: np.asarray(features(v[0]), dtype=np.float64) for k, v in split.items()}
    y = {k: v[1] for k, v in split.items()}
    if kernel == "linear":
        scale = float(np.sqrt(np.mean(np.sum(F["train"] ** 2, axis=1)))) or 1.0
        F = {k: v / scale for k, v in F.items()}
    best: tuple[float, float, Any] = (-1.0, 0.0, None)
    for C in SVM_C if kernel == "linear" else KSVM_C:
        if kernel == "linear":
            model = LinearSVC(C=C, dual="auto", max_iter=2000, random_state=0)
        else:
            model = SVC(C=C, kernel="rbf", gamma="scale")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # LinearSVC's ConvergenceWarning at large C
            model.fit(F["train"], y["train"])
        score = model.score(F["val"], y["val"])
        if score > best[0]:
            best = (score, C, model)
    val, C, model = best
    return 100.0 * float(model.score(F["test"], y["test"])), float(C), 100.0 * val


def pca_1nn(Ztr: np.ndarray, ytr: np.ndarray, Zte: np.ndarray, yte: np.ndarray) -> float:
    """1-NN accuracy (%) on the test split of a 2-D PCA fitted on the training split."""
    pca = PCA(2, random_state=0).fit(Ztr)
    knn = KNeighborsClassifier(1).fit(pca.transform(Ztr), ytr)
    return 100.0 * float(knn.score(pca.transform(Zte), yte))


def _prior_features(dkae: Any, X: np.ndarray) -> np.ndarray:
    """The fitted prior's feature map of ``X`` (the PCK's posteriors), dense."""
    return np.asarray(dkae.prior_kernel_.feature_map.transform(X.astype(np.float64)))


def train(split: dict, weight: float | None, args: argparse.Namespace) -> tuple[Any, float]:
    """The dkAE (``weight`` None: the estimator's default λ) or, at 0, the plain AE."""
    from dkernel import DeepKernelizedAutoencoder

    extra = {} if weight is None else {"kernel_weight": weight}
    model = DeepKernelizedAutoencoder(
        args.n_components,
        **extra,
        max_iter=args.epochs,
        learning_rate_init=args.learning_rate,
        progress=True,
        random_state=args.seed,
    )
    start = time.perf_counter()
    with warnings.catch_warnings():
        # constant border pixels of the 200-row prior sample: the PCK drops them, warned
        warnings.simplefilter("ignore")
        model.fit(split["train"][0])
    return model, time.perf_counter() - start


def run_tables(
    epochs: int = 60,
    n_components: int = 2000,
    *,
    learning_rate: float = 1e-3,
    seed: int = 0,
    threads: int = 1,
    n_images: int | None = None,
    kernel_weight: float | None = None,
    split_seed: int = 0,
) -> dict[str, Any]:
    """Tables 1-3 of [Kampffmeyer2018] on MNIST 5k in one run: the tables (``table1``,
    ``table2``, ``table3``), the validation scores, loss curves, timings and the acceptance of
    issue 55; :func:`rows` flattens them for ``benchmarks/bench_deep.py``. ``n_images``: the
    first rows of the shuffled subset only (a quick check, not the tables). ``kernel_weight``:
    the dkAE's λ (None: the estimator's default). ``split_seed``: the shuffle before the
    70 / 15 / 15 split (``seed`` seeds the networks and the prior)."""
    from dkernel import KECA

    args = argparse.Namespace(
        epochs=epochs,
        n_components=n_components,
        learning_rate=learning_rate,
        seed=seed,
        threads=threads,
        split_seed=split_seed,
    )

    split = load_split(split_seed, n_images)
    (Xtr, ytr), (Xte, yte) = split["train"], split["test"]
    out: dict[str, Any] = {"args": vars(args), "times_s": {}}
    dkae, out["times_s"]["dkae_fit"] = train(split, kernel_weight, args)
    out["args"]["kernel_weight"] = float(dkae.kernel_weight)
    out["prior_reg_covar"] = float(dkae.prior_kernel_.feature_map.reg_covar)
    print(f"dkAE fitted in {out['times_s']['dkae_fit']:.0f} s", flush=True)
    ae, out["times_s"]["ae_fit"] = train(split, 0.0, args)
    print(f"AE fitted in {out['times_s']['ae_fit']:.0f} s", flush=True)
    out["loss_curves"] = {
        "dkae": dkae.loss_curve_,
        "dkae_alignment": dkae.alignment_curve_,
        "dkae_reconstruction": dkae.reconstruction_curve_,
        "ae_reconstruction": ae.reconstruction_curve_,
    }

    start = time.perf_counter()
    t2 = {
        "svm_raw": svm_accuracy(split, lambda A: A),
        "ksvm_raw": svm_accuracy(split, lambda A: A, kernel="rbf"),
        "svm_ae": svm_accuracy(split, ae.transform),
        "svm_dkae": svm_accuracy(split, dkae.transform),
    }
    out["times_s"]["table2"] = time.perf_counter() - start
    out["table2"] = {k: v[0] for k, v in t2.items()}
    out["table2_C"] = {k: v[1] for k, v in t2.items()}
    out["table2_validation"] = {k: v[2] for k, v in t2.items()}

    Zte_dkae, Zte_ae = dkae.transform(Xte), ae.transform(Xte)
    prior_test = dkae.prior_kernel_(Xte.astype(np.float64))
    out["table1"] = {
        "prior": ideal_kernel_distance(prior_test, yte),
        "ae": ideal_kernel_distance(Zte_ae @ Zte_ae.T, yte),
        "dkae": ideal_kernel_distance(Zte_dkae @ Zte_dkae.T, yte),
        "pixels_linear": ideal_kernel_distance(Xte @ Xte.T, yte),
    }

    start = time.perf_counter()
    keca = KECA(n_components=10, kernel="rbf", sigma_fraction=0.15, random_state=0).fit(Xtr)
    out["times_s"]["keca_fit"] = time.perf_counter() - start
    out["table3"] = {
        "keca": pca_1nn(keca.transform(Xtr), ytr, keca.transform(Xte), yte),
        "ae": pca_1nn(ae.transform(Xtr), ytr, Zte_ae, yte),
        "dkae": pca_1nn(dkae.transform(Xtr), ytr, Zte_dkae, yte),
        "pixels": pca_1nn(Xtr, ytr, Xte, yte),
        # the prior's own 2-D embedding (PCA of the PCK's feature map, its centred kernel PCA):
        # what codes that matched the prior exactly would score
        "prior": pca_1nn(_prior_features(dkae, Xtr), ytr, _prior_features(dkae, Xte), yte),
    }
    t1, t2r, t3 = out["table1"], out["table2"], out["table3"]
    out["acceptance"] = {
        "svm_codes_vs_raw_plus_2": t2r["svm_dkae"] >= t2r["svm_raw"] + 2.0,
        "svm_codes_vs_ae": t2r["svm_dkae"] > t2r["svm_ae"],
        "table1_dkae_below_ae": t1["dkae"] < t1["ae"],
        "table3_dkae_above_ae": t3["dkae"] > t3["ae"],
        "table3_dkae_above_keca": t3["dkae"] > t3["keca"],
    }
    return out


def rows(out: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (table, representation): the measured value and the paper's."""
    found = []
    for table in ("table1", "table2", "table3"):
        for name, value in out[table].items():
            found.append(
                {
                    "table": table,
                    "representation": name,
                    "value": value,
                    "paper": PAPER[table].get(name),
                }
            )
    return found


def markdown(out: dict[str, Any]) -> str:
    a, t = out["args"], out["times_s"]
    t1, t2, t3 = out["table1"], out["table2"], out["table3"]
    p1, p2, p3 = PAPER["table1"], PAPER["table2"], PAPER["table3"]
    lines = [
        "# Deep kernelized autoencoder: Tables 1-3 of [Kampffmeyer2018] on MNIST 5k",
        "",
        f"`python benchmarks/bench_dkae.py --epochs {a['epochs']} --n-components "
        f"{a['n_components']} --threads {a['threads']} --seed {a['seed']} --split-seed "
        f"{a.get('split_seed', 0)}` (one run; "
        f"torch threads {a['threads']}; a 2-core machine shared with other jobs).",
        "",
        f"MNIST 5 000 (shipped subset), shuffled with seed {a.get('split_seed', 0)}, 3 500 / 750 / 750 rows; PCK prior "
        "Q = G = 30 on 200 training rows (variance floor chosen on held-out rows: "
        f"{out.get('prior_reg_covar', float('nan')):.3g}); d-500-500-2000-N_c, tied weights, "
        f"λ = {a.get('kernel_weight', 0.1)} (AE: λ = 0), Adam lr {a['learning_rate']}, batches of 200, {a['epochs']} epochs, no pretraining.",
        "",
        f"Fit times: dkAE {t['dkae_fit']:.0f} s, AE {t['ae_fit']:.0f} s, KECA {t['keca_fit']:.0f} s"
        f" (SVMs of Table 2: {t['table2']:.0f} s).",
        "",
        "## Table 2: SVM test accuracy (%), C chosen on the validation split",
        "",
        "| features | accuracy | C | paper |",
        "|---|---|---|---|",
        f"| raw pixels, linear SVM | {t2['svm_raw']:.2f} | {out['table2_C']['svm_raw']:g} "
        f"| {p2['svm_raw']:.2f} |",
        f"| raw pixels, RBF SVM (kSVM) | {t2['ksvm_raw']:.2f} | {out['table2_C']['ksvm_raw']:g} "
        f"| {p2['ksvm_raw']:.2f} |",
        f"| AE codes (λ = 0), linear SVM | {t2['svm_ae']:.2f} | {out['table2_C']['svm_ae']:g} | - |",
        f"| dkAE codes, linear SVM (cSVM) | {t2['svm_dkae']:.2f} | "
        f"{out['table2_C']['svm_dkae']:g} | {p2['svm_dkae']:.2f} |",
        "",
        f"dkAE − raw: {t2['svm_dkae'] - t2['svm_raw']:+.2f} points; dkAE − AE: "
        f"{t2['svm_dkae'] - t2['svm_ae']:+.2f} points.",
        "",
        "## Table 1: L_c(K, K_I) on the test split (lower is nearer the ideal kernel)",
        "",
        "| kernel | L_c | paper |",
        "|---|---|---|",
        f"| prior P (PCK) | {t1['prior']:.4f} | {p1['prior']:.4f} |",
        f"| K_AE (AE codes) | {t1['ae']:.4f} | {p1['ae']:.4f} |",
        f"| C (dkAE codes) | {t1['dkae']:.4f} | {p1['dkae']:.4f} |",
        f"| linear kernel of the pixels | {t1['pixels_linear']:.4f} | - |",
        "",
        f"Improvement of C over K_AE: {100 * (t1['ae'] - t1['dkae']) / t1['ae']:.1f} % "
        f"(paper 12.9 %); C / P = {t1['dkae'] / t1['prior']:.3f}.",
        "",
        "## Table 3: 1-NN test accuracy (%) on a 2-D PCA",
        "",
        "| representation | accuracy | paper |",
        "|---|---|---|",
        f"| KECA (10 components) + PCA | {t3['keca']:.1f} | {p3['keca']:.1f} |",
        f"| AE + PCA | {t3['ae']:.1f} | {p3['ae']:.1f} |",
        f"| dkAE + PCA | {t3['dkae']:.1f} | {p3['dkae']:.1f} |",
        f"| pixels + PCA | {t3['pixels']:.1f} | - |",
        f"| prior (PCK feature map) + PCA | {t3['prior']:.1f} | - |",
        "",
        f"dkAE / AE = {t3['dkae'] / t3['ae']:.3f}, dkAE / KECA = {t3['dkae'] / t3['keca']:.3f}.",
        "",
        "## Acceptance (issue 55)",
        "",
        *(f"- {k}: {'yes' if v else 'NO'}" for k, v in out["acceptance"].items()),
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--n-components", type=int, default=2000)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0, help="the networks' and the prior's")
    parser.add_argument("--split-seed", type=int, default=0, help="the shuffle before the split")
    parser.add_argument(
        "--kernel-weight", type=float, default=None, help="the dkAE's λ (default: the estimator's)"
    )
    parser.add_argument("--out", default="dkae", help="results file name (without .md)")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch

    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    out = run_tables(
        args.epochs,
        args.n_components,
        learning_rate=args.learning_rate,
        seed=args.seed,
        threads=args.threads,
        kernel_weight=args.kernel_weight,
        split_seed=args.split_seed,
    )
    out["times_s"]["total"] = time.perf_counter() - start
    text = markdown(out) + f"\nTotal run time: {out['times_s']['total']:.0f} s.\n"
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}.md").write_text(text)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(out, indent=1, default=float))


if __name__ == "__main__":
    main()
