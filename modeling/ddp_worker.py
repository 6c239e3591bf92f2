"""One rank of a DDP run, as torchrun starts it (see modeling/engine/ddp.py):

    python -m torch.distributed.run --standalone --nproc_per_node 2 -m modeling.ddp_worker RUN_ID

It lives outside modeling.engine because that package imports the models, and a ``-m`` entry point
imports its package before Django is set up here.

Exit codes: 0 done (rank 0 registered the version), 1 failed, 3 cancelled. A rank that stops with a
non-zero code makes torchrun stop the others, so none waits forever in a collective.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("run_id", type=int)
    parser.add_argument("--trainer-module", default="", help="the module that registers the run's trainer")
    args = parser.parse_args(argv)
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    os.environ["CAPTIONLAB_DDP_RANK"] = str(rank)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    import torch.distributed as dist

    from modeling.engine import ddp
    from modeling.engine.progress import Cancelled, Progress
    from modeling.engine.steps import fail_run
    from modeling.models import TrainingRun
    from modeling.trainers.base import TrainingError

    if args.trainer_module:
        importlib.import_module(args.trainer_module)  # a trainer registered outside modeling.trainers
    run = TrainingRun.objects.get(pk=args.run_id)
    dist.init_process_group(ddp.backend(run.config or {}))
    try:
        ddp.train_rank(run, rank, world, local_rank)
        return 0
    except Cancelled:
        if rank == 0:
            progress = Progress(run)
            progress.log("Cancelled.")
            progress.flush(force=True)
        return 3
    except TrainingError as exc:
        if rank == 0:
            run.refresh_from_db()
            fail_run(run, Progress(run), str(exc))
        return 1
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
