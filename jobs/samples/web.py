"""`corpusclean sample --kind web`: English web pages, clean and junk, with the junk's kind known.

The default sample's pseudo-English has no function words, so every heuristic quality filter
(and language ID) rightly rejects it. This corpus is English prose built from real words by a
small grammar, mixed with what the quality filters exist for, each kind in its share, so a
preset's funnel (`--config fineweb`) shows every filter at work on a generated corpus:

- `article`: paragraphs of prose (kept); `cookie`: an article with a cookie banner and a
  terms-of-use line (kept: C4 only drops those lines from its count);
- `menu`: navigation and footer lines around a paragraph (FineWeb: short lines);
- `bullets`: a bulleted list (Gopher: bullet lines); `teasers`: lines ending in "..."
  (Gopher: ellipsis lines); `hashtags`: a post buried in hashtags (Gopher: symbols);
- `boilerplate`: one paragraph repeated (Gopher repetition); `lorem`: placeholder text (C4);
  `code`: a snippet with curly brackets (C4); `table`: rows of numbers (Gopher: words with a
  letter); `stub`: a sentence or two (too short);
- `chinese`: a Chinese page (language ID);
- `exact` / `near`: copies of articles, with their spacing changed, or with a sentence
  changed (the dedup stages).

Each row's kind is in the `kind` column of `_truth.parquet` beside the data, as for the default
sample. Pages are assembled per document in Python: the demo asks for thousands, not millions.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from corpusclean.jobs.samples.dedup import new_output

TRUTH_FILE = "_truth.parquet"

_DET = ["the", "a", "this", "that", "every", "each", "our", "their", "his", "her", "one"]
_ADJ = [
    "old",
    "quiet",
    "small",
    "bright",
    "cold",
    "green",
    "narrow",
    "heavy",
    "early",
    "late",
    "warm",
    "gentle",
    "broad",
    "simple",
    "careful",
    "distant",
    "empty",
    "famous",
    "honest",
    "hidden",
    "local",
    "modern",
    "patient",
    "rapid",
    "steady",
    "useful",
    "wooden",
    "yellow",
    "ancient",
    "busy",
    "calm",
    "clever",
    "curious",
    "deep",
    "fair",
    "gray",
    "happy",
    "kind",
    "long",
]
_NOUN = [
    "farmer",
    "river",
    "village",
    "teacher",
    "market",
    "bridge",
    "garden",
    "letter",
    "window",
    "engine",
    "student",
    "mountain",
    "harbor",
    "kitchen",
    "library",
    "station",
    "doctor",
    "forest",
    "city",
    "road",
    "field",
    "valley",
    "storm",
    "council",
    "museum",
    "factory",
    "island",
    "painter",
    "captain",
    "festival",
    "journey",
    "mill",
    "school",
    "report",
    "machine",
    "orchard",
    "highway",
    "newspaper",
    "tower",
    "workshop",
    "neighbor",
    "morning",
    "evening",
    "winter",
    "summer",
    "family",
    "company",
]
_VERB = [
    "found",
    "built",
    "carried",
    "opened",
    "watched",
    "repaired",
    "visited",
    "painted",
    "crossed",
    "followed",
    "measured",
    "described",
    "cleaned",
    "finished",
    "explored",
    "noticed",
    "protected",
    "planted",
    "moved",
    "changed",
    "studied",
    "shared",
    "reached",
    "closed",
    "delivered",
    "collected",
]
_PREP = [
    "in",
    "on",
    "near",
    "over",
    "under",
    "through",
    "across",
    "behind",
    "beside",
    "toward",
    "from",
    "with",
    "of",
]
_CONJ = ["and", "but", "so", "while", "because", "although"]
_ADV = [
    "slowly",
    "quietly",
    "carefully",
    "early",
    "later",
    "often",
    "never",
    "always",
    "soon",
    "again",
]

_MENU = [
    "Home",
    "About us",
    "Services",
    "Blog",
    "Contact",
    "Log in",
    "Sign up",
    "Search",
    "Careers",
    "Press",
    "Help",
    "Privacy",
]
_FOOTER = [
    "Follow us",
    "Newsletter",
    "Terms",
    "Cookies",
    "Sitemap",
    "Accessibility",
    "Advertise",
    "Subscribe",
    "Copyright 2024",
    "All rights reserved",
    "Back to top",
]
_ZH = [
    "今天的天气很好，我们和朋友一起去公园散步。",
    "公园里有很多人在跑步、唱歌和跳舞。",
    "孩子们在草地上玩耍，老人们坐在长椅上聊天。",
    "这个城市的历史很长，有很多古老的建筑。",
    "我们在学校学习语文、数学和科学。",
    "他每天早上六点起床，然后去工厂上班。",
    "图书馆里很安静，学生们都在认真看书。",
    "这家饭店的菜很好吃，价格也不贵。",
    "春天来了，花园里的花都开了。",
    "她给远方的朋友写了一封很长的信。",
]
# Kinds and their shares of the originals (copies come on top of these).
_KINDS = [
    ("article", 0.55),
    ("cookie", 0.06),
    ("menu", 0.05),
    ("bullets", 0.04),
    ("teasers", 0.03),
    ("hashtags", 0.03),
    ("boilerplate", 0.04),
    ("lorem", 0.03),
    ("code", 0.03),
    ("table", 0.03),
    ("stub", 0.04),
    ("chinese", 0.07),
]
_COPIES = {"exact": 0.05, "near": 0.05}


class _Writer:
    """Sentences and pages from one random generator."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def pick(self, words: list[str]) -> str:
        return words[int(self.rng.integers(len(words)))]

    def clause(self) -> str:
        r = self.pick
        words = [r(_DET), r(_ADJ), r(_NOUN), r(_VERB), r(_DET), r(_NOUN)]
        if self.rng.random() < 0.6:
            words += [r(_PREP), r(_DET), r(_ADJ), r(_NOUN)]
        if self.rng.random() < 0.3:
            words.insert(3, r(_ADV))
        return " ".join(words)

    def sentence(self) -> str:
        text = self.clause()
        if self.rng.random() < 0.5:
            text += f", {self.pick(_CONJ)} {self.clause()}"
        return text[0].upper() + text[1:] + ("." if self.rng.random() < 0.9 else "!")

    def paragraph(self, lo: int = 3, hi: int = 7) -> str:
        return " ".join(self.sentence() for _ in range(int(self.rng.integers(lo, hi + 1))))

    def article(self) -> str:
        n = int(self.rng.integers(2, 7))
        return "\n\n".join(self.paragraph() for _ in range(n))

    def page(self, kind: str) -> str:
        rng, r = self.rng, self.pick
        if kind == "article":
            return self.article()
        if kind == "cookie":
            return (
                "This website uses cookies to give you the best experience.\n"
                + self.article()
                + "\nBy using this site you agree to our terms of use and privacy policy."
            )
        if kind == "menu":
            menu = "\n".join(rng.choice(_MENU, size=10, replace=False).tolist())
            footer = "\n".join(rng.choice(_FOOTER, size=8, replace=False).tolist())
            return f"{menu}\n{self.paragraph(5, 6)}\n{footer}"
        if kind == "bullets":
            items = [f"• {self.clause()}" for _ in range(int(rng.integers(8, 20)))]
            return "\n".join(items)
        if kind == "teasers":
            return "\n".join(
                self.sentence()[: int(rng.integers(40, 70))].rstrip() + "..."
                for _ in range(int(rng.integers(6, 14)))
            )
        if kind == "hashtags":
            tags = " ".join(f"#{r(_ADJ)}{r(_NOUN)}" for _ in range(int(rng.integers(40, 80))))
            return f"{self.sentence()} {self.sentence()}\n{tags}"
        if kind == "boilerplate":
            para = self.paragraph(2, 3)
            return "\n\n".join([self.paragraph()] + [para] * int(rng.integers(4, 8)))
        if kind == "lorem":
            lorem = (
                "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod "
                "tempor incididunt ut labore et dolore magna aliqua."
            )
            return f"{self.paragraph()}\n\n{lorem} {self.paragraph()}"
        if kind == "code":
            code = "function show(item) {\n  return item.name;\n}"
            return f"{self.article()}\n\n{code}\n\n{self.paragraph()}"
        if kind == "table":
            rows = [
                " ".join(str(int(v)) for v in rng.integers(0, 10_000, size=8))
                for _ in range(int(rng.integers(15, 30)))
            ]
            return "Quarterly figures.\n" + "\n".join(rows)
        if kind == "stub":
            return self.sentence() + " " + self.sentence()
        if kind == "chinese":
            picks = rng.choice(len(_ZH), size=int(rng.integers(6, 11)), replace=False)
            return "".join(_ZH[int(i)] for i in picks)
        raise ValueError(kind)


