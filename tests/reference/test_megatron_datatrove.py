"""Megatron shards byte for byte against a reference writer: datatrove's
`MegatronDocumentTokenizer` (0.10.1, installed in a venv of its own from the package registry),
given the same tokenizer file and the same documents in the same order."""

from __future__ import annotations

import json
import subprocess
import venv
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from corpusclean.jobs.pack import main as pack_main
from corpusclean.pipelines.tokenizers import TokenizerSpec, load_tokenizer

pytestmark = [pytest.mark.reference, pytest.mark.spark, pytest.mark.e2e]

DATATROVE = ("datatrove==0.10.1", "tokenizers>=0.21")
TEXTS = [
    "In the beginning God created the heaven and the earth.",
    "大型语言模型的训练数据需要清洗、去重和打包。",
    "Mixed 文本 with emoji 🙂👩‍💻 and numbers 3.14159",
    "Line one\nline two\r\n\nA paragraph after a blank line.\tTabbed.",
    "",
    "x",
] * 40

# datatrove's writer, run on the documents of a Parquet file in row order.
_DATATROVE_RUN = """
import json, os, sys
os.environ["HF_HUB_OFFLINE"] = "1"
import pyarrow.parquet as pq
from datatrove.data import Document
from datatrove.pipeline.tokens import MegatronDocumentTokenizer
args = json.loads(sys.argv[1])
texts = pq.read_table(args["input"]).column("text").to_pylist()
docs = [Document(text=t, id=str(i)) for i, t in enumerate(texts)]
step = MegatronDocumentTokenizer(
    output_folder=args["output"], save_filename="ref",
    tokenizer_name_or_path=args["tokenizer"], eos_token=args["eos"],
)
step.run(iter(docs), rank=0)
"""


@pytest.fixture(scope="session")
def datatrove_python(tmp_path_factory) -> Path:
    """The python of a new venv holding datatrove (and pyarrow, to read the documents)."""
    root = tmp_path_factory.mktemp("datatrove-venv")
    venv.create(root, with_pip=True)
    python = root / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--no-compile", *DATATROVE, "pyarrow"]
    proc = subprocess.run(pip, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return python


def _tiny_tokenizer(path: Path) -> Path:
    """A byte-level BPE of 300 ids (uint16), its end-of-text token `<|endoftext|>`."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(TEXTS, trainer)
    tok.save(str(path))
    return path


def _clean_output(root: Path) -> Path:
    table = pa.table({"doc_id": [f"d{i:04d}" for i in range(len(TEXTS))], "text": TEXTS})
    (root / "data").mkdir(parents=True)
    pq.write_table(table, root / "data" / "part-00000.parquet")
    (root / "report.json").write_text(json.dumps({"run_id": "r"}))
    (root / "_SUCCESS").write_text("")
    return root


@pytest.mark.parametrize("which", ["deepseek-v3", "tiny"])
def test_megatron_shards_are_datatroves_bytes(
    datatrove_python: Path, tmp_path: Path, which: str
) -> None:
    if which == "tiny":
        tokenizer = str(_tiny_tokenizer(tmp_path / "tokenizer.json"))
    else:
        tokenizer = str(load_tokenizer(TokenizerSpec(which)).path)
    tok = load_tokenizer(TokenizerSpec(tokenizer))
    eos = next(t for t, i in tok.specials.items() if i == tok.eos_id)
    clean = _clean_output(tmp_path / "clean")
    ours = tmp_path / "ours"
    args = ["--input", str(clean), "--output", str(ours), "--tokenizer", tokenizer]
    # Input order and one shard: datatrove writes one file pair of the documents in order.
    for item in ("shard.shuffle=false", "shard.target_bytes=1073741824"):
        args += ["--set", item]
    assert pack_main(args) == 0
    ref = tmp_path / "ref"
    run = {
        "input": str(clean / "data" / "part-00000.parquet"),
        "output": str(ref),
        "tokenizer": tokenizer,
        "eos": eos,
    }
    proc = subprocess.run(
        [str(datatrove_python), "-c", _DATATROVE_RUN, json.dumps(run)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    index = json.loads((ours / "index.json").read_text())
    assert index["totals"]["shards"] == 1
    expected_dtype = "uint16" if which == "tiny" else "int32"
    assert index["tokenizer"]["dtype"] == expected_dtype
    for ext in (".bin", ".idx"):
        theirs = (ref / f"ref_00000_tokens{ext}").read_bytes()
        assert (ours / f"shard-000000{ext}").read_bytes() == theirs, ext
