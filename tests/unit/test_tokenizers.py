"""Tokenizers offline (pipelines/tokenizers.py): presets from installed packages, the three file
kinds, framing with BOS/EOS, round trips, counts equal to the library's own, bad input."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import sentencepiece
import tiktoken
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models, pre_tokenizers, trainers

from corpusclean.errors import ConfigError, InputError
from corpusclean.pipelines.tokenizers import (
    PATTERNS,
    PRESETS,
    TokenizerSpec,
    load_tokenizer,
    worker_tokenizer,
)

# CJK, emoji (astral, with a joiner), mixed scripts, combining marks, tabs and CRLF, RTL.
SAMPLES = [
    "The quick brown fox jumps over the lazy dog.",
    "大型语言模型的训练数据需要清洗、去重和打包。",
    "混合 mixed 文本 with 数字 12345 and emoji 🙂👩‍💻🇨🇳",
    "日本語のテキストも、한국어 텍스트도 тоже русский, العربية.",
    "Tabs\tand\r\nCRLF lines\n\n  indented   spaces  ",
    "e\u0301 (e + combining acute) and ½ ① ﬁ ligatures",
    "def f(x):\n    return x ** 2  # code\n",
    "",
]


@pytest.fixture(scope="module", params=sorted(PRESETS))
def preset(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_every_preset_loads_from_its_package_and_names_itself(preset: str) -> None:
    tok = load_tokenizer(TokenizerSpec(preset))
    ident = tok.identity()
    assert ident["name"] == preset and ident["vocab_size"] > 100_000
    assert len(ident["sha256"]) == 64 and ident["eos_id"] is not None and ident["add_eos"]
    assert tok.dtype() == np.int32, "a vocabulary over 65,536 ids needs int32"


def test_every_preset_round_trips_mixed_scripts(preset: str) -> None:
    tok = load_tokenizer(TokenizerSpec(preset))
    ids, offsets = tok.encode(pa.array(SAMPLES))
    assert offsets.size == len(SAMPLES) + 1 and offsets[-1] == ids.size
    for i, text in enumerate(SAMPLES):
        doc = ids[offsets[i] : offsets[i + 1]]
        assert doc[-1] == tok.eos_id, "every document ends with the end-of-text token"
        expected = text
        if tok.nfc:
            import unicodedata

            expected = unicodedata.normalize("NFC", text)
        assert tok.decode(doc.tolist()) == expected


def test_counts_equal_the_librarys_own(preset: str) -> None:
    tok = load_tokenizer(TokenizerSpec(preset))
    counts = tok.count(pa.array(SAMPLES))
    if tok.kind == "hf":
        raw = HFTokenizer.from_file(str(tok.path))
        own = [len(raw.encode(t, add_special_tokens=False).ids) for t in SAMPLES]
    else:
        import unicodedata

        own = [len(tok._engine.encode_ordinary(unicodedata.normalize("NFC", t))) for t in SAMPLES]
    assert counts.tolist() == [n + 1 for n in own], "the library's ids plus the EOS"


def test_a_special_tokens_spelling_in_a_document_stays_text(preset: str) -> None:
    tok = load_tokenizer(TokenizerSpec(preset))
    eos = next(t for t, i in tok.specials.items() if i == tok.eos_id)
    ids, offsets = tok.encode(pa.array([f"before {eos} after"]))
    body = ids[: offsets[1] - 1].tolist()
    assert tok.eos_id not in body, "the spelling is not the special id"
    assert tok.decode(body) == f"before {eos} after"


def test_nulls_are_empty_documents_and_framing_can_be_overridden() -> None:
    tok = load_tokenizer(TokenizerSpec("qwen2.5", add_eos=False))
    ids, offsets = tok.encode(pa.array([None, "a"]))
    assert offsets.tolist() == [0, 0, 1]
    both = load_tokenizer(TokenizerSpec("deepseek-v3", add_bos=True, eos_token="<｜▁pad▁｜>"))
    ids, offsets = both.encode(pa.array([None, "a"]))
    assert ids[:2].tolist() == [0, 2], "BOS, then the EOS asked for"
    assert both.identity()["bos_id"] == 0 and both.identity()["eos_id"] == 2


def test_worker_tokenizer_loads_once() -> None:
    spec = TokenizerSpec("qwen2.5")
    assert worker_tokenizer(spec) is worker_tokenizer(spec)


# --------------------------------------------------------------------------- files


def _bpe_json(tmp_path: Path, vocab: int = 300, config: dict | None = None) -> Path:
    tok = HFTokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=["<|endoftext|>", "<s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(SAMPLES * 20, trainer)
    from tokenizers import decoders

    tok.decoder = decoders.ByteLevel()
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    if config is not None:
        (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    return path


def test_a_tokenizer_json_file_round_trips_and_fits_uint16(tmp_path: Path) -> None:
    tok = load_tokenizer(TokenizerSpec(str(_bpe_json(tmp_path))))
    assert tok.kind == "hf" and tok.dtype() == np.uint16 and not tok.add_bos
    assert tok.eos_id == tok.specials["<|endoftext|>"], "found by its common spelling"
    ids, offsets = tok.encode(pa.array(SAMPLES))
    for i, text in enumerate(SAMPLES):
        assert tok.decode(ids[offsets[i] : offsets[i + 1]].tolist()) == text
    assert load_tokenizer(TokenizerSpec(str(tmp_path))).path == tok.path, "a folder names it"


def test_tokenizer_config_beside_the_file_gives_the_convention(tmp_path: Path) -> None:
    config = {"add_bos_token": True, "bos_token": "<s>", "eos_token": {"content": "<s>"}}
    tok = load_tokenizer(TokenizerSpec(str(_bpe_json(tmp_path, config=config))))
    assert tok.add_bos and tok.bos_id == tok.specials["<s>"] == tok.eos_id


def test_a_tiktoken_file_needs_its_pattern_and_its_specials(tmp_path: Path) -> None:
    ranks = {bytes([b]): b for b in range(256)}
    ranks[b"th"] = 256
    ranks[b"the"] = 257
    path = tmp_path / "tiny.tiktoken"
    path.write_text(
        "".join(f"{base64.b64encode(k).decode()} {v}\n" for k, v in ranks.items()), "ascii"
    )
    with pytest.raises(ConfigError, match=r"set tokens\.pattern"):
        load_tokenizer(TokenizerSpec(str(path)))
    with pytest.raises(ConfigError, match="no end-of-text token"):
        load_tokenizer(TokenizerSpec(str(path), pattern="cl100k"))
    spec = TokenizerSpec(str(path), pattern="cl100k", specials=(("<|endoftext|>", 258),))
    tok = load_tokenizer(spec)
    ids, _ = tok.encode(pa.array(["the theme"]))
    assert ids.tolist()[-1] == 258 and tok.decode(ids.tolist()) == "the theme"
    assert tok.dtype() == np.uint16
    raw = tiktoken.Encoding(
        "t", pat_str=PATTERNS["cl100k"], mergeable_ranks=ranks, special_tokens={}
    )
    assert ids.tolist()[:-1] == raw.encode_ordinary("the theme")


def test_a_sentencepiece_model_round_trips(tmp_path: Path) -> None:
    import io

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(SAMPLES[:-1] * 50),
        model_writer=model,
        vocab_size=380,
        character_coverage=1.0,
        byte_fallback=True,
        minloglevel=2,
    )
    path = tmp_path / "tiny.model"
    path.write_bytes(model.getvalue())
    tok = load_tokenizer(TokenizerSpec(str(path)))
    assert tok.kind == "sentencepiece" and tok.add_bos and tok.add_eos
    ids, _ = tok.encode(pa.array(["hello 世界"]))
    assert ids[0] == tok.bos_id and ids[-1] == tok.eos_id
    assert tok.decode(ids.tolist()) == "hello 世界"


# --------------------------------------------------------------------------- refusals


def test_an_unknown_name_lists_the_presets() -> None:
    with pytest.raises(ConfigError, match=r"unknown tokenizer 'gpt5'.*deepseek-v3.*qwen2\.5"):
        load_tokenizer(TokenizerSpec("gpt5"))


@pytest.mark.parametrize(
    ("name", "data", "needle"),
    [
        ("tokenizer.json", b'{"not": "a tokenizer"}', r"not a readable tokenizer\.json"),
        ("x.model", b"\x00garbage", "not a readable SentencePiece model"),
        ("x.tiktoken", b"not base64 at all\n", r"not a readable \.tiktoken"),
        ("vocab.txt", b"a\nb\n", r"not a tokenizer\.json, a \.tiktoken"),
    ],
)
def test_a_file_that_is_no_tokenizer_is_refused(
    tmp_path: Path, name: str, data: bytes, needle: str
) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(InputError, match=needle):
        load_tokenizer(TokenizerSpec(str(path), pattern="cl100k"))


def test_a_missing_file_and_a_dtype_too_small_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        load_tokenizer(TokenizerSpec(str(tmp_path / "none.json")))
    tok = load_tokenizer(TokenizerSpec("qwen2.5"))
    with pytest.raises(ConfigError, match=r"tokens\.dtype=uint16 holds ids below 65,536"):
        tok.dtype("uint16")
    assert tok.dtype("int32") == np.int32
