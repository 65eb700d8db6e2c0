"""Import every module of a `--py-files` zip from the zip alone: `python -I import_all.py ZIP`.

Run in a fresh interpreter so nothing imported before can hide a missing file; each module must
come from the zip (not from an installed copy), and the package data must read through
importlib.resources. Prints the number of modules found.
"""

import importlib
import sys
import zipfile
from importlib import resources

zip_path = sys.argv[1]
sys.path.insert(0, zip_path)
names = sorted(
    n[:-3].replace("/", ".").removesuffix(".__init__")
    for n in zipfile.ZipFile(zip_path).namelist()
    if n.endswith(".py")
)
for name in names:
    if name.endswith("__main__"):  # the `python -m` entry runs the CLI when imported
        continue
    module = importlib.import_module(name)
    assert module.__file__ is not None and module.__file__.startswith(zip_path), name
resources.files("corpusclean.conf").joinpath("default.yaml").read_text()
resources.files("corpusclean.conf").joinpath("spark", "cluster.properties").read_text()
resources.files("corpusclean.schemas").joinpath("clean_docs.json").read_text()
print(len(names))
