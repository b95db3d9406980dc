from importlib.metadata import metadata

import spade_corpus


def test_version_matches_installed_metadata():
    assert spade_corpus.__version__ == metadata("spade-corpus")["Version"]


def test_public_names_exist():
    for name in spade_corpus.__all__:
        assert hasattr(spade_corpus, name), name
