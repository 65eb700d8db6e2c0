"""Web-like English pages for bench/filters.py: real sentences mixed with what the filters target.

    from weblike import generate, sentence_pool
    ids, texts = generate(20_000, seed=0, sentences=sentence_pool(chapters))

Every page is built from real English sentences (the Bible's, when bench/filters.py is given
the corpus, so the vocabulary, stop words and punctuation are those of real prose) plus the
furniture of crawled pages the heuristic filters exist for: navigation and menu lines, bullet
lists, cookie/privacy/terms lines, "enable JavaScript" lines, lorem ipsum, code and CSS with
curly brackets, teaser lines ending in "..." or "…", hashtags, repeated lines, paragraphs and
phrases, footers, number tables, URL lists, one-line pages, very short pages, and clean
articles. Each kind draws its proportions from a range that straddles the bound it tests
(e.g. a menu page's share of short lines from 0.45 to 0.95 around FineWeb's 0.67), so many
pages fall close to a threshold on either side: the decisions there are the ones where two
implementations of the same rule differ, and a benchmark only of far-off pages would hide it.

A page's kind is the middle part of its doc_id (`web/<kind>/<n>`), so a disagreement names it.
The same seed and sentences give the same pages.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import numpy as np

# A sentence ends at . ! ? (optionally closed by a quote or bracket) followed by a space.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"'”’)])\s+")
_WORD = re.compile(r"[A-Za-z]{3,}")

NAV = [
    "Home",
    "About",
    "About Us",
    "Contact",
    "Contact Us",
    "Blog",
    "News",
    "Events",
    "Products",
    "Services",
    "Shop",
    "Cart",
    "My Account",
    "Log in",
    "Sign up",
    "Register",
    "Search",
    "FAQ",
    "Help",
    "Support",
    "Careers",
    "Press",
    "Sitemap",
    "Gallery",
    "Resources",
    "Downloads",
    "Latest Posts",
    "Categories",
    "Archives",
    "Menu",
    "Skip to content",
    "Next",
    "Previous",
    "Back to top",
    "Read more",
    "Share",
    "Tweet",
    "Subscribe",
]
FOOTER = [
    "© {year} {name} Ltd. All rights reserved.",
    "Copyright {year} {name}",
    "Powered by WordPress",
    "Follow us on Facebook, Twitter and Instagram",
    "Designed by {name} Studio",
    "Contact us | About | Careers | Press",
    "Privacy Policy | Terms of Use | Sitemap",
    "All content on this site is the property of {name}.",
    "Sign up for our newsletter to get the latest news.",
]
POLICY = [
    "This website uses cookies to improve your experience.",
    "We use cookies to give you the best possible experience on our site.",
    "By continuing to browse you agree to our use of cookies.",
    "By using this site you agree to our Terms of Use and Privacy Policy.",
    "Read our cookie policy to learn more.",
    "Please review our privacy policy before submitting the form.",
    "Accept cookies",
    "Privacy policy",
]
JAVASCRIPT = [
    "You must enable JavaScript to view this page.",
    "Please turn on JavaScript in your browser settings to continue.",
    "JavaScript is disabled in your browser.",
    "This site works best with JavaScript enabled.",
    "Javascript required",
]
LOREM = (
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt "
    "ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation "
    "ullamco laboris nisi ut aliquip ex ea commodo consequat. Duis aute irure dolor in "
    "reprehenderit in voluptate velit esse cillum dolore eu fugiat nulla pariatur."
)
CODE = [
    "body { margin: 0; padding: 0; font-family: Arial, sans-serif; }",
    ".nav a { color: #333; text-decoration: none; }",
    "function init() {",
    "  var items = document.querySelectorAll('.item');",
    "  return items.length;",
    "}",
    "if (x > 0) { y = x * 2; }",
    '{"id": 12, "name": "item"}',
    "{{ page.title }}",
    "@media (max-width: 600px) { .sidebar { display: none; } }",
    "{",
    "x {",
]
STUFFING = [
    "best cheap hotels in town",
    "buy now and save",
    "free shipping on all orders",
    "click here to read more",
    "top rated online store",
]
REPEATED_LINES = [
    "Share this:",
    "Read more",
    "Click here to subscribe to our newsletter.",
    "Posted in Uncategorized",
    "Leave a comment",
    "Advertisement",
]
# (kind, share of the pages). Clean articles are a minority on purpose: the junk kinds are
# where the filters' decisions are made, and each still yields many pages that pass.
KINDS: list[tuple[str, float]] = [
    ("article", 0.10),
    ("short", 0.06),
    ("menu", 0.10),
    ("bullets", 0.08),
    ("policy", 0.07),
    ("lorem", 0.04),
    ("code", 0.05),
    ("ellipsis", 0.07),
    ("hashtags", 0.05),
    ("repeat", 0.10),
    ("footer", 0.05),
    ("table", 0.06),
    ("longline", 0.05),
    ("links", 0.03),
    ("messy", 0.05),
    ("catalog", 0.04),
    # Each costs datatrove about a second a filter: one page in 2,000 is enough.
    ("huge", 0.0005),
]


def sentence_pool(documents: Iterable[str]) -> list[str]:
    """Sentences of 3 to 40 words from `documents` (lines joined), in their first-seen order."""
    seen: dict[str, None] = {}
    for doc in documents:
        for s in _SENTENCE_END.split(" ".join(doc.split())):
            if 3 <= len(s.split()) <= 40:
                seen.setdefault(s, None)
    return list(seen)


class _Page:
    """Builds pages of each kind from one random generator and a pool of sentences."""

    def __init__(self, rng: np.random.Generator, sentences: list[str]) -> None:
        self.rng = rng
        self.sentences = sentences
        # Capitalised words of the pool: site names, menu items and hashtags from real words.
        words = sorted({w for s in sentences[:5000] for w in _WORD.findall(s)})
        self.words = words or ["Page"]

    def pick(self, items: list[str]) -> str:
        return items[int(self.rng.integers(len(items)))]

    def between(self, lo: float, hi: float) -> float:
        return float(self.rng.uniform(lo, hi))

    def count(self, lo: int, hi: int) -> int:
        """An integer in lo..hi, both included."""
        return int(self.rng.integers(lo, hi + 1))

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def sentence(self) -> str:
        return self.pick(self.sentences)

    def paragraph(self, lo: int = 1, hi: int = 5) -> str:
        return " ".join(self.sentence() for _ in range(self.count(lo, hi)))

    def paragraphs(self, lo: int, hi: int) -> list[str]:
        return [self.paragraph() for _ in range(self.count(lo, hi))]

    def join(self, blocks: list[str]) -> str:
        """Blocks on lines of their own; blank lines between them on most pages."""
        return ("\n\n" if self.chance(0.6) else "\n").join(blocks)

    def name(self) -> str:
        return self.pick(self.words).capitalize()

    def title(self) -> str:
        return " ".join(self.name() for _ in range(self.count(2, 6)))

    def nav(self) -> str:
        r = self.rng.random()
        if r < 0.1:
            # Separators and arrows of real menus: "·" "→" "›" "|" are punctuation or symbols
            # to Unicode, but not all of them to every implementation's list of punctuation.
            sep = self.pick([" · ", " | ", " / ", " • "])
            return sep.join(self.pick(NAV) for _ in range(self.count(2, 5)))
        if r < 0.15:
            return self.pick(["Read more →", "Next ›", "‹ Prev", "« Older", "Newer »", "↑ Top"])
        return self.pick(NAV) if r < 0.75 else self.name()

    def footer(self) -> str:
        return self.pick(FOOTER).format(year=self.count(2005, 2024), name=self.name())

    # --- the kinds -------------------------------------------------------------------------

    def article(self) -> str:
        blocks = self.paragraphs(1, 8)
        if self.chance(0.4):
            blocks.insert(0, self.title())
        return self.join(blocks)

    def short(self) -> str:
        # 1 to 7 sentences: around Gopher's 50 words and C4's 5 sentences; a few pages with
        # nothing but whitespace or one word (the "empty" reasons).
        if self.chance(0.04):
            return self.pick(["", " ", "\n", "\n\n  \n", "\t", self.name(), "..."])
        n = self.count(1, 7)
        lines = [self.sentence() for _ in range(n)]
        text = "\n".join(lines) if self.chance(0.5) else " ".join(lines)
        return f"{self.title()}\n{text}" if self.chance(0.3) else text

    def catalog(self) -> str:
        # Product lines with no stop words, and 0 to 3 sentences that bring some: around
        # Gopher's two distinct stop words, and its 50 words.
        lines = []
        for _ in range(self.count(3, 25)):
            name = " ".join(self.name() for _ in range(self.count(1, 4)))
            price = f"${self.count(1, 500)}.{self.count(0, 99):02d}"
            mark = self.pick(["", "", "™", "®", " ©", " ★★★★☆"])
            lines.append(
                self.pick([f"{name}{mark} {price}", f"{name} - {price}", f"{name}: {price}"])
            )
        for _ in range(self.count(0, 3)):
            lines.insert(self.count(0, len(lines)), self.sentence())
        return "\n".join(lines)

    def huge(self) -> str:
        # Around Gopher's 100,000 words (a dump): about 25 words a sentence.
        target = self.count(90_000, 110_000)
        out, words = [], 0
        while words < target:
            s = self.paragraph(3, 8)
            out.append(s)
            words += len(s.split())
        return "\n\n".join(out)

    def menu(self) -> str:
        # Menu lines are short and unpunctuated: their share of the lines is drawn around
        # FineWeb's 0.67 short-line bound, and past 0.88 it also breaks the 0.12 bound on
        # lines ending in punctuation.
        body = self.paragraphs(1, 6)
        share = self.between(0.45, 0.95)
        m = min(80, max(1, round(len(body) * share / (1 - share))))
        top = self.count(0, m)
        lines = [self.nav() for _ in range(top)] + body + [self.nav() for _ in range(m - top)]
        return "\n".join(lines)

    def bullets(self) -> str:
        # Bulleted items ("• ", "- ", indented) make up 0.75 to 1.0 of the lines, around
        # Gopher's 0.9. A page keeps one marker, as lists do; "* " pages are not bullets to
        # Gopher at all. Items of a few words push FineWeb's newlines per word (the bullet is
        # a word too) around its 0.3, and so do blank lines between items, which count as
        # newlines but not as lines.
        items = self.count(4, 40)
        share = self.between(0.75, 1.0)
        intro = max(0, round(items * (1 - share) / share))
        mark = self.pick(["• ", "- ", "  - ", "  • ", "-", "* "])
        longest = self.count(1, 8)
        sentences = self.between(0.0, 0.6)
        lines = [self.sentence() for _ in range(intro)]
        for _ in range(items):
            if self.chance(sentences):
                item = self.sentence()
            else:
                item = " ".join(self.name() for _ in range(self.count(1, longest)))
            lines.append(mark + item)
        if intro and self.chance(0.5):
            lines.append(lines.pop(0))
        return ("\n\n" if self.chance(0.3) else "\n").join(lines)

    def policy(self) -> str:
        # C4 drops policy and javascript lines before counting sentences: 3 to 8 sentences of
        # text around them put the page on either side of its 5.
        lines = [self.sentence() for _ in range(self.count(3, 8))]
        for _ in range(self.count(1, 3)):
            lines.insert(self.count(0, len(lines)), self.pick(POLICY))
        for _ in range(self.count(0, 2)):
            lines.insert(self.count(0, len(lines)), self.pick(JAVASCRIPT))
        return "\n".join(lines)

    def lorem(self) -> str:
        variant = self.count(0, 4)
        if variant == 0:  # a placeholder page
            return "\n\n".join([LOREM] * self.count(1, 3))
        body = self.paragraphs(2, 6)
        if variant == 1:  # a placeholder paragraph inside text
            body.insert(self.count(0, len(body)), LOREM)
        elif variant == 2:  # a two-word heading: C4 skips lines under 3 words, keeps the page
            body.insert(0, "Lorem Ipsum")
        elif variant == 3:  # an unpunctuated line of 3+ words still counts for C4 at FineWeb's
            body.append("lorem ipsum dolor sit amet")
        else:  # placeholder beside code: which of lorem and the curly bracket comes first
            body.insert(self.count(0, len(body)), self.pick(CODE[:2]))
            body.insert(self.count(0, len(body)), LOREM[:60])
        return self.join(body)

    def code(self) -> str:
        # Some snippets have their brackets only on lines of under 3 words ("{", "x {", JSON
        # in one token): C4 never sees those lines, so the page is kept.
        body = self.paragraphs(2, 6)
        if self.chance(0.3):
            snippet = [self.pick(CODE[-3:]) for _ in range(self.count(1, 3))]
        else:
            snippet = [self.pick(CODE) for _ in range(self.count(1, 6))]
        body.insert(self.count(0, len(body)), "\n".join(snippet))
        return self.join(body)

    def ellipsis(self) -> str:
        # Teaser lines cut short with "..." or "…": their share of the lines straddles
        # Gopher's 0.3, and pages of short teasers put the ellipses per word around its 0.1.
        n = self.count(3, 25)
        share = self.between(0.1, 0.9)
        longest = self.count(3, 14)
        lines = []
        for _ in range(n):
            s = self.sentence()
            if self.chance(share):
                words = s.split()
                cut = " ".join(words[: self.count(2, max(2, min(len(words), longest)))])
                s = cut.rstrip(",;:.") + self.pick(["...", "…", " ...", "... ", "....", "…."])
            elif self.chance(0.1):
                s = s.replace(" ", "... ", 1)
            lines.append(s)
        return "\n".join(lines)

    def hashtags(self) -> str:
        # "#tag" is two tokens ("#", "tag"): k tags in W words give k / (W + 2k) hashes a
        # word; the target is drawn around Gopher's 0.1.
        post = [self.sentence() for _ in range(self.count(1, 5))]
        words = sum(len(s.split()) for s in post)
        target = self.between(0.02, 0.3)
        k = max(1, round(target * words / max(0.05, 1 - 2 * target)))
        tags = [f"#{self.name()}{self.name() if self.chance(0.5) else ''}" for _ in range(k)]
        if self.chance(0.5):
            return "\n".join(post) + "\n" + " ".join(tags)
        for t in tags:  # tags inline in the text
            i = self.count(0, len(post) - 1)
            post[i] = f"{post[i]} {t}"
        return "\n".join(post)

    def repeat(self) -> str:
        variant = self.count(0, 3)
        body = self.paragraphs(2, 10)
        if variant == 0:  # repeated paragraphs: Gopher's 0.3 of paragraphs, 0.2 of characters
            for _ in range(self.count(1, max(1, len(body) // 2))):
                body.insert(self.count(0, len(body)), self.pick(body))
            return "\n\n".join(body)
        if variant == 1:  # one boilerplate line several times: Gopher lines, FineWeb's 0.01
            line = self.pick(REPEATED_LINES)
            for _ in range(self.count(1, 6)):
                body.insert(self.count(0, len(body)), line)
            return "\n".join(body)
        if variant == 2:  # keyword stuffing: the top 2-, 3-, 4-gram's share of characters
            phrase = self.pick(STUFFING)
            for _ in range(self.count(1, 12)):
                i = self.count(0, len(body) - 1)
                body[i] = f"{body[i]} {phrase}."
            return self.join(body)
        # a run of words repeated inline: duplicated 5- to 10-grams around 0.15 .. 0.10
        words = self.sentence().split()
        run = " ".join(words[: self.count(5, 12)])
        for _ in range(self.count(1, 8)):
            i = self.count(0, len(body) - 1)
            body[i] = f"{body[i]} {run}"
        return self.join(body)

    def footer_page(self) -> str:
        body = self.paragraphs(1, 6)
        foot = [self.footer() for _ in range(self.count(1, 6))]
        head = [self.nav() for _ in range(self.count(0, 3))]
        return "\n".join(head + body + foot)

    def table(self) -> str:
        # Rows of numbers hold 0.05 to 0.6 of the words: around Gopher's 0.8 of words with a
        # letter, and short numbers pull the mean word length towards its 3.
        body = [self.sentence() for _ in range(self.count(2, 10))]
        words = sum(len(s.split()) for s in body)
        share = self.between(0.05, 0.6)
        cols = self.count(2, 8)
        rows = max(1, round(words * share / (1 - share) / cols))
        sep = self.pick([" | ", "\t", " ", "  "])

        # Each page its own mix of cells: small integers pull the mean word length under 3.
        weights = self.rng.dirichlet(np.ones(5))

        def cell() -> str:
            k = int(self.rng.choice(5, p=weights))
            if k == 0:
                return str(self.count(0, 9))
            if k == 1:
                return str(self.count(10, 99))
            if k == 2:
                return f"{self.rng.uniform(0, 1000):.1f}"
            if k == 3:
                return f"{self.count(1, 99)}%"
            return f"{self.count(1000, 99999):,}"

        table = [sep.join(cell() for _ in range(cols)) for _ in range(rows)]
        if self.chance(0.5):
            table.insert(0, sep.join(self.name() for _ in range(cols)))
        at = self.count(0, len(body))
        return "\n".join(body[:at] + table + body[at:])

    def longline(self) -> str:
        text = " ".join(self.sentence() for _ in range(self.count(3, 60)))
        variant = self.count(0, 3)
        if variant == 1:  # no final punctuation: FineWeb sees no line ending in it
            text = text.rstrip(".!?\"'”’") + " " + self.name()
        elif variant == 2:  # a base64-like blob around C4's 1,000-character word
            n = self.count(900, 1100)
            blob = "".join(self.rng.choice(list("ABCDEFabcdef0123456789+/"), size=n).tolist())
            text = f"{text} {blob} {self.sentence()}"
        elif variant == 3:  # trailing whitespace after the last full stop
            text += self.pick([" ", "  ", "\t"])
        return text

    def links(self) -> str:
        # Long URL tokens push the mean word length towards Gopher's 10.
        body = [self.sentence() for _ in range(self.count(1, 8))]
        for _ in range(self.count(1, 20)):
            path = "-".join(self.name().lower() for _ in range(self.count(1, 5)))
            url = f"https://www.{self.name().lower()}.com/{path}"
            body.insert(
                self.count(0, len(body)), url if self.chance(0.6) else f"{self.name()}: {url}"
            )
        return "\n".join(body)

    def messy(self) -> str:
        # What extraction leaves: CRLF, lone CR, trailing blanks, tabs, no-break spaces, form
        # feeds and the other separators str.splitlines() splits on and split("\n") does not
        # (\x0b \x1e \x85 \u2028 \u2029), whitespace around the page, and characters whose
        # length or word count is easy to get wrong: emoji outside the BMP, combining accents,
        # zero-width spaces, a Chinese name in English text.
        lines = [self.paragraph(1, 3) for _ in range(self.count(2, 12))]
        seps = ["\r\n", "\n", "\n\n", "\r\n\r\n", "\u2028", "\x0c", "\n \n", "\n\t\n"]
        seps += ["\r", "\x0b", "\x1e", "\x85", "\u2029", "\n\u00a0\n"]
        odd = ["🙂", "👍🏽", "(北京)", "café", "cafe\u0301", "\u200b", "naïve", "—", "°C", "½"]
        out = []
        for line in lines:
            if self.chance(0.3):
                line += self.pick([" ", "\t", "\u00a0", "  ", "\u3000"])
            if self.chance(0.2):
                line = self.pick([" ", "\t", "\u00a0"]) + line
            if self.chance(0.2):
                line = line.replace(" ", "\u00a0", 2)
            if self.chance(0.3):
                words = line.split(" ")
                words.insert(self.count(0, len(words)), self.pick(odd))
                line = " ".join(words)
            out.append(line)
        text = out[0]
        for line in out[1:]:
            text += self.pick(seps) + line
        if self.chance(0.3):
            text = self.pick(["\n", "\u00a0", "\n\n", " \u2028"]) + text
        if self.chance(0.3):
            text += self.pick(["\n", "\n\n", " ", "\u00a0", "\r\n"])
        return text

    def page(self, kind: str) -> str:
        build: dict[str, Callable[[], str]] = {
            "article": self.article,
            "short": self.short,
            "menu": self.menu,
            "bullets": self.bullets,
            "policy": self.policy,
            "lorem": self.lorem,
            "code": self.code,
            "ellipsis": self.ellipsis,
            "hashtags": self.hashtags,
            "repeat": self.repeat,
            "footer": self.footer_page,
            "table": self.table,
            "longline": self.longline,
            "links": self.links,
            "messy": self.messy,
            "catalog": self.catalog,
            "huge": self.huge,
        }
        return build[kind]()


def fallback_sentences(n: int = 3000, seed: int = 0) -> list[str]:
    """Sentences from `corpusclean sample --kind web`'s grammar of real words, for when the
    Bible corpus is not at hand (its vocabulary is small: prefer real text)."""
    from corpusclean.jobs.samples.web import _Writer

    writer = _Writer(np.random.default_rng(seed))
    return list(dict.fromkeys(writer.sentence() for _ in range(n)))


def generate(docs: int, seed: int, sentences: list[str]) -> tuple[list[str], list[str]]:
    """`docs` pages (doc_ids `web/<kind>/<n>` and texts), the kinds in KINDS' shares."""
    if not sentences:
        raise ValueError("no sentences to build pages from")
    rng = np.random.default_rng(seed)
    builder = _Page(rng, sentences)
    names = [k for k, _ in KINDS]
    shares = np.array([s for _, s in KINDS])
    kinds = rng.choice(len(names), size=docs, p=shares / shares.sum())
    ids, texts = [], []
    for i, k in enumerate(kinds.tolist()):
        ids.append(f"web/{names[k]}/{i:06d}")
        texts.append(builder.page(names[k]))
    return ids, texts