def generate_web(output: str | Path, docs: int, seed: int = 0) -> dict[str, object]:
    """Write `docs` web-like pages to the folder `output` (one Parquet file, doc_id/text/url),
    with `_truth.parquet` naming each row's kind; returns a summary."""
    out = new_output(output, docs)
    rng = np.random.default_rng([seed, 7_000_001])
    writer = _Writer(rng)
    n_copies = {k: int(docs * share) for k, share in _COPIES.items()}
    n_orig = docs - sum(n_copies.values())
    names = [k for k, _ in _KINDS]
    shares = np.array([s for _, s in _KINDS])
    kinds = rng.choice(len(names), size=n_orig, p=shares / shares.sum())
    texts = [writer.page(names[int(k)]) for k in kinds]
    labels = [names[int(k)] for k in kinds]
    articles = [i for i, k in enumerate(labels) if k == "article"]
    for kind, count in n_copies.items():
        for src in rng.choice(articles, size=count).tolist():
            text = texts[src]
            if kind == "exact":
                copy = "  ".join(text.split(" ")) + "\n"
            else:
                parts = text.split(". ")
                parts[int(rng.integers(len(parts)))] = writer.clause()
                copy = ". ".join(parts)
            texts.append(copy)
            labels.append(kind)
    order = rng.permutation(len(texts))
    ids = [f"web-{seed}-{i:08d}" for i in range(len(texts))]
    table = pa.table(
        {
            "doc_id": ids,
            "text": [texts[i] for i in order],
            "url": [f"https://example.org/{labels[i]}/{i}" for i in order],
        }
    )
    # Row groups of 10,000 rows, as the default sample: Spark splits the read by them.
    pq.write_table(table, out / "part-00000.parquet", row_group_size=10_000)
    truth = pa.table({"doc_id": ids, "kind": [labels[i] for i in order]})
    pq.write_table(truth, out / TRUTH_FILE)
    counts = {k: labels.count(k) for k in dict.fromkeys(labels)}
    return {"docs": len(texts), "files": 1, "kinds": counts, "path": str(out)}
