"""Scale benchmark: a 1000 × 1000 × 6 image-like scene (10⁶ pixels) through MSSC.

Part 1 runs the ``mssc`` job end to end (npy-raster reader → k-means seeds → Gaussian mean
shift → every pixel streamed through mean shift in Dask chunks → RFF Cauchy–Schwarz affinity
→ KPCA + k-means → store, label GeoTIFF, PNG) on an embedded 2-worker LocalCluster and
records wall time and peak memory of the whole process tree.

Part 2 compares the mean-shift stage alone with scikit-learn's
``MeanShift(bin_seeding=True)`` (flat kernel, its scalable mode) on the same pixel features
and bandwidth: time, peak memory, number of modes, or its failure / timeout.

Run: ``python benchmarks/bench_meanshift_scale.py [--quick] [--sklearn-timeout 600]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"


def make_scene(n: int = 1000, bands: int = 6, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Smooth regions (Voronoi cells of 6 classes), sharp edges, gradients and noise."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(0, n, (24, 2))
    cls_of_cell = rng.integers(0, 6, 24)
    spectra = rng.uniform(0.1, 0.9, (6, bands))
    rows = np.arange(n, dtype=np.float32)
    img = np.empty((n, n, bands), np.float32)
    truth = np.empty((n, n), np.int32)
    for r0 in range(0, n, 100):  # chunked to bound memory
        rr, cc = np.meshgrid(rows[r0 : r0 + 100], rows, indexing="ij")
        d = (rr[..., None] - centres[:, 0]) ** 2 + (cc[..., None] - centres[:, 1]) ** 2
        cell = np.argmin(d, axis=-1)
        cls = cls_of_cell[cell]
        grad = 0.08 * np.sin(rr / 180.0)[..., None] * np.cos(cc / 240.0)[..., None]
        img[r0 : r0 + 100] = spectra[cls] + grad + rng.normal(0, 0.04, (*cls.shape, bands))
        truth[r0 : r0 + 100] = cls
    return img, truth


class PeakMemory:
    """Samples the RSS of this process and all its children every 0.2 s."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            for p in [me, *me.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            time.sleep(0.2)

    def __enter__(self) -> PeakMemory:
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()


SKLEARN_CHILD = r"""
import json, resource, sys, time
import numpy as np
from sklearn.cluster import MeanShift
X = np.load(sys.argv[1]); h = float(sys.argv[2])
t = time.perf_counter()
ms = MeanShift(bandwidth=h, bin_seeding=True, n_jobs=2).fit(X)
print(json.dumps({"seconds": time.perf_counter() - t, "n_modes": int(len(ms.cluster_centers_)),
                  "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="300 x 300 scene")
    ap.add_argument("--sklearn-timeout", type=float, default=600.0)
    args = ap.parse_args()
    n = 300 if args.quick else 1000
    tmp = Path(tempfile.mkdtemp(prefix="ms-scale-"))
    img, truth = make_scene(n)
    np.save(tmp / "scene.npy", img)
    np.save(tmp / "truth.npy", truth)
    del img
    spec = tmp / "job.yaml"
    spec.write_text(
        "name: scale-mssc\nseed: 0\ndata:\n  reader: npy-raster\n"
        f"  path: {tmp / 'scene.npy'}\n  labels_path: {tmp / 'truth.npy'}\n"
        "  scale: standardize\n  coord_scale: 1.0\nmethod: mssc\nparams:\n  n_clusters: 6\n"
        f"output: {tmp / 'scale.zarr'}\n"
    )

    from dkernel.jobs.runner import run_job
    from dkernel.storage.store import open_results

    lines = [f"# Mean shift / MSSC at scale: {n} × {n} × 6 synthetic scene ({n * n} pixels)", ""]
    with PeakMemory() as mem:
        t = time.perf_counter()
        store = run_job(
            spec,
            n_workers=2,
            threads_per_worker=1,
            progress=False,
            quiet=True,
            log=lambda m: print(m, file=sys.stderr),
        )
        wall = time.perf_counter() - t
    tree = open_results(store)
    attrs = tree["mssc"].attrs
    metrics = dict(tree["metrics"].attrs) if "metrics" in tree else {}
    lines.append(
        f"**MSSC job end to end: {wall:.1f} s wall, peak RSS (process tree) "
        f"{mem.peak / 2**30:.2f} GiB** on 2 workers × 1 thread; timings "
        f"{json.dumps(tree.attrs.get('timings', {}))}; h_ms = {attrs['bandwidth']:.4g}, "
        f"{attrs['n_partitions']} partitions, h_spec = {attrs['spectral_bandwidth']:.4g}, "
        f"affinity {attrs['affinity_method']}; vs the 6 generating classes: "
        + ", ".join(
            f"{k.upper()} {float(v):.3f}" for k, v in metrics.items() if k in ("acc", "nmi", "ari")
        )
    )
    lines.append("")

    # mean-shift stage alone, same features and bandwidth, in this process (NumPy path)
    from dkernel.io.raster import load_npy_raster
    from dkernel.meanshift.estimators import MeanShift

    d = load_npy_raster(str(tmp / "scene.npy"), scale="standardize", coord_scale=1.0)
    X = np.asarray(d.X.compute(), dtype=np.float32)
    np.save(tmp / "features.npy", X)
    h = float(attrs["bandwidth"])
    with PeakMemory() as mem2:
        t = time.perf_counter()
        ms = MeanShift(
            h,
            seeds="kmeans",
            n_seeds=500,
            density="seeds",
            n_density=20000,
            path_radius=0.3,
            random_state=0,
        ).fit(X)
        ours = time.perf_counter() - t
    lines.append(
        f"Our mean-shift stage alone (Gaussian kernel, k-means seeds, every pixel streamed to a "
        f"mode, one process): **{ours:.1f} s**, peak {mem2.peak / 2**30:.2f} GiB, "
        f"{ms.n_partitions_} modes, bandwidth {h:.4g}."
    )
    del X
    child = subprocess.Popen(
        [sys.executable, "-c", SKLEARN_CHILD, str(tmp / "features.npy"), str(h)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    t = time.perf_counter()
    peak = 0
    while child.poll() is None and time.perf_counter() - t < args.sklearn_timeout:
        try:
            peak = max(peak, psutil.Process(child.pid).memory_info().rss)
        except psutil.Error:
            pass
        time.sleep(0.5)
    sk_wall = time.perf_counter() - t
    if child.poll() is None:
        child.kill()
        child.wait()
        sk = (
            f"scikit-learn MeanShift(bin_seeding=True, bandwidth={h:.4g}, n_jobs=2): "
            f"**did not finish within {args.sklearn_timeout:.0f} s** (killed; peak RSS "
            f"{peak / 2**30:.2f} GiB)"
        )
    else:
        out, err = child.communicate()
        if child.returncode == 0:
            r = json.loads(out.strip().splitlines()[-1])
            sk = (
                f"scikit-learn MeanShift(bin_seeding=True, bandwidth={h:.4g}, n_jobs=2): "
                f"**{r['seconds']:.1f} s**, peak {r['maxrss_mib'] / 1024:.2f} GiB, "
                f"{r['n_modes']} modes"
            )
        else:
            sk = f"scikit-learn MeanShift failed after {sk_wall:.0f} s: {err.strip()[-300:]}"
    lines.append(sk + ".")
    lines.append(
        f"\nRatio (sklearn / ours, mean-shift stage): "
        f"{'>' if child.returncode != 0 else ''}{sk_wall / ours:.1f}×"
    )
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.quick:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "mssc_scale.md").write_text(text)


if __name__ == "__main__":
    main()
