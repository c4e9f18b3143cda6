"""Lessons show the ports' real code (extracted, not copied) and docs/rosetta.md is fresh."""

from __future__ import annotations

import importlib.metadata
import json
import tempfile
from pathlib import Path

import pytest

from shared.teaching.lessons import LESSONS, LessonView, build_view, lesson, library_columns, side_by_side
from shared.teaching.library_source import LibrarySelect
from shared.teaching.port_source import SPEC_FIELDS, field_excerpts
from shared.teaching.rosetta import rosetta_markdown
from tests import background
from tests.adversarial import Outcome

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


# issue 23: each library's own functions the lesson names ("library: unit"), read from the install
LIBRARY_UNITS = {
    "pos_resample": {"timm: resample_abs_pos_embed", "transformers: ViTEmbeddings.interpolate_pos_encoding",
                     "big_vision: resample_posemb"},
    "pos_resample_antialias": {"timm: resample_abs_pos_embed",
                               "transformers: ViTEmbeddings.interpolate_pos_encoding"},
    "pos_resample_offset": {"timm: resample_abs_pos_embed",
                            "dinov2: DinoVisionTransformer.interpolate_pos_encoding",
                            "transformers: Dinov2Embeddings.interpolate_pos_encoding"},
    "rope_layout": {"timm: rot", "timm: rope_rotate_half", "timm: apply_rot_embed",
                    "timm: apply_rot_embed_cat", "transformers: rotate_half",
                    "transformers: apply_rotary_pos_emb"},
    "rope_coords": {"timm: _build_grid", "timm: RotaryEmbeddingCat.get_embed",
                    "transformers: get_patches_center_coordinates",
                    "transformers: DINOv3ViTRopePositionEmbedding.forward"},
    "rope_prefix": {"timm: EvaAttention.forward", "timm: apply_rot_embed_cat",
                    "transformers: apply_rotary_pos_emb"},
    # issue 36's 2-D rotary layouts: Pixtral's and Qwen2.5-VL's own code
    "rope_bands": {"transformers: PixtralVisionRotaryEmbedding.compute_axial_rope_parameters",
                   "transformers: Qwen2_5_VLVisionRotaryEmbedding.compute_axial_rope_parameters"},
    "rope_axes": {"timm: _build_grid"},
    "rope_1d": {"transformers: get_vision_position_ids",
                "transformers: PixtralVisionRotaryEmbedding.forward"},
    "rope_half_reused": {"transformers: PixtralVisionRotaryEmbedding.recomposition_frequencies",
                         "transformers: Qwen2_5_VLVisionRotaryEmbedding.recomposition_frequencies"},
    # issue 37: where SigLIP2 builds its padding mask and Pixtral its block-diagonal one
    "attention_mask": {"transformers: Siglip2VisionModel.forward",
                       "transformers: generate_block_attention_mask"},
    # and where SigLIP2 and NaFlexVit resize the table to each image's grid
    "naflex_resize": {"transformers: Siglip2VisionEmbeddings.resize_positional_embeddings",
                      "timm: NaFlexEmbeds._apply_learned_naflex_pos_embed",
                      "transformers: get_vision_interpolation_indices_and_weights"},
    # and where Qwen2.5-VL picks each block's mask and tiles its windows
    "window_attention": {"transformers: Qwen2_5_VisionTransformerPretrainedModel.forward",
                         "transformers: get_vision_window_index"},
    # and where it lays the patches out block-major and merges four consecutive tokens
    "token_order": {"transformers: get_vision_position_ids", "transformers: Qwen2_5_VLPatchMerger.forward"},
}


@pytest.mark.parametrize("name", LIBRARY_UNITS)
def test_issue23_lessons_show_each_librarys_own_code(name: str) -> None:
    """The ports' code beside them is test_every_lesson_finds_code_in_every_port's; here each named
    library unit is the installed file's own text at the stated line (found through the
    distribution's file list, not the extractor's lookup), headed by the installed version."""
    view = build_view(lesson(name), measure=False)
    shown = {f"{lib}: {e.qualname}" for lib, ex in view.library_code.items() for e in ex}
    assert shown == LIBRARY_UNITS[name]
    text = "\n".join(side_by_side(library_columns(view), 400))
    for library, excerpts in view.library_code.items():
        try:
            version = importlib.metadata.version(library)
        except importlib.metadata.PackageNotFoundError:
            assert all(e.missing.startswith(f"{library} is not installed: ") and not e.lines
                       for e in excerpts)
            assert f"{library} (not installed)" in text
            continue
        assert f"{library} {version}" in text
        for e in excerpts:
            installed = Path(importlib.metadata.distribution(library).locate_file(e.file))
            source = installed.read_text().splitlines()
            assert list(e.lines) == source[e.start - 1:e.start - 1 + len(e.lines)] and not e.missing
            name_only = e.qualname.rsplit(".", 1)[-1]
            heads = (f"def {name_only}(", f"class {name_only}(")
            assert any(line.lstrip().startswith(heads) for line in e.lines)
            assert f"# {e.file}:{e.start} {e.qualname}" in text


