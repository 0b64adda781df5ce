"""Start a Dask cluster on SLURM or PBS with dask-jobqueue and keep it up for dkernel jobs.

Run on a login node (inside tmux/screen), with dkernel and dask-jobqueue installed::

    pip install dask-jobqueue
    python deploy/hpc/start_cluster.py --system slurm --jobs 8 --address-file scheduler.txt

then, from the same login node::

    dkernel submit jobs/pck-statlog.yaml --scheduler "$(cat scheduler.txt)"

Worker settings (cores, memory, queue, account, prologue) come from ``jobqueue.yaml`` next to
this script (or your own ``~/.config/dask/jobqueue.yaml``).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", choices=("slurm", "pbs"), default="slurm")
    parser.add_argument("--jobs", type=int, default=4, help="batch jobs (= workers) to request")
    parser.add_argument("--adapt-max", type=int, default=0, help="scale adaptively up to N jobs")
    parser.add_argument("--address-file", type=Path, default=Path("scheduler.txt"))
    parser.add_argument("--dashboard-port", type=int, default=8787)
    args = parser.parse_args(argv)

    import dask
    import yaml

    with open(HERE / "jobqueue.yaml", encoding="utf-8") as fh:
        dask.config.update(dask.config.config, yaml.safe_load(fh), priority="old")
    # the scheduler runs in this process: dkernel's cluster settings (deploy/dask/dkernel.yaml;
    # the workers read the same file through DASK_CONFIG, see jobqueue.yaml's prologue)
    with open(HERE.parent / "dask" / "dkernel.yaml", encoding="utf-8") as fh:
        dask.config.update(dask.config.config, yaml.safe_load(fh), priority="new")

    from dask_jobqueue import PBSCluster, SLURMCluster

    cls = SLURMCluster if args.system == "slurm" else PBSCluster
    cluster = cls(scheduler_options={"dashboard_address": f":{args.dashboard_port}"})
    if args.adapt_max:
        cluster.adapt(minimum_jobs=1, maximum_jobs=args.adapt_max)
    else:
        cluster.scale(jobs=args.jobs)
    args.address_file.write_text(cluster.scheduler_address + "\n")
    print(cluster.job_script())
    print(f"scheduler: {cluster.scheduler_address} (written to {args.address_file})")
    print(
        f"dashboard: {cluster.dashboard_link}  (ssh -L {args.dashboard_port}:localhost:"
        f"{args.dashboard_port} login-node)"
    )

    stop = False

    def _stop(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    while not stop:
        time.sleep(1)
    cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
