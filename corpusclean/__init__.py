"""corpusclean: clean, deduplicate, check and pack text corpora for large-model training."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("corpusclean")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"
