"""The tiny trainer of conftest, for DDP ranks (separate processes import this module to find it), with
one planted failure: rank 1 dies when epoch 3 starts unless ``die_file`` exists, and creates it as it
dies, so the retried run lives."""
import os
from pathlib import Path

from modeling.trainers import register

from .conftest import TinyTrainer


class DyingTiny(TinyTrainer):
    name = "test-ddp-tiny"
    default_config = {**TinyTrainer.default_config, "die_file": ""}

    def batches(self, split, config, epoch, generator, train):
        marker = config.get("die_file")
        if train and marker and epoch >= 2 and os.environ.get("RANK") == "1" and not Path(marker).exists():
            Path(marker).touch()
            os._exit(1)  # as a killed process: no exception, no cleanup
        return super().batches(split, config, epoch, generator, train)


register(DyingTiny())
