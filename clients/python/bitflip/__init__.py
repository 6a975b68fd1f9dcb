"""bitflip: fault injection (bit flips) in neural networks, from Python.

- :func:`export` a PyTorch model to ONNX the way fault injection needs it, with
  its eval set, checked against PyTorch (a language model too:
  ``task="language_model"``); :func:`save_eval_set` on its own, and
  :func:`save_lm_eval_set` for token ids; a torchvision detector or segmenter
  too (:func:`save_detection_eval_set`, :func:`save_segmentation_eval_set`).
- :func:`run` a campaign here (the ``bitflip`` binary) or on a bitflipd
  (:class:`Client`); both return a :class:`Result`.
- ``Result.to_pandas()``, ``Trials.to_pandas()`` and :mod:`bitflip.plot`.

The client needs only the standard library; numpy, pandas, matplotlib and torch
are imported by the functions that use them. docs/PYTHON.md is the guide.
"""
from .binary import find_binary
from .client import Client, Event
from .errors import (ApiError, BitflipError, CampaignFailed, ConnectionFailed, ExportError, ExportMismatch,
                     RunError)
from .local import run
from .result import Result, Trials
from . import plot  # noqa: E402 - matplotlib is imported on use
from .safetensors import read_safetensors, save_eval_set, save_lm_eval_set, write_safetensors
from .vision import save_detection_eval_set, save_segmentation_eval_set

__version__ = "0.1.0"


def export(*args, **kwargs):
    """See :func:`bitflip.torch_export.export` (imported on first use: it needs torch)."""
    from .torch_export import export as _export
    return _export(*args, **kwargs)


__all__ = ["ApiError", "BitflipError", "CampaignFailed", "Client", "ConnectionFailed", "Event", "ExportError",
           "ExportMismatch", "Result", "RunError", "Trials", "export", "find_binary", "read_safetensors", "run",
           "plot", "save_detection_eval_set", "save_eval_set", "save_lm_eval_set",
           "save_segmentation_eval_set", "write_safetensors"]
