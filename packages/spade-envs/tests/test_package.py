from importlib.metadata import metadata

import spade_envs


def test_version_matches_installed_metadata():
    assert spade_envs.__version__ == metadata("spade-envs")["Version"]


def test_public_names_exist():
    for name in spade_envs.__all__:
        assert hasattr(spade_envs, name), name
