"""Write-audit-publish on the local filesystem, and paths that must not collide."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from corpusclean.errors import CorpusCleanError, InputError
from corpusclean.jobs.inputs.paths import check_output_vs_input, detect_format
from corpusclean.jobs.outputs import publish as pub
from corpusclean.jobs.outputs.publish import Publisher
from corpusclean.testhook import ENV


def _stage(p: Publisher, content: str) -> None:
    staging = p.prepare()
    (staging / "data").mkdir()
    (staging / "data" / "part.txt").write_text(content)


def test_first_publish_and_replace(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = Publisher(out, "clean")
    _stage(first, "one")
    first.publish()
    assert (out / "_SUCCESS").exists()
    assert json.loads((out / pub.MARKER).read_text())["run_id"] == first.run_id
    second = Publisher(out, "clean")
    _stage(second, "two")
    # Until publish, readers see the first run's output.
    assert (out / "data" / "part.txt").read_text() == "one"
    second.publish()
    assert (out / "data" / "part.txt").read_text() == "two"
    assert not second.runs_dir.exists(), "nothing left behind after a clean publish"


def test_two_rename_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pub, "_exchange", lambda a, b: False)
    out = tmp_path / "out"
    for content in ("one", "two"):
        p = Publisher(out, "clean")
        _stage(p, content)
        p.publish()
    assert (out / "data" / "part.txt").read_text() == "two"


def test_repair_after_crash_between_renames(tmp_path: Path) -> None:
    out = tmp_path / "out"
    p = Publisher(out, "clean")
    _stage(p, "one")
    p.publish()
    # Simulate a crash after `output -> .replaced` and before `staging -> output`.
    crashed = Publisher(out, "clean")
    crashed.runs_dir.mkdir()
    out.rename(crashed.runs_dir / "x.replaced")
    Publisher(out, "clean").prepare()
    assert (out / "data" / "part.txt").read_text() == "one"


def test_refuses_foreign_or_other_job_folders(tmp_path: Path) -> None:
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(InputError, match="did not write"):
        Publisher(foreign, "clean").prepare()
    assert (foreign / "notes.txt").read_text() == "keep me"
    packed = tmp_path / "packed"
    p = Publisher(packed, "pack")
    _stage(p, "x")
    p.publish()
    with pytest.raises(InputError, match="corpusclean pack"):
        Publisher(packed, "clean").prepare()


def test_discard_leaves_published_output(tmp_path: Path) -> None:
    out = tmp_path / "out"
    p = Publisher(out, "clean")
    _stage(p, "one")
    p.publish()
    failed = Publisher(out, "clean")
    _stage(failed, "broken")
    failed.discard()
    assert (out / "data" / "part.txt").read_text() == "one"
    assert not failed.staging.exists()


def test_output_must_not_collide_with_input(tmp_path: Path) -> None:
    inp = tmp_path / "raw"
    inp.mkdir()
    for bad in (inp, inp / "clean", tmp_path):
        with pytest.raises(InputError):
            check_output_vs_input([str(inp)], str(bad))
    check_output_vs_input([str(inp)], str(tmp_path / "clean"))
    check_output_vs_input([str(inp / "*.parquet")], str(tmp_path / "clean"))


def test_detect_format(tmp_path: Path) -> None:
    assert detect_format("x.parquet", "auto") == "parquet"
    assert detect_format("x.jsonl.gz", "auto") == "jsonl"
    assert detect_format("whatever", "jsonl") == "jsonl"
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "a.jsonl").write_text("{}\n")
    (folder / "_SUCCESS").write_text("")
    assert detect_format(str(folder), "auto") == "jsonl"
    (folder / "b.parquet").write_text("")
    with pytest.raises(InputError, match="mixes"):
        detect_format(str(folder), "auto")
    with pytest.raises(InputError, match="does not exist"):
        detect_format(str(tmp_path / "missing"), "auto")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="no data files"):
        detect_format(str(empty), "auto")
    with pytest.raises(InputError, match=r"input\.format"):
        detect_format("hdfs://nn/corpus/", "auto")


# --------------------------------------------------------------------------- robustness (#19)


def _crash_after_prepare(out: Path) -> str:
    """A run that takes the lock, creates its staging and dies by SIGKILL (no cleanup at all)."""
    code = (
        "import os, signal, sys\n"
        "from corpusclean.jobs.outputs.publish import Publisher\n"
        "p = Publisher(sys.argv[1], 'clean')\n"
        "(p.prepare() / 'data').mkdir()\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    return proc.stderr


def _published(out: Path, content: str = "one") -> Publisher:
    p = Publisher(out, "clean")
    _stage(p, content)
    p.publish()
    p.close()
    return p


def test_second_run_into_one_output_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = Publisher(out, "clean")
    first.prepare()
    second = Publisher(out, "clean")
    with pytest.raises(CorpusCleanError) as info:
        second.prepare()
    line = str(info.value)
    assert "\n" not in line
    assert f"pid {os.getpid()} on host {socket.gethostname()}" in line
    assert str(tmp_path / ".out.lock") in line
    assert not second.staging.exists(), "a refused run creates nothing"
    first.discard()
    first.close()
    assert not (tmp_path / ".out.lock").exists(), "a released lock leaves no file"
    third = Publisher(out, "clean")
    third.prepare()
    third.discard()
    third.close()


def test_lock_of_a_killed_run_is_taken_over(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    _published(out)
    _crash_after_prepare(out)
    assert (tmp_path / ".out.lock").read_text(), "the killed run's owner record stays"
    p = Publisher(out, "clean")
    p.prepare()
    err = capsys.readouterr().err
    assert "stale lock" in err and "taking it over" in err
    p.discard()
    p.close()


def test_killed_runs_staging_is_removed_by_the_next_run(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    _published(out)
    runs = tmp_path / ".out.runs"
    assert "removed stale staging" not in _crash_after_prepare(out)
    first = [d for d in runs.iterdir() if d.is_dir()]
    assert len(first) == 1
    # The next crashed run removed the first one's staging before making its own.
    assert f"removed stale staging {first[0]}" in _crash_after_prepare(out)
    second = [d for d in runs.iterdir() if d.is_dir()]
    assert len(second) == 1 and second != first
    p = Publisher(out, "clean")
    _stage(p, "two")
    err = capsys.readouterr().err
    assert f"removed stale staging {second[0]}" in err and "its process is gone" in err, err
    p.publish()
    p.close()
    assert not runs.exists(), "nothing of the killed runs is left"
    assert (out / "data" / "part.txt").read_text() == "two"


def _fake_owner(runs: Path, run_id: str, **fields: object) -> Path:
    runs.mkdir(exist_ok=True)
    (runs / run_id).mkdir()
    owner = {
        "job": "clean",
        "run_id": run_id,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "proc_start": None,
        "started": "2026-01-01T00:00:00Z",
        "started_ts": time.time(),
        "state": "running",
    }
    owner.update(fields)
    (runs / f"{run_id}.owner.json").write_text(json.dumps(owner))
    return runs / run_id


def test_staging_sweep_by_pid_start_time_and_age(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _published(out)
    runs = tmp_path / ".out.runs"
    me = psutil.Process().create_time()
    live = _fake_owner(runs, "20260101T000000Z-aaaaaa", proc_start=me)
    reused = _fake_owner(runs, "20260101T000001Z-bbbbbb", proc_start=me - 1000)
    old_remote = _fake_owner(
        runs, "20260101T000002Z-cccccc", host="elsewhere", started_ts=time.time() - 2 * 86400
    )
    young_remote = _fake_owner(runs, "20260101T000003Z-dddddd", host="elsewhere")
    p = Publisher(out, "clean", stale_hours=24)
    p.prepare()
    assert live.exists(), "a live process on this host keeps its staging"
    assert not reused.exists(), "a pid now used by another process is not the owner"
    assert not old_remote.exists() and not (runs / "20260101T000002Z-cccccc.owner.json").exists()
    assert young_remote.exists(), "another host's recent run may still be alive"
    p.discard()
    p.close()


def test_rejected_runs_keep_the_newest_three(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    _published(out)
    kept = []
    for _ in range(5):
        p = Publisher(out, "clean", keep_rejected=3)
        _stage(p, "rejected")
        p.reject()
        p.close()
        owner = json.loads((p.runs_dir / f"{p.run_id}.owner.json").read_text())
        assert owner["state"] == "rejected"
        kept.append(p.staging)
    assert [s.exists() for s in kept] == [False, False, True, True, True]
    assert capsys.readouterr().err.count("removed rejected run") == 2
    assert (out / "data" / "part.txt").read_text() == "one"


def test_symlink_output_publishes_into_its_target(tmp_path: Path, capsys) -> None:
    target = tmp_path / "big-disk" / "clean"
    target.parent.mkdir()
    link = tmp_path / "clean"
    link.symlink_to(target)
    _published(link, "one")
    assert link.is_symlink() and (target / "data" / "part.txt").read_text() == "one"
    _published(link, "two")
    assert link.is_symlink(), "the link stays a link"
    assert (target / "data" / "part.txt").read_text() == "two", "the target is not left stale"
    assert "is a symlink" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big-disk", "clean"]


def test_mount_point_output_is_refused_up_front(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "mnt"
    out.mkdir()
    real = os.path.ismount
    monkeypatch.setattr(os.path, "ismount", lambda p: Path(p) == out or real(p))
    with pytest.raises(InputError, match=r"mount point.*folder inside it"):
        pub.check_output(str(out), "clean")
    with pytest.raises(InputError, match="mount point"):
        Publisher(out, "clean").prepare()
    assert list(tmp_path.iterdir()) == [out], "nothing created beside it"


def test_files_added_to_a_published_output_are_not_deleted(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _published(out)
    (out / "notes.txt").write_text("mine")
    (out / "data" / "extra.csv").write_text("mine too")
    with pytest.raises(InputError) as info:
        Publisher(out, "clean").prepare()
    line = str(info.value)
    assert "data/extra.csv" in line and "notes.txt" in line and "move them" in line
    assert (out / "notes.txt").read_text() == "mine"
    with pytest.raises(InputError, match=r"notes\.txt"):
        pub.check_output(str(out), "clean")
    (out / "notes.txt").unlink()
    (out / "data" / "extra.csv").unlink()
    _published(out, "two")


def test_older_outputs_without_a_file_list_are_checked_by_layout(tmp_path: Path) -> None:
    out = tmp_path / "out"
    for sub in ("data", "duplicates", "rejected"):
        (out / sub).mkdir(parents=True)
        (out / sub / "part-00000-x.snappy.parquet").write_text("")
        (out / sub / ".part-00000-x.snappy.parquet.crc").write_text("")
        (out / sub / "_SUCCESS").write_text("")
    for name in ("report.json", "report.html", "_SUCCESS"):
        (out / name).write_text("")
    (out / pub.MARKER).write_text(json.dumps({"job": "clean", "run_id": "r"}))
    pub.check_output(str(out), "clean")
    (out / "my-analysis.ipynb").write_text("{}")
    with pytest.raises(InputError, match=r"my-analysis\.ipynb"):
        pub.check_output(str(out), "clean")


@pytest.mark.parametrize("point", ["publish", "swapped"])
def test_sigkill_while_publishing_leaves_one_complete_output(tmp_path: Path, point: str) -> None:
    out = tmp_path / "out"
    _published(out, "one")
    hold = tmp_path / "hold"
    hold.mkdir()
    code = (
        "import sys\n"
        "from corpusclean.jobs.outputs.publish import Publisher\n"
        "p = Publisher(sys.argv[1], 'clean')\n"
        "(p.prepare() / 'data').mkdir()\n"
        "(p.staging / 'data' / 'part.txt').write_text('two')\n"
        "p.publish()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(out)],
        env={**os.environ, ENV: f"{point}@{hold}"},
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not (hold / f"{point}.reached").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "never reached the point"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # Killed before the swap the old output stands; after it the new one is complete.
    assert (out / "data" / "part.txt").read_text() == ("one" if point == "publish" else "two")
    assert (out / "_SUCCESS").exists()
    _published(out, "three")
    assert (out / "data" / "part.txt").read_text() == "three"
    assert not (tmp_path / ".out.runs").exists() and not (tmp_path / ".out.lock").exists()
