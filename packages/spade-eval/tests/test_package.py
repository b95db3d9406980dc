from importlib.metadata import metadata

import spade_eval


def test_version_matches_installed_metadata():
    assert spade_eval.__version__ == metadata("spade-eval")["Version"]


def test_public_names_exist():
    for name in spade_eval.__all__:
        assert hasattr(spade_eval, name), name
