"""Makes `import vsa` fail with a clear message when the `vsa` package Python is about
to load is not this distribution's (vsa-attention).

FastVideo's older kernel wheel (PyPI name `vsa`) also installs a top-level `vsa`
package. pip treats the two distributions as unrelated, so both can be installed:
then whichever came last owns `vsa/__init__.py` (the files share one folder), or an
earlier entry of sys.path holds the other one. Either way the code that runs on
`import vsa` is not ours, so a check inside our package could never run. This
module lives outside it, at the root of site-packages:

- vsa_attention_guard.pth (beside it) calls install() when Python starts, as the
  site module does for every .pth line that begins with `import`;
- install() puts a finder at the front of sys.meta_path that answers only for the
  name "vsa": it asks the other finders where `vsa` would come from and raises
  ImportError, naming what it found, unless that package's __init__.py carries our
  marker;
- the `vsa` console script enters through main(), which installs the finder itself,
  so the command says the same where the .pth was not read;
- where ours imports but FastVideo's files lie in the same folder (it was installed
  first), a RuntimeWarning says that `pip uninstall vsa` would break ours.

Limits are in the README ("Installing").
"""

# Imported by every interpreter start in this environment (through the .pth): the
# module imports nothing beyond os and sys (which site has loaded already) until a
# `vsa` import needs it; no `from __future__` either, which costs an import.
import os
import sys

DISTRIBUTION = "vsa-attention"
# Our vsa/__init__.py assigns this exact line; FastVideo's does not.
MARKER = f'__distribution__ = "{DISTRIBUTION}"'
# A file FastVideo's wheel puts into vsa/ and ours does not.
FASTVIDEO_FILE = "block_sparse_wrapper.py"


def _is_ours(spec) -> bool:
    if not spec.has_location or not spec.origin or not spec.origin.endswith("__init__.py"):
        return False  # a namespace package, a single module, a zip: never ours
    try:
        with open(spec.origin, encoding="utf-8", errors="replace") as init:
            return MARKER in init.read()
    except OSError:
        return False


def _fastvideo_wheel():
    """'vsa <version>' when a distribution named `vsa` that says it is FastVideo's is installed."""
    from importlib import metadata
    try:
        dist = metadata.distribution("vsa")
    except metadata.PackageNotFoundError:
        return None
    summary = dist.metadata.get("Summary") or ""
    return f"vsa {dist.version}" if "FastVideo" in summary else None


def shadowed_message(spec) -> str:
    where = (spec.origin if spec.has_location and spec.origin
             else ", ".join(spec.submodule_search_locations or []))
    fastvideo = _fastvideo_wheel()
    what = (f"FastVideo's older kernel wheel (PyPI '{fastvideo}'), not {DISTRIBUTION}" if fastvideo
            else f"not {DISTRIBUTION}'s (its __init__.py lacks the line {MARKER})")
    return (f"import vsa: the 'vsa' package Python found at {where} is {what}. Both "
            f"distributions install a top-level 'vsa' package. Fix: `pip uninstall -y vsa "
            f"{DISTRIBUTION}`, then `pip install {DISTRIBUTION}` (or `pip install .` in its "
            f"checkout); or remove the other 'vsa' from sys.path.")


def _warn_if_fastvideo_files_beside(init_path: str) -> None:
    """Ours imports, but FastVideo's wheel was installed into the same folder first: its
    record lists our __init__.py too, so `pip uninstall vsa` would break this install."""
    folder = os.path.dirname(init_path)
    if os.path.exists(os.path.join(folder, FASTVIDEO_FILE)):
        import warnings
        warnings.warn(f"vsa: FastVideo's older 'vsa' wheel is installed in {folder} under "
                      f"{DISTRIBUTION}; `pip uninstall vsa` would delete files of {DISTRIBUTION}. "
                      f"Reinstall cleanly: `pip uninstall -y vsa {DISTRIBUTION}`, then install "
                      f"{DISTRIBUTION}.", RuntimeWarning, stacklevel=2)


class VsaGuard:
    """A sys.meta_path finder (find_spec is all the protocol needs) for the name "vsa"
    only: passes our package through, refuses any other."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "vsa":
            return None
        for finder in sys.meta_path:
            if finder is self or isinstance(finder, VsaGuard) or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if not _is_ours(spec):
                    raise ImportError(shadowed_message(spec), name="vsa")
                _warn_if_fastvideo_files_beside(spec.origin)
                return spec
        return None  # nothing anywhere: Python's own ModuleNotFoundError follows


def install() -> None:
    """Put the guard first on sys.meta_path (once per interpreter)."""
    if not any(isinstance(finder, VsaGuard) for finder in sys.meta_path):
        sys.meta_path.insert(0, VsaGuard())


def main() -> int:
    """The `vsa` console script: the guarded import, then vsa.cli."""
    install()
    try:
        from vsa.cli import main as cli_main
    except ImportError as error:
        if error.name != "vsa":  # an import inside vsa failed: its own traceback says more
            raise
        print(error, file=sys.stderr)
        return 1
    return cli_main()
