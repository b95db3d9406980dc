from importlib.metadata import metadata

import spade_train


def test_version_matches_installed_metadata():
    assert spade_train.__version__ == metadata("spade-train")["Version"]


def test_public_names_exist():
    for name in spade_train.__all__:
        assert hasattr(spade_train, name), name
