"""The io package: atomic writes, JSON reading, directory swaps (one home for each)."""

import errno
import gzip
import json
import os

import pytest

from seahorse_metrics.io import atomic, json_files


def test_write_atomically_replaces_whole_and_gzips_gz_paths(tmp_path):
    path = tmp_path / "out.jsonl.gz"
    atomic.write_atomically(str(path), lambda handle: handle.write("é\n"))
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        assert handle.read() == "é\n"
    first = path.read_bytes()
    atomic.write_atomically(str(path), lambda handle: handle.write("é\n"))
    assert path.read_bytes() == first  # no name or time in the gzip header

    def failing(handle):
        handle.write("half")
        raise RuntimeError("stopped")

    with pytest.raises(RuntimeError):
        atomic.write_atomically(str(path), failing)
    assert path.read_bytes() == first and os.listdir(tmp_path) == ["out.jsonl.gz"]


def test_a_full_disk_names_the_target_and_leaves_no_temporary(tmp_path):
    def full(handle):
        raise OSError(errno.ENOSPC, "No space left on device")

    target = tmp_path / "report.json"
    with pytest.raises(OSError, match=f"while writing {target}; free it"):
        atomic.write_atomically(str(target), full, "free it")
    with pytest.raises(OSError, match=f"while writing {target}"):
        with atomic.staged_path(str(target)) as temporary:
            open(temporary, "w").close()
            raise OSError(errno.EDQUOT, "Disk quota exceeded")
    assert os.listdir(tmp_path) == []


def test_staged_path_publishes_files_and_directories_or_keeps_the_old(tmp_path):
    target = tmp_path / "data.npz"
    with atomic.staged_path(str(target)) as temporary:
        assert os.path.dirname(temporary) == str(tmp_path)
        with open(temporary, "wb") as handle:
            handle.write(b"new")
    assert target.read_bytes() == b"new"
    with atomic.staged_path(str(target)) as temporary:
        open(temporary, "wb").close()
        os.remove(temporary)  # the block decided to keep what is there
    assert target.read_bytes() == b"new"
    folder = tmp_path / "checkpoint"
    with atomic.staged_path(str(folder)) as staging:
        os.makedirs(staging)
        (tmp_path / staging / "config.json").write_text("{}")
    assert (folder / "config.json").read_text() == "{}"


def test_write_json_atomically_formats(tmp_path):
    path = tmp_path / "best.json"
    atomic.write_json_atomically(str(path), {"b": 1, "a": "é"}, sort_keys=True, newline=True)
    assert path.read_text(encoding="utf-8") == '{\n  "a": "é",\n  "b": 1\n}\n'


def test_replace_directory_keeps_the_old_one_until_the_new_is_in_place(tmp_path):
    target, staging = tmp_path / "best", tmp_path / "best.tmp"
    target.mkdir()
    (target / "step").write_text("1")
    staging.mkdir()
    (staging / "step").write_text("2")
    atomic.replace_directory(str(staging), str(target))
    assert (target / "step").read_text() == "2"
    assert sorted(os.listdir(tmp_path)) == ["best"]
    # A crash between the two renames leaves only the retired copy: it is put back.
    os.rename(target, atomic.retired_name(str(target)))
    assert atomic.restore_directory(str(target)) and (target / "step").read_text() == "2"
    assert not atomic.restore_directory(str(target))


def test_publish_directory_yields_to_an_earlier_publisher(tmp_path):
    first, second, target = tmp_path / "a", tmp_path / "b", tmp_path / "entry"
    for folder in (first, second):
        folder.mkdir()
        (folder / "model.bin").write_text(folder.name)
    assert atomic.publish_directory(str(first), str(target))
    assert not atomic.publish_directory(str(second), str(target))
    assert (target / "model.bin").read_text() == "a"


def test_read_json_errors_are_one_line_naming_the_file(tmp_path):
    path = tmp_path / "maps.json"
    with pytest.raises(FileNotFoundError, match=f"calibration file {path} not found"):
        json_files.read_json(str(path), "calibration file")
    for text, words in (
        ('{"a": ', r"not JSON \(Expecting value at line 1\)"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply to be a map file"),
        ("1" * 5000, "not a JSON map file"),
    ):
        path.write_text(text)
        with pytest.raises(ValueError, match=words) as refused:
            json_files.read_json(str(path), "map file")
        assert str(refused.value).startswith(f"{path}: ") and "\n" not in str(refused.value)
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(ValueError, match="not a JSON map file"):
        json_files.read_json(str(path), "map file")
    assert json_files.read_json_or_none(str(path)) is None
    path.write_text(json.dumps({"x": 1}))
    assert json_files.read_json_or_none(str(path)) == {"x": 1}
    assert json_files.json_object("[1]") == (None, "expected a JSON object, got list")
