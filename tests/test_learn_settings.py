"""Range checks of the learning configs (p4cc.learn.settings.RANGES): the same error for
``p4cc train --set`` and for ``acc:online,field=value`` (tests/test_learn_online.py)."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("torch")

from p4cc.errors import ConfigError
from p4cc.learn.acc import AccConfig
from p4cc.learn.pet import PetConfig
from p4cc.learn.settings import RANGES, apply_overrides


def test_defaults_are_in_range_and_every_range_names_a_field() -> None:
    names = {f.name for cfg in (AccConfig(), PetConfig()) for f in dataclasses.fields(cfg)}
    assert set(RANGES) <= names  # a typo in the table would check nothing


@pytest.mark.parametrize(("cfg", "item", "message"), [
    (AccConfig(), "batch_size=0", "batch_size=0 is out of range; it must be > 0"),
    (AccConfig(), "gamma=1.5", "gamma=1.5 is out of range; it must be >= 0 and <= 1"),
    (AccConfig(), "online_priority=-0.5", "online_priority=-0.5 is out of range; it must be >= 0"),
    (AccConfig(), "lr=nan", "lr=nan is out of range; it must be > 0"),
    (PetConfig(), "clip=0", "clip=0 is out of range; it must be > 0"),
    (PetConfig(), "explore=2", "explore=2 is out of range; it must be >= 0 and <= 1"),
    (PetConfig(), "entropy_coef=-1", "entropy_coef=-1 is out of range; it must be >= 0"),
])
def test_set_out_of_range_is_a_config_error(cfg: object, item: str, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        apply_overrides(cfg, [item])
    assert str(exc.value) == message


def test_train_cli_refuses_before_training(capsys: pytest.CaptureFixture[str]) -> None:
    from p4cc.cli import main

    rc = main(["train", "acc", "--set", "batch_size=0", "--help-config"])
    err = capsys.readouterr().err
    assert rc != 0 and "batch_size=0 is out of range; it must be > 0" in err
