"""Options several commands share: which model, on which device, in which dtype."""
from __future__ import annotations

import argparse

from ..core.validation import DEVICE_MAPS, DTYPES

__all__ = ["add_model_options", "placement"]


def add_model_options(p) -> None:
    """Add ``--model``, ``--device``, ``--dtype`` and ``--device-map`` to the parser ``p``."""
    p.add_argument("--model", default=None, help="hub id or local directory (default: embedded SmolLM2-135M-Instruct)")
    p.add_argument("--device", default=argparse.SUPPRESS, metavar="DEVICE",
                   help="cpu, cuda, cuda:N or auto (the default: CUDA when available, else the CPU); under torchrun "
                        "auto and cuda mean each process's own GPU (cuda:LOCAL_RANK)")
    p.add_argument("--dtype", choices=list(DTYPES), default="float32",
                   help="parameter dtype of the model (default: float32); F, the path sums and the scores stay float32 "
                        "(README: mixed precision)")
    p.add_argument("--device-map", choices=list(DEVICE_MAPS), default=None,
                   help="place a model larger than one device over the GPUs (then CPU) with accelerate; not with --device")


def placement(args) -> dict:
    """``device``, ``dtype`` and ``device_map`` keyword arguments of ``load_model`` (and of
    ``evaluate`` / ``attribute_dataset``) from the parsed options: ``--device`` defaults to
    ``auto`` unless ``--device-map`` places the model.

    Raises:
        ValueError: ``--device`` together with ``--device-map``.
    """
    device = getattr(args, "device", None)  # absent when not given
    if device is not None and args.device_map is not None:
        raise ValueError(f"--device {device} and --device-map {args.device_map} exclude each other: --device-map places the model")
    return {"device": None if args.device_map is not None else (device or "auto"), "dtype": args.dtype,
            "device_map": args.device_map}
