"""Sampling defaults a request gets for the fields it leaves out: the checkpoint's
generation_config.json over MODEL.toml's default preset over greedy; `serve` and `generate`
resolve them the same way."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from atlas.core.sampling import SamplingParams
from atlas.server.request_spec import ATLAS_DEFAULT_SAMPLING, request_defaults
from atlas_cli.main import cli
from atlas_cli.model_setup import request_defaults as cli_request_defaults

PRESET = SamplingParams(temperature=0.2, top_p=0.9)


def test_greedy_when_nothing_says_otherwise():
    params, source = request_defaults({"eos_token_id": 2}, None)
    assert params == ATLAS_DEFAULT_SAMPLING and params.is_greedy and "greedy" in source


def test_model_toml_preset_when_generation_config_has_no_sampling_fields():
    assert request_defaults({"bos_token_id": 1, "eos_token_id": 2}, PRESET) == (
        PRESET, "MODEL.toml [presets.default]")


def test_generation_config_fields_override_the_preset():
    params, source = request_defaults(
        {"do_sample": True, "temperature": 0.6, "top_k": 20, "top_p": 0.95}, PRESET)
    assert params == SamplingParams(temperature=0.6, top_p=0.95, top_k=20)
    assert source == "generation_config.json"


def test_do_sample_false_means_greedy_as_in_transformers():
    params, _ = request_defaults({"do_sample": False, "temperature": 0.7, "top_p": 0.8}, None)
    assert params.is_greedy and params.top_p == 0.8


def test_out_of_range_values_are_refused():
    with pytest.raises(ValueError, match="temperature"):
        request_defaults({"temperature": -1.0}, None)


def test_cli_reads_generation_config_and_names_it_when_invalid(tmp_path):
    (tmp_path / "generation_config.json").write_text(json.dumps({"temperature": 0.3}))
    params, source = cli_request_defaults(tmp_path, {"model_type": "unknown-family"})
    assert params.temperature == 0.3 and source == "generation_config.json"
    (tmp_path / "generation_config.json").write_text(json.dumps({"top_p": 7}))
    with pytest.raises(Exception, match="generation_config.json: top_p"):
        cli_request_defaults(tmp_path, {"model_type": "unknown-family"})


def test_serve_help_documents_the_defaults():
    text = " ".join(CliRunner().invoke(cli, ["serve", "--help"]).output.split())
    assert "generation_config.json" in text and "[presets.default]" in text
    assert "greedy (temperature 0)" in text and "atlas generate" in text
