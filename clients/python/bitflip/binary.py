"""Finding the ``bitflip`` binary that local runs, exports and checks call."""
import os
import shutil

from .errors import BitflipError


def _checkout_candidates():
    # This file is clients/python/bitflip/binary.py in a checkout; an installed copy
    # lives in site-packages, so the working directory and its parents are tried too
    # (examples are run from the repository root).
    here = os.path.dirname(os.path.abspath(__file__))
    roots = [os.path.dirname(os.path.dirname(os.path.dirname(here)))]
    d = os.getcwd()
    while True:
        roots.append(d)
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    for r in roots:
        yield os.path.join(r, "build", "bitflip")


def find_binary(explicit=None):
    """The path of the ``bitflip`` binary: ``explicit``, else $BITFLIP_BIN, else the
    PATH, else ``build/bitflip`` of the checkout this package (or the working
    directory) is in."""
    for cand, why in ((explicit, "the bin argument"), (os.environ.get("BITFLIP_BIN"), "$BITFLIP_BIN")):
        if cand:
            if os.path.isfile(cand) and os.access(cand, os.X_OK):
                return os.path.abspath(cand)
            raise BitflipError(f"{why} is {cand!r}, which is not an executable file; "
                               "point it at the bitflip binary (make build puts it in build/bitflip)")
    found = shutil.which("bitflip")
    if found:
        return found
    for cand in _checkout_candidates():
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    raise BitflipError("no bitflip binary found: set BITFLIP_BIN=/path/to/bitflip, put it on the PATH, "
                       "or build it with `make build` in the bitflip checkout (it makes build/bitflip)")
