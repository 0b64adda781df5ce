"""Issue 55's three acceptance tables in one run: the echo state network (Paper V), the deep
kernelized autoencoder (Paper III) and deep divergence-based clustering (Paper IV) of
[Lokse2020].

Each table comes from its own benchmark module, called here rather than copied:

* ESN: ``bench_esn.run()``, test NRMSE of ridge, ridge + PCA, ridge + kernel PCA and
  reservoirpy's ESN on Mackey–Glass, NARMA and MSO (the tuned hyperparameters of
  ``bench_esn.TUNED``), beside the paper's Table 3.
* dkAE: ``bench_dkae.run_tables()`` and ``bench_dkae.rows()``, Tables 1-3 of [Kampffmeyer2018]
  on the shipped MNIST subset, with the acceptance checks.
* DDC: ``bench_ddc.ddc_rows()``, ACC / NMI / times of ``DeepDivergenceClustering`` at its
  defaults against k-means, dkernel's ``SpectralClustering`` and ClustPy's DEC / IDEC (in
  their own environment with ``--peer-python``) on the shipped MNIST subset.

The full run is what the results files under ``benchmarks/results/`` (``esn.md``, ``dkae.md``,
``ddc.md``) record; it takes hours of CPU on a small machine (the dkAE's SVM stage and the DDC
at defaults dominate). ``--quick`` checks that the whole chain runs in minutes: one reservoir
seed, the dkAE for 2 epochs with 100-unit codes on 1 000 images, DDC for 2 epochs on 1 000
images and no ClustPy; its numbers are not the acceptance's.

    python benchmarks/bench_deep.py --quick
    python benchmarks/bench_deep.py [--only esn dkae ddc] [--out benchmarks/results/deep.md]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_ddc  # noqa: E402
import bench_dkae  # noqa: E402
import bench_esn  # noqa: E402

TABLES = ("esn", "dkae", "ddc")


def esn_table(quick: bool) -> str:
    rows = bench_esn.run(seeds=(0,) if quick else bench_esn.SEEDS)
    return bench_esn.table(rows)


def dkae_table(quick: bool) -> str:
    if quick:
        out = bench_dkae.run_tables(2, 100, n_images=1000)
    else:
        out = bench_dkae.run_tables()
    lines = ["| table | representation | value | paper |", "|---|---|---|---|"]
    for r in bench_dkae.rows(out):
        paper = "–" if r["paper"] is None else f"{r['paper']:g}"
        lines.append(f"| {r['table']} | {r['representation']} | {r['value']:.4g} | {paper} |")
    lines += ["", *(f"- {k}: {'yes' if v else 'NO'}" for k, v in out["acceptance"].items())]
    return "\n".join(lines)


def ddc_table(quick: bool, peer_python: str | None = None) -> str:
    if quick:
        rows = bench_ddc.ddc_rows(
            ("ddc", "kmeans", "spectral"), n_images=1000, ddc_params={"max_iter": 2}
        )
    else:
        rows = bench_ddc.ddc_rows(peer_python=peer_python)
    return bench_ddc.markdown(rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="minutes, not the acceptance run")
    parser.add_argument("--only", nargs="+", choices=TABLES, default=list(TABLES))
    parser.add_argument("--out", type=Path, default=None, help="also write the tables here")
    parser.add_argument(
        "--peer-python",
        default=None,
        help="DDC table: run ClustPy's DEC / IDEC with this interpreter (bench_ddc.py's docstring)",
    )
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    makers = {
        "esn": esn_table,
        "dkae": dkae_table,
        "ddc": lambda quick: ddc_table(quick, args.peer_python),
    }
    titles = {
        "esn": "ESN (Paper V of [Lokse2020]): test NRMSE",
        "dkae": "dkAE (Paper III of [Lokse2020]): Tables 1-3 of [Kampffmeyer2018]",
        "ddc": "DDC (Paper IV of [Lokse2020]): MNIST subset, ACC / NMI and times",
    }
    parts = [
        f"# Issue 55's acceptance tables{' (--quick: not the acceptance numbers)' * args.quick}",
        "",
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), {os.cpu_count()} cores.",
    ]
    seconds: dict[str, float] = {}
    for name in args.only:
        start = time.perf_counter()
        text = makers[name](args.quick)
        seconds[name] = time.perf_counter() - start
        parts += ["", f"## {titles[name]} ({seconds[name]:.0f} s)", "", text]
        print("\n".join(parts[-4:]), flush=True)
    if args.out:
        args.out.write_text("\n".join(parts) + "\n")
    return seconds


if __name__ == "__main__":
    main()
