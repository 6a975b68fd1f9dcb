"""The exceptions bitflip raises, and the lazy imports of the optional extras.

Every error names what is at fault and what to do about it, as the daemon and the
CLI do: an API error carries the problem+json document the daemon sent.
"""
import importlib


class BitflipError(Exception):
    """Base class of every error this package raises on purpose."""


class ApiError(BitflipError):
    """bitflipd answered with an error (application/problem+json, RFC 9457).

    ``status``, ``title``, ``detail``, ``type``, ``instance`` and ``errors`` (the
    list of ``{"pointer", "detail"}`` a spec with problems gets) are the daemon's;
    ``method`` and ``url`` say which request it answered.
    """

    def __init__(self, status, title=None, detail=None, type=None, instance=None, errors=None,
                 method=None, url=None, body=None, retry_after=None):
        self.status = status
        self.title = title
        self.detail = detail
        self.type = type
        self.instance = instance
        self.errors = list(errors or [])
        self.method = method
        self.url = url
        self.body = body
        self.retry_after = retry_after
        msg = f"{method or 'request'} {url or ''}: HTTP {status}"
        if title:
            msg += f" {title}"
        if detail:
            msg += f": {detail}"
        for e in self.errors:
            if isinstance(e, dict):
                msg += f"\n  {e.get('pointer', '')}: {e.get('detail', '')}"
        super().__init__(msg)


class ConnectionFailed(BitflipError):
    """The daemon could not be reached (refused, timed out, bad URL)."""


class RunError(BitflipError):
    """A local run of the ``bitflip`` binary failed; ``returncode`` and ``stderr`` say how."""

    def __init__(self, message, returncode=None, stderr=""):
        self.returncode = returncode
        self.stderr = stderr
        super().__init__(message)


class CampaignFailed(BitflipError):
    """A campaign ended in state ``failed`` or ``canceled``; ``state`` and ``error`` are the daemon's."""

    def __init__(self, campaign, state, error):
        self.campaign = campaign
        self.state = state
        self.error = error
        super().__init__(f"campaign {campaign} ended {state}" + (f": {error}" if error else ""))


class ExportError(BitflipError):
    """The export could not be made or checked."""


class ExportMismatch(ExportError):
    """bitflip and PyTorch disagree on an exported model's outputs.

    ``output`` (its ONNX name), ``sample``, ``index`` (within the sample),
    ``bitflip`` and ``torch`` (the two values) locate the first difference.
    """

    def __init__(self, message, output, sample, index, bitflip, torch):
        self.output = output
        self.sample = sample
        self.index = index
        self.bitflip = bitflip
        self.torch = torch
        super().__init__(message)


# What each optional module is called in Debian, and as a pip extra.
_DEBIAN = {"numpy": "python3-numpy", "pandas": "python3-pandas", "matplotlib": "python3-matplotlib",
           "torch": "python3-torch", "torchvision": "python3-torchvision"}


def need(module, what):
    """Imports an optional dependency, or raises an ImportError saying how to get it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        top = module.split(".")[0]
        deb = _DEBIAN.get(top, "python3-" + top)
        raise ImportError(
            f"{what} needs {top}, which is not installed: on Debian `apt-get install {deb}` "
            f"(in a venv, make it with `python3 -m venv --system-site-packages` so that it sees "
            f"Debian's packages), elsewhere `pip install {top}`") from e
