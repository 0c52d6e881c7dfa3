"""Model-directory loading: tokenizer files, EOS ids, template override and named templates,
the MODEL.toml behavior lookup, and the sandbox around chat templates."""

from __future__ import annotations

import json

import pytest

from atlas.server.app_assets import load_assets, model_behavior
from atlas.server.chat_template import ChatTemplate, TemplateError, pick_template


def test_assets_eos_ids_and_template_override(model_dir, tmp_path):
    assets = load_assets(model_dir, behavior_lookup=lambda c: {"tool_parser": "mistral"})
    tok = assets.tokenizer
    assert assets.behavior == {"tool_parser": "mistral"}
    assert tok.eos_token_ids == {tok.token_id("<|im_end|>"), tok.token_id("<|endoftext|>")}
    override = tmp_path / "t.jinja"
    override.write_text("{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
                        "{% if add_generation_prompt %}[assistant] {% endif %}")
    custom = load_assets(model_dir, chat_template_file=override,
                         behavior_lookup=lambda c: {}).tokenizer
    text = custom.chat_template(False).render([{"role": "user", "content": "hi"}])
    assert text == "[user] hi\n[assistant] "


def test_missing_tokenizer_is_a_clear_error(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        load_assets(tmp_path, behavior_lookup=lambda c: {})


def test_behavior_comes_from_the_matching_model_toml(skip_built_kernels, monkeypatch):
    monkeypatch.setenv("ATLAS_KERNELS_DIR", str(skip_built_kernels))
    qwen = {"model_type": "qwen3", "hidden_size": 4096}
    assert model_behavior(qwen, "host")["tool_parser"] == "hermes"
    assert model_behavior({"model_type": "llama", "hidden_size": 576}, "host")["tool_parser"] \
        == "none"
    assert model_behavior({"model_type": "no-such-family", "hidden_size": 1}, "host") == {}


def _tree_with_two_hardwares(root):
    """gb10-like `aa` (sorts first) and hopper, each with a baseline leaf and a model `m`
    whose MODEL.toml names a different tool parser."""
    for hw, arch, parser in (("aa", "sm_121", "mistral"), ("hopper", "sm_90a", "hermes")):
        base = root / "kernels" / hw
        (base / "common" / "bf16").mkdir(parents=True)
        (base / "common" / "bf16" / "KERNEL.toml").write_text("")
        (base / "HARDWARE.toml").write_text(f'vendor = "nvidia"\narch = "{arch}"\n')
        (base / "m").mkdir()
        (base / "m" / "MODEL.toml").write_text(
            f'[[model_types]]\nmodel_type = "qwen3"\n[behavior]\ntool_parser = "{parser}"\n')
    return root


def test_behavior_is_read_from_the_built_sets_for_the_backends_hardware(tmp_path, monkeypatch,
                                                                       capsys):
    """Not from a source checkout, and not the alphabetically first hardware: the host
    backend uses hopper's and says so; the artifact alone is enough (the tree is deleted)."""
    import shutil

    from atlas.kernels.build import build_into
    from atlas.kernels.tree import list_targets

    repo = _tree_with_two_hardwares(tmp_path / "repo")
    build_into(repo, tmp_path / "sets", list_targets(repo), skip=True)
    shutil.rmtree(repo)
    monkeypatch.setenv("ATLAS_KERNELS_DIR", str(tmp_path / "sets"))
    assert model_behavior({"model_type": "qwen3", "hidden_size": 8}, "host") == \
        {"tool_parser": "hermes"}
    log = capsys.readouterr().err  # stderr: `atlas generate` prints its text on stdout
    assert "ptx_set=hopper/common/bf16" in log and "host backend's default hardware" in log


def test_named_templates_pick_tool_use_when_tools_are_given():
    named = [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]
    assert pick_template(named, want_tools=True) == "T"
    assert pick_template(named, want_tools=False) == "D"
    assert pick_template("S", want_tools=True) == "S"


def test_templates_are_sandboxed_and_raise_as_template_errors():
    leak = ChatTemplate("{{ messages.__class__.__mro__[1].__subclasses__() }}")
    with pytest.raises(TemplateError):
        leak.render([{"role": "user", "content": "x"}])
    strict = ChatTemplate("{% if messages[0].role != 'user' %}"
                          "{{ raise_exception('first message must be user') }}{% endif %}ok")
    with pytest.raises(TemplateError, match="must be user"):
        strict.render([{"role": "assistant", "content": "x"}])
    assert ChatTemplate("{{ {'a': '<é>'} | tojson }}").render([]) == '{"a": "<é>"}'
