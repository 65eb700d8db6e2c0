"""The public-domain Bible corpus (../shared/corpora/bible): its chapters, verse by verse.

Each translation is a folder of one text file per book, a verse a line as `[chapter:verse] text`.
bench/near_dedup.py and bench/filters.py make their documents from these chapters.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path

VERSE = re.compile(r"^\[(\d+):(\d+)\]\s*(.*)$")


def chapters(
    root: Path, translations: Sequence[str] | None = None, refs: bool = False
) -> Iterator[tuple[str, str, int, list[str]]]:
    """(translation, book, chapter, verses) of every chapter under `root`, in a fixed order
    (translations and books by name, chapters by number); only `translations` when given.
    A verse is its text, or with `refs` its whole line, `[chapter:verse] ` prefix included."""
    wanted = set(translations) if translations else None
    for translation in sorted(p for p in root.iterdir() if p.is_dir()):
        if wanted is not None and translation.name not in wanted:
            continue
        for book_file in sorted(translation.glob("*.txt")):
            book = book_file.stem.split(" - ")[0]
            found: dict[int, list[str]] = {}
            for line in book_file.read_text("utf-8").splitlines():
                m = VERSE.match(line.strip())
                if m:
                    found.setdefault(int(m.group(1)), []).append(
                        line.strip() if refs else m.group(3)
                    )
            for ch, verses in sorted(found.items()):
                yield translation.name, book, ch, verses
