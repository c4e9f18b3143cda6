"""TrainSpec (validation, round trips, presets as the issue states them) and the shared data."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shared.core.presets import get_preset
from shared.core.train_spec import RECIPES, TrainSpec, decayed, get_recipe, resolve_recipe
from shared.errors import InputError, SpecError
from shared.training.data import batch_order, batches, digits, load_dataset, quadrant_images, split_validation


def test_archive_and_mnist_presets_are_as_the_archive_states() -> None:
    a = get_recipe("archive")
    assert (a.learning_rate, a.weight_decay, a.batch_size, a.max_epochs) == (5e-5, 1e-4, 256, 200)
    assert (a.warmup_epochs, a.plateau_factor, a.plateau_patience) == (5, 0.8, 15)
    assert (a.early_stop_patience, a.clip_global_norm) == (40, 1.0)
    m = get_recipe("mnist")
    assert (m.learning_rate, m.weight_decay, m.batch_size) == (1e-4, 1e-4, 64)
    assert (m.max_epochs, m.clip_global_norm) == (100, 1.0)
    assert (m.early_stop_metric, m.early_stop_patience, m.validation_fraction) == ("val_accuracy", 15, 0.2)
    assert m.plateau_factor == 1.0  # no schedule


@pytest.mark.parametrize("name", list(RECIPES))
def test_json_and_toml_round_trip(name: str) -> None:
    recipe = get_recipe(name)
    assert TrainSpec.from_json(recipe.to_json()) == recipe
    assert TrainSpec.from_toml(recipe.to_toml()) == recipe  # None fields survive TOML (no null)


def test_overrides_and_files(tmp_path) -> None:
    path = tmp_path / "r.toml"
    path.write_text(get_recipe("quick").to_toml())
    assert resolve_recipe(str(path), ["batch_size=32"]).batch_size == 32
    assert resolve_recipe("archive", ["early_stop_patience=null"]).early_stop_patience is None


@pytest.mark.parametrize("change, message", [
    ({"learning_rate": -1e-3}, "'learning_rate' = -0.001: expected a finite number > 0"),
    ({"beta2": 1.0}, "'beta2' = 1.0: expected a number in [0, 1)"),
    ({"epsilon": 0.0}, "'epsilon' = 0.0: expected a finite number > 0"),
    ({"weight_decay_on": "biases"}, "'weight_decay_on' = 'biases': expected one of all | kernels"),
    ({"early_stop_metric": "accuracy"}, "'early_stop_metric' = 'accuracy': expected one of"),
    ({"batch_size": 0}, "'batch_size' = 0: expected a positive integer"),
    ({"validation_fraction": 0.0}, "'validation_fraction' = 0: expected > 0 when a val_ metric"),
    ({"clip_global_norm": math.inf}, "'clip_global_norm' = inf"),
])
def test_validation_is_one_line(change: dict, message: str) -> None:
    with pytest.raises(SpecError) as info:
        get_recipe("archive").replace(**change)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_unknown_fields_and_recipes() -> None:
    with pytest.raises(SpecError, match="recipe field 'lr' is unknown"):
        TrainSpec.from_dict({"lr": 1.0})
    with pytest.raises(SpecError, match="unknown recipe 'adam'"):
        get_recipe("adam")


def test_recipe_arguments_fail_in_one_line(tmp_path) -> None:
    latin1 = tmp_path / "r.json"
    latin1.write_bytes(b'{"name": "caf\xe9"}')
    for value, overrides, message in [
        ("archive", ["lr=1"], "--rset: recipe field 'lr' is unknown; expected one of: learning_rate, "),
        ("archive", ["batch_size"], "--rset 'batch_size': expected FIELD=VALUE"),
        ("archive", ["plateau_threshold_mode=relative"],
         "recipe field 'plateau_threshold_mode' = 'relative': expected one of rel | abs"),
        ("archive", ["shuffle=sometimes"], "recipe field 'shuffle' = 'sometimes': expected true or false"),
        # torch's AdamW raised an internal error converting the first step, lr / (1 - beta1), to float32
        ("archive", ["learning_rate=1e38"],
         "recipe field 'learning_rate' = 1e+38: expected at most 3.4e+37 (Adam's first step, "
         "learning_rate / (1 - beta1), must be a float32)"),
        ("adamw", [], "--recipe 'adamw' is neither a recipe (archive, mnist, quick) nor a recipe file"),
        (str(latin1), [], f"recipe file {str(latin1)!r} is not UTF-8 text: byte 0xe9 at offset 13"),
    ]:
        with pytest.raises(SpecError) as info:
            resolve_recipe(value, overrides)
        assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_epsilon_hat_in_torch_placement() -> None:
    r = get_recipe("archive")
    assert r.eps_at(1) == pytest.approx(r.epsilon / math.sqrt(1 - 0.999), rel=1e-12)  # 31.6x at t=1
    assert r.eps_at(10_000) == pytest.approx(r.epsilon, rel=1e-4)


def test_decay_targets() -> None:
    kernels = get_recipe("quick")
    assert decayed(kernels, "blocks.0.mlp.fc1.kernel") and not decayed(kernels, "pos_embed")
    assert not decayed(kernels, "blocks.0.norm1.scale") and decayed(get_recipe("archive"), "cls_token")


def test_quadrant_labels_name_the_bright_quadrant() -> None:
    split = quadrant_images(64, seed=3)
    means = split.images[..., 0].reshape(64, 2, 4, 2, 4).mean(axis=(2, 4)).reshape(64, 4)
    assert np.array_equal(means.argmax(axis=1), split.labels)


def test_digits_are_real_and_resizable() -> None:
    train, test, classes = digits()
    assert classes == 10 and len(train) + len(test) == 1797
    assert train.images.shape[1:] == (8, 8, 1) and train.images.min() >= 0 and train.images.max() <= 1
    big, _, _ = digits((16, 16))
    assert big.images.shape[1:] == (16, 16, 1)


def test_batches_are_seeded_disjoint_and_cover_the_epoch() -> None:
    split = quadrant_images(100, seed=0)
    first = [y for _, y in batches(split, 32, epoch=1, seed=7)]
    again = [y for _, y in batches(split, 32, epoch=1, seed=7)]
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    assert [len(y) for y in first] == [32, 32, 32, 4]  # drop_last=False keeps the short batch
    assert sorted(batch_order(100, 1, 7, True)) == list(range(100))
    assert not np.array_equal(batch_order(100, 1, 7, True), batch_order(100, 2, 7, True))


def test_validation_split_is_held_out() -> None:
    split = quadrant_images(100, seed=0)
    train, val = split_validation(split, 0.2, seed=0)
    assert (len(train), len(val)) == (80, 20)
    rows = {a.tobytes() for a in train.images}
    assert not any(v.tobytes() in rows for v in val.images)


def test_dataset_must_fit_the_spec() -> None:
    with pytest.raises(InputError, match="'quadrant' needs a square image; spec 'archive-torch' is 32x31"):
        load_dataset("quadrant", get_preset("archive-torch"), 0.2, 0)
    with pytest.raises(InputError, match="has 10 classes, spec 'quadrant' has only num_classes = 4"):
        load_dataset("digits", get_preset("quadrant"), 0.2, 0)


def test_mnist_npz_loads_without_pickles(tmp_path) -> None:
    path = tmp_path / "mnist.npz"
    rng = np.random.default_rng(0)
    np.savez(path, x_train=rng.integers(0, 256, (20, 28, 28), dtype=np.uint8),
             y_train=rng.integers(0, 10, 20), x_test=rng.integers(0, 256, (5, 28, 28), dtype=np.uint8),
             y_test=rng.integers(0, 10, 5))
    data = load_dataset(f"mnist:{path}", get_preset("mnist-vit-small"), 0.2, 0)
    assert (len(data.train), len(data.val), len(data.test)) == (16, 4, 5)
    assert data.train.images.dtype == np.float32 and data.train.images.max() <= 1.0
    bad = tmp_path / "bad.npz"
    np.savez(bad, x_train=np.zeros((4, 28, 28), np.uint8), y_train=np.full(4, 12),
             x_test=np.zeros((1, 28, 28), np.uint8), y_test=np.zeros(1, np.int64))
    with pytest.raises(InputError, match=r"y_train has labels outside 0\.\.9"):
        load_dataset(str(bad), get_preset("mnist-vit-small"), 0.2, 0)
    with pytest.raises(InputError, match=r"has images \(28, 28, 1\), spec 'quadrant' expects \(8, 8, 1\)"):
        load_dataset(str(path), get_preset("quadrant"), 0.2, 0)
