"""Lessons show the ports' real code (extracted, not copied) and docs/rosetta.md is fresh."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from shared.teaching.lessons import LESSONS, build_view, lesson
from shared.teaching.port_source import SPEC_FIELDS, field_excerpts
from shared.teaching.rosetta import rosetta_markdown

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("item", LESSONS, ids=[x.name for x in LESSONS])
def test_every_lesson_finds_code_in_every_port(item) -> None:
    view = build_view(item, measure=False)
    for fw, excerpts in view.code.items():
        assert excerpts, f"{item.name}: nothing found in ports/{fw}"
        for ex in excerpts:  # each excerpt is the file's own text at the stated line
            source = (ROOT / "ports" / fw / ex.file).read_text().splitlines()
            assert ex.lines[0] == source[ex.start - 1]
            assert all(line in source for line in ex.lines)


def test_lessons_follow_the_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Edit a port (in a copy) and the lesson shows the edit: nothing is stored text."""
    import shared.teaching.port_source as port_source

    for fw in ("torch", "keras", "flax"):
        (tmp_path / "ports" / fw).mkdir(parents=True)
        for name in ("model.py", "transfer.py", "port.py"):
            text = (ROOT / "ports" / fw / name).read_text()
            if fw == "keras" and name == "model.py":
                text = text.replace("layers.LayerNormalization(epsilon=spec.layer_norm_eps, dtype=dtype)",
                                    "layers.LayerNormalization(dtype=dtype)")
            (tmp_path / "ports" / fw / name).write_text(text)
    monkeypatch.setattr(port_source, "ROOT", tmp_path)
    port_source.port_units.cache_clear()
    port_source._reads.cache_clear()
    try:
        view = build_view(lesson("layer_norm_eps"), measure=False)
        keras_code = "\n".join(view.code["keras"][0].lines)
        assert "return layers.LayerNormalization(dtype=dtype)" in keras_code
        reads = field_excerpts("keras", ("layer_norm_eps",))
        assert all("LayerNormalization" not in line for e in reads for line in e.lines)
    finally:
        port_source.port_units.cache_clear()
        port_source._reads.cache_clear()


def test_rosetta_is_fresh() -> None:
    """Regenerate with `python compare.py rosetta --write` when this fails."""
    assert (ROOT / "docs" / "rosetta.md").read_text() == rosetta_markdown()


def test_rosetta_maps_every_spec_field() -> None:
    text = rosetta_markdown()
    for name in SPEC_FIELDS:
        assert f"## `{name}`" in text
    section = text.split("## `layer_norm_eps`")[1].split("## `")[0]
    assert "eps=spec.layer_norm_eps" in section and "epsilon=spec.layer_norm_eps" in section


def test_cli_lesson_json(tmp_path: Path) -> None:
    out = tmp_path / "lessons.json"
    proc = subprocess.run([sys.executable, "compare.py", "lessons", "pos_table_rows", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "measured gap without the pin: 0.0563" in proc.stdout
    payload = json.loads(out.read_text())
    assert [p["name"] for p in payload] == ["pos_table_rows"]
    assert set(payload[0]["code"]) == {"torch", "keras", "flax", "mlx"} and payload[0]["gap"] > 0.01
    check = subprocess.run([sys.executable, "compare.py", "rosetta", "--check"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120, check=False)
    assert check.returncode == 0 and "up to date" in check.stdout
