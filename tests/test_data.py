"""course.data: shipped texts, and newsgroups only from a local cache."""

import builtins

from course import data


def test_sample_texts_ship_with_the_bank_sentence():
    texts = data.sample_texts()
    assert data.SAMPLE_TEXT in texts
    assert data.SAMPLE_TEXT.lower().count("bank") == 2
    assert len(texts) >= 5 and all(t and not t.startswith("#") for t in texts)


def test_newsgroups_falls_back_without_scikit_learn(monkeypatch, tmp_path):
    (tmp_path / "20news-bydate.pkz").touch()  # a cache, but no scikit-learn
    monkeypatch.setenv("SCIKIT_LEARN_DATA", str(tmp_path))
    real_import = builtins.__import__
    imported = []

    def no_sklearn(name, *args, **kwargs):
        if name.startswith("sklearn"):
            imported.append(name)
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_sklearn)
    assert data.newsgroups_texts(3) == data.sample_texts()[:3]
    assert imported, "scikit-learn was never asked for"


def test_newsgroups_never_downloads(monkeypatch, tmp_path):
    """With scikit-learn present but nothing cached, no network is attempted."""
    import socket

    def no_network(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setenv("SCIKIT_LEARN_DATA", str(tmp_path))
    texts = data.newsgroups_texts(4)
    assert len(texts) == 4


def test_long_text_outgrows_the_positions(monkeypatch, tmp_path):
    """Offline, the shipped post: longer than the model's positions, no comments."""
    from course import models

    monkeypatch.setenv("SCIKIT_LEARN_DATA", str(tmp_path))  # no corpus cached
    text = data.long_text()
    assert len(text.split()) >= data.LONG_WORDS and not text.startswith("#")
    positions = models.oracle_model().config.max_position_embeddings
    assert len(models.load_tokenizer()(text)["input_ids"]) > positions


def test_long_text_prefers_a_cached_newsgroups_post(monkeypatch):
    short, long = "too short", " ".join(["word"] * data.LONG_WORDS)
    monkeypatch.setattr(data, "_newsgroups_posts", lambda: [short, long])
    assert data.long_text() == long
