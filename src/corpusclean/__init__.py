"""corpusclean: clean, deduplicate, check and pack text corpora for large-model training."""

from importlib.metadata import PackageNotFoundError, version

from corpusclean import _zipimport_fix

# Every Spark Python worker imports this package with the first task's function, so the fix
# is in place for the tasks after it (see the module's docstring for the measured cost).
_zipimport_fix.install()

try:
    __version__ = version("corpusclean")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"