def test_a_missing_library_is_one_line() -> None:
    excerpt = LibrarySelect("portbench_no_such_library", "portbench_no_such_library.models.vit", "resample",
                            calls="scipy.ndimage.zoom").extract()
    assert excerpt.version is None and excerpt.lines == () and excerpt.to_dict()["lines"] == []
    assert excerpt.heading == ("portbench_no_such_library is not installed: portbench_no_such_library"
                               ".models.vit.resample is not shown; it calls scipy.ndimage.zoom")
    renamed = LibrarySelect("timm", "timm.layers.pos_embed", "no_such_function").extract()
    assert renamed.lines == () and renamed.missing.endswith(
        "no_such_function is not in timm.layers.pos_embed (this version moved or renamed it)")


def test_lessons_follow_the_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Edit a port (in a copy) and the lesson shows the edit: nothing is stored text."""
    import shared.teaching.port_source as port_source

    for fw in ("torch", "keras", "flax"):
        (tmp_path / "ports" / fw).mkdir(parents=True)
        for name in ("model.py", "transfer.py", "port.py"):
            text = (ROOT / "ports" / fw / name).read_text()
            if fw == "keras" and name == "model.py":
                pinned = "layers.LayerNormalization(epsilon=spec.derived.norm_eps[place], dtype=dtype)"
                text = text.replace(pinned, "layers.LayerNormalization(dtype=dtype)")
            (tmp_path / "ports" / fw / name).write_text(text)
    monkeypatch.setattr(port_source, "ROOT", tmp_path)
    port_source.port_units.cache_clear()
    port_source._reads.cache_clear()
    try:
        view = build_view(lesson("layer_norm_eps"), measure=False)
        keras_code = "\n".join(view.code["keras"][0].lines)
        assert "return layers.LayerNormalization(dtype=dtype)" in keras_code
        reads = field_excerpts("keras", ("layer_norm_eps", "derived.norm_eps"))
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
    assert "eps=spec.derived.norm_eps[place]" in section and "epsilon=spec.derived.norm_eps[place]" in section


@background.task("lessons-cli", "test_teaching_lessons.py::test_cli_lesson_json")
def lessons_cli(start: background.Start) -> tuple[Path, Outcome, Outcome]:
    """`lessons NAME --json` and `rosetta --check`, each a process of its own, in the background."""
    out = Path(tempfile.mkdtemp(prefix="portbench-lessons-")) / "lessons.json"
    lesson_run = background.compare_py(start, "lessons", "pos_table_rows", "--json", out)
    return out, lesson_run, background.compare_py(start, "rosetta", "--check")


def test_cli_lesson_json() -> None:
    out, proc, check = background.result("lessons-cli")
    assert proc.code == 0, proc.stderr
    assert "measured gap without the pin: 0.0563" in proc.stdout
    payload = json.loads(out.read_text())
    assert [p["name"] for p in payload] == ["pos_table_rows"]
    assert set(payload[0]["code"]) == {"torch", "keras", "flax", "mlx"} and payload[0]["gap"] > 0.01
    assert LessonView.from_dict(payload[0]).to_dict() == payload[0]  # the record reads back what it wrote
    assert check.code == 0 and "up to date" in check.stdout


@pytest.mark.parametrize("kind", ["not utf-8", "a folder"])
def test_rosetta_check_names_a_page_it_cannot_read(tmp_path: Path, monkeypatch, kind: str) -> None:
    """--check of a page that is not UTF-8 was an internal UnicodeDecodeError; of a folder, 'stale'."""
    from shared.teaching import rosetta
    from tests.adversarial import run_cli

    page = tmp_path / "rosetta.md"
    if kind == "not utf-8":
        page.write_bytes(b"\xff\xfe")
    else:
        page.mkdir()
    monkeypatch.setattr(rosetta, "ROSETTA", page)
    outcome = run_cli("rosetta", "--check", cwd=tmp_path)
    assert outcome.code == 2 and outcome.error.startswith(f"error: --check: the page {str(page)!r}"), outcome
