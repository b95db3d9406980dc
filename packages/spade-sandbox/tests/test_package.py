from importlib.metadata import metadata

import spade_sandbox


def test_version_matches_installed_metadata():
    assert spade_sandbox.__version__ == metadata("spade-sandbox")["Version"]


def test_public_names_exist():
    for name in spade_sandbox.__all__:
        assert hasattr(spade_sandbox, name), name
