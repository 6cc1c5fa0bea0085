"""Training the models the evaluations need: :mod:`.nano`, the GPT-nano SST-2 classifier of the AIEG paper."""
from .nano import NANO_CONFIG, NANO_NAME, nano_path, train_nano

__all__ = ["NANO_CONFIG", "NANO_NAME", "nano_path", "train_nano"]
