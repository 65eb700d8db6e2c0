"""The pages in a real browser: headless Chromium opens report.html of a clean run and
bench.html, takes a screenshot of each whole page, and logs what the page's console said.

Chromium is a system package: Debian's `chromium-headless-shell` (which `.ci/run` installs) or
the desktop `chromium`. Where neither is on PATH the tier is skipped, unless
CORPUSCLEAN_REQUIRE_BROWSER=1 (CI sets it): then their absence fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.spark, pytest.mark.e2e]

SECTIONS = ("facts", "funnel", "timings", "lengths", "by-lang", "rejected", "near", "clusters")
WIDTH, HEIGHT = 1200, 16000
CHART_BLUE = (0x2E, 0x86, 0xC1)


def _chromium() -> str:
    for name in ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CORPUSCLEAN_REQUIRE_BROWSER") == "1":
        pytest.fail("CORPUSCLEAN_REQUIRE_BROWSER=1 but no chromium on PATH")
    pytest.skip("no chromium on PATH (apt-get install chromium-headless-shell)")


def _browse(page: Path, *args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    """Chromium, headless, on `page`: its stderr log carries the console's messages."""
    cmd = [
        _chromium(),
        "--headless",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        f"--user-data-dir={tmp / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        f"--window-size={WIDTH},{HEIGHT}",
        *args,
        page.as_uri(),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _console(log: str) -> list[str]:
    return [line for line in log.splitlines() if ":CONSOLE" in line]


@pytest.fixture(scope="module")
def page(viewed_run) -> Path:
    """The page of a clean run with near duplicates, rejected rows, lang and source."""
    return viewed_run[1] / "report.html"


def test_the_console_check_sees_an_error(tmp_path: Path) -> None:
    """The check below would catch a page that logs an error."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!doctype html><script>console.error('planted')</script>")
    proc = _browse(bad, "--dump-dom", tmp=tmp_path)
    assert any("planted" in line for line in _console(proc.stderr)), proc.stderr[-2000:]


def test_the_report_page_renders_every_section_and_chart(page: Path, tmp_path: Path) -> None:
    import numpy as np
    from PIL import Image

    dom = _browse(page, "--dump-dom", tmp=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert not _console(dom.stderr), _console(dom.stderr)
    ids = re.findall(r'<h2 id="([^"]+)"', dom.stdout)
    for section in SECTIONS:
        assert section in ids, (section, ids)
    assert dom.stdout.count("<svg") >= 8

    shot = tmp_path / "report.png"
    proc = _browse(page, f"--screenshot={shot}", tmp=tmp_path)
    assert proc.returncode == 0 and shot.is_file(), proc.stderr[-2000:]
    assert not _console(proc.stderr), _console(proc.stderr)
    image = Image.open(shot).convert("RGB")
    assert image.size == (WIDTH, HEIGHT)
    small = np.asarray(image.resize((WIDTH // 4, HEIGHT // 4)), dtype=np.int16)
    ink = float((small.sum(axis=2) < 600).mean())
    assert ink > 0.02, f"the page looks blank ({ink:.2%} of it is not white)"
    # The charts drew their bars: the charts' blue is on the page, not only in the markup.
    blue = int((np.abs(small - np.array(CHART_BLUE)) <= 12).all(axis=2).sum())
    assert blue > 500, f"only {blue} pixels of chart blue"


def _bench_report() -> dict:
    def summary(*runs: float) -> dict:
        return {
            "median": sorted(runs)[1],
            "min": min(runs),
            "max": max(runs),
            "runs": list(runs),
            "spread": (max(runs) - min(runs)) / sorted(runs)[1],
        }

    return {
        "verdict": "OK: 83x headroom for 1,024 H100 at 40% MFU on a 70B model",
        "required_bytes_s": 3.39e6,
        "consumption": {
            "params": 70e9,
            "gpus": 1024,
            "gpu": "H100",
            "mfu": 0.4,
            "required_bytes_s_per_node": 26_500.0,
        },
        "measurements": {
            "sequential": {
                "cold_mb_s": summary(1027, 1086, 1209),
                "warm_mb_s": summary(1654, 1973, 2177),
            },
            "random": {"threads_1": {"iops": summary(20e3, 21e3, 22e3), "method": "O_DIRECT"}},
        },
        "readers": {
            "tario": {
                "cold": {"text_mb_s": summary(168, 182, 200)},
                "warm": {"text_mb_s": summary(201, 257, 263)},
            }
        },
        "gds": {"available": False, "reason": "no GPU"},
        "goals": {"cold_shards_vs_small_files": {"ratio": 14.3, "target": 5.0, "met": True}},
    }


def test_the_bench_page_renders_its_chart_and_tables(tmp_path: Path) -> None:
    import numpy as np
    from PIL import Image

    from corpusclean.jobs.loadbench.page import render_bench_html

    page = tmp_path / "bench.html"
    page.write_text(render_bench_html(_bench_report()))
    dom = _browse(page, "--dump-dom", tmp=tmp_path)
    assert dom.returncode == 0 and not _console(dom.stderr), dom.stderr[-2000:]
    ids = re.findall(r'<h2 id="([^"]+)"', dom.stdout)
    assert ids == ["rates", "training", "iops", "gds", "goals", "run"], ids
    shot = tmp_path / "bench.png"
    proc = _browse(page, f"--screenshot={shot}", tmp=tmp_path)
    assert proc.returncode == 0 and not _console(proc.stderr), proc.stderr[-2000:]
    pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=np.int16)
    # The cold bars' dark blue and the required-rate line's red (thin, anti-aliased) are drawn.
    for colour, tolerance, least in (((0x1F, 0x4E, 0x79), 12, 2000), ((0xC0, 0x39, 0x2B), 40, 60)):
        hits = int((np.abs(pixels - np.array(colour)) <= tolerance).all(axis=2).sum())
        assert hits > least, (colour, hits)
