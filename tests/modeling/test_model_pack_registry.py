"""Registering model directories: every file's sha256, the parameter count and embedding size read from the files,
a licence required, and clear refusals for a missing, half-copied, pickled, unknown or changed directory."""
import json
import shutil

import pytest

import pack
from pack.models import PretrainedModel


def test_a_tiny_clip_registers_with_its_hashes_parameters_and_embedding_size(tiny_clip, models_dir):
    from safetensors.torch import load_file

    weights = load_file(str(models_dir / "tiny-clip" / "model.safetensors"))
    assert tiny_clip.kind == "clip" and tiny_clip.architecture == "CLIPModel"
    assert tiny_clip.parameters == sum(t.numel() for t in weights.values())
    assert tiny_clip.embedding_dim == 16
    assert set(tiny_clip.files) >= {"config.json", "model.safetensors", "preprocessor_config.json", "tokenizer.json"}
    assert tiny_clip.files["model.safetensors"] == pack.inspect.file_sha256(models_dir / "tiny-clip" / "model.safetensors")
    assert tiny_clip.directory == "tiny-clip"  # relative to the models dir, so the pack can move
    assert tiny_clip.key.startswith("tiny-clip@") and len(tiny_clip.key) == len("tiny-clip@") + 12


def test_the_packaged_sentence_encoder_is_in_the_registry_without_registering_it(db):
    model = pack.ensure_packaged()
    assert model.packaged and model.kind == "text" and model.embedding_dim == 384
    assert model.parameters > 20_000_000
    assert "Apache-2.0" in model.licence
    from modeling import encoders

    assert model.key == encoders.cache_key(encoders.MINILM)  # one cache of text vectors, not two


def test_a_licence_is_required(db, models_dir, _tiny_clip_source):
    shutil.copytree(_tiny_clip_source, models_dir / "m")
    with pytest.raises(pack.PackError) as caught:
        pack.model_add_pretrained(directory="m", name="m", licence=" ")
    assert caught.value.code == "licence_required" and caught.value.field == "licence"
    assert not PretrainedModel.objects.filter(name="m").exists()


def test_a_name_is_registered_once(tiny_clip):
    with pytest.raises(pack.PackError) as caught:
        pack.model_add_pretrained(directory="tiny-clip", name="tiny-clip", licence="MIT")
    assert caught.value.code == "duplicate"


def test_a_missing_directory_is_refused_with_its_path(db, models_dir):
    with pytest.raises(pack.PackError, match="No model directory at .*nowhere"):
        pack.model_add_pretrained(directory="nowhere", name="x", licence="MIT")


def test_a_half_copied_directory_is_refused(db, models_dir, _tiny_clip_source):
    target = models_dir / "half"
    shutil.copytree(_tiny_clip_source, target)
    weights = target / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(pack.PackError, match="incomplete|truncated") as caught:
        pack.model_add_pretrained(directory="half", name="half", licence="MIT")
    assert caught.value.code == "incomplete"
    (target / "model.safetensors").unlink()
    with pytest.raises(pack.PackError, match="no \\*.safetensors"):
        pack.model_add_pretrained(directory="half", name="half", licence="MIT")


def test_a_directory_with_pickled_weights_is_refused(db, models_dir, _tiny_clip_source):
    target = models_dir / "pickled"
    shutil.copytree(_tiny_clip_source, target)
    (target / "pytorch_model.bin").write_bytes(b"\x80\x04 pickled")
    with pytest.raises(pack.PackError, match="pytorch_model.bin") as caught:
        pack.model_add_pretrained(directory="pickled", name="pickled", licence="MIT")
    assert caught.value.code == "unsafe_weights"


def test_an_unknown_architecture_is_refused_by_name(db, models_dir, _tiny_clip_source):
    target = models_dir / "bert"
    shutil.copytree(_tiny_clip_source, target)
    config = json.loads((target / "config.json").read_text())
    config["model_type"] = "bert"
    (target / "config.json").write_text(json.dumps(config))
    with pytest.raises(pack.PackError, match="'bert' is not one the pack loads") as caught:
        pack.model_add_pretrained(directory="bert", name="bert", licence="MIT")
    assert caught.value.code == "unknown_architecture"


def test_a_weight_file_changed_after_registration_is_refused_at_load(tiny_clip, models_dir):
    weights = models_dir / "tiny-clip" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(pack.PackError, match="model.safetensors does not have the sha256") as caught:
        pack.load(tiny_clip)
    assert caught.value.code == "changed"


def test_a_pickle_dropped_beside_registered_files_is_refused_at_load(tiny_clip, models_dir):
    (models_dir / "tiny-clip" / "extra.pt").write_bytes(b"pickle")
    with pytest.raises(pack.PackError, match="extra.pt"):
        pack.load(tiny_clip)


def test_a_file_deleted_after_registration_is_named(tiny_clip, models_dir):
    (models_dir / "tiny-clip" / "tokenizer.json").unlink()
    with pytest.raises(pack.PackError, match="missing its file tokenizer.json"):
        pack.load(tiny_clip)


def test_no_model_registered_is_a_clear_error_that_says_how_to_register(db, models_dir):
    assert pack.find_model(kind="clip") is None
    with pytest.raises(pack.PackError, match="manage.py models add-pretrained") as caught:
        pack.get_model(kind="clip")
    assert caught.value.code == "no_model"


def test_the_model_loads_once_per_process(tiny_clip):
    assert pack.load(tiny_clip) is pack.load(tiny_clip)


def test_a_tiny_siglip_registers_and_embeds_photos_and_captions_through_the_same_code(db, models_dir, shared_photos):
    from PIL import Image

    from tests.modeling.tiny_clip import build_tiny_siglip

    build_tiny_siglip(models_dir / "tiny-siglip")
    model = pack.model_add_pretrained(directory="tiny-siglip", name="tiny-siglip", licence="Apache-2.0")
    assert (model.kind, model.architecture, model.embedding_dim) == ("clip", "SiglipModel", 32)
    encoder = pack.load(model)
    photos = [Image.open(p) for p in sorted(shared_photos.glob("*.jpg"))[:3]]
    images, texts = encoder.encode_images(photos), encoder.encode_texts(["a dog on a beach", "a red car"])
    assert images.shape == (3, 32) and texts.shape == (2, 32)
    assert abs(float((images ** 2).sum(axis=1).mean()) - 1) < 1e-4
    assert encoder.pad_to_max  # SigLIP was trained on text padded to its full length
