"""course.data: shipped texts, and newsgroups only from a local cache."""

import builtins

from course import data


def test_sample_texts_ship_with_the_bank_sentence():
    texts = data.sample_texts()
    assert data.SAMPLE_TEXT in texts
    assert data.SAMPLE_TEXT.lower().count("bank") == 2
    assert len(texts) >= 5 and all(t and not t.startswith("#") for t in texts)


def test_newsgroups_falls_back_without_scikit_learn(monkeypatch):
    real_import = builtins.__import__

    def no_sklearn(name, *args, **kwargs):
        if name.startswith("sklearn"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_sklearn)
    assert data.newsgroups_texts(3) == data.sample_texts()[:3]


def test_newsgroups_never_downloads(monkeypatch, tmp_path):
    """With scikit-learn present but nothing cached, no network is attempted."""
    import socket

    def no_network(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setenv("SCIKIT_LEARN_DATA", str(tmp_path))
    texts = data.newsgroups_texts(4)
    assert len(texts) == 4
