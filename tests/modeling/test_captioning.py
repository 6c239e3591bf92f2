"""Captioners on a small frozen Release: vocabulary, the loss falling for both decoders, beam search,
encoder weight files (good, corrupt, mismatched, a pickle with an arbitrary object), missing images."""
from __future__ import annotations

import io
import pickle

import pytest
import torch
from django.core.files.storage import default_storage
from PIL import Image as PILImage

from curation.models import Collection
from modeling.captioning.beam import beam_search
from modeling.captioning.decoders import Captioner, sentence_nll
from modeling.captioning.encoder import ImageEncoder, load_encoder_weights
from modeling.captioning.vocab import Vocab, tokenize
from modeling.models import TrainingRun
from modeling.trainers import get_trainer
from modeling.trainers.base import TrainingError
from releases.freeze import freeze

from ..curation.release_helpers import add_caption, add_image, make_release

COLOURS = [(220, 30, 30), (30, 200, 40), (40, 60, 220), (230, 220, 30), (240, 240, 240), (20, 20, 20)]
NAMES = ["red", "green", "blue", "yellow", "white", "black"]


def solid(rgb, size=40, stripe=False) -> bytes:
    img = PILImage.new("RGB", (size, size), rgb)
    if stripe:
        for x in range(0, size, 4):
            for y in range(size):
                img.putpixel((x, y), (128, 128, 128))
    out = io.BytesIO()
    img.save(out, "PNG")
    return out.getvalue()


def tiny_release(name="tiny", n=6, captions_per_image=2, splits=None, fluency=None):
    """n solid-colour images, each captioned 'a <colour> square' (+ 'the <colour> picture'); frozen."""
    collection = Collection.objects.create(name=f"{name}-col", source_kind=Collection.SourceKind.WEB_ALT_TEXT)
    images = []
    for i in range(n):
        image = add_image(collection, solid(COLOURS[i % 6], stripe=i >= 6), external_id=f"c{i}")
        texts = [f"a {NAMES[i % 6]} square", f"the {NAMES[i % 6]} picture"][:captions_per_image]
        for t in texts:
            add_caption(image, t)
        images.append(image)
    release = make_release(name, collections=[collection.pk],
                           splits=splits or {"train": 1.0, "val": 0.0, "test": 0.0})
    freeze(release)
    release.refresh_from_db()
    return release, collection, images


def make_run(release, trainer="captioner-lstm", **config):
    base = {"min_count": 1, "min_train_captions": 2, "min_vocabulary": 1, "image_size": 16, "feature_dim": 32,
            "width": 8, "embed": 32, "hidden": 32, "dropout": 0.0, "heads": 2, "layers": 1, "batch_size": 16,
            "meteor": False}
    base.update(config)
    return TrainingRun.objects.create(kind="captioner", config=base, release=release)


def train_losses(trainer, run, epochs=40, lr=0.01):
    torch.manual_seed(0)
    config = trainer.config(run.config)
    prepared = trainer.prepare(run)
    model = trainer.build(config, prepared.info)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(0)
    losses = []
    for epoch in range(epochs):
        total, n = 0.0, 0
        for batch in trainer.batches(prepared.train, config, epoch, g, True):
            loss, m = trainer.loss(model, batch, torch.device("cpu"), config)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total, n = total + float(loss.detach()) * m, n + m
        losses.append(total / n)
    return losses, model, prepared, config


# --- vocabulary ----------------------------------------------------------------------------------

def test_vocab_min_count_unk_and_truncation_to_15_tokens():
    texts = ["a dog runs", "a dog sits", "a cat sits", "a dog, a dog!"]
    vocab = Vocab.build(texts, min_count=2)
    assert vocab.itos[4:] == ["a", "dog", "sits"]  # by count, then alphabetically; cat/runs are rare
    assert vocab.encode("a cat runs") == [1, vocab.stoi["a"], 3, 3, 2]
    long = " ".join(["a"] * 20)
    assert len(vocab.encode(long)) == 15 + 2
    assert vocab.decode(vocab.encode("a dog sits")) == "a dog sits"
    assert tokenize("一只狗 runs") == ["一", "只", "狗", "runs"]
    assert Vocab.from_json(vocab.to_json()).itos == vocab.itos


# --- training ------------------------------------------------------------------------------------

@pytest.mark.django_db
@pytest.mark.parametrize("name", ["captioner-lstm", "captioner-transformer"])
def test_loss_falls_on_a_tiny_release(name):
    release, _, _ = tiny_release()
    trainer = get_trainer(name)
    losses, model, prepared, config = train_losses(trainer, make_run(release, name), epochs=30)
    assert prepared.summary["train"] == {"captions": 12, "images": 6}
    assert prepared.info["vocab"][4:] == ["a", "picture", "square", "the"] + sorted(NAMES)
    assert len(prepared.data_hash) == 64
    assert losses[-1] < 0.5 * losses[0], losses
    # it learned the colours: the best beam for the red image says "red"
    generated = trainer.generate(model, prepared.train["images"], prepared.info, torch.device("cpu"), beam_size=4)
    words = [text.split() for text, _ in generated]
    assert sum(NAMES[i] in words[i] for i in range(6)) >= 5, words
    metrics = trainer.evaluate(model, prepared, torch.device("cpu"), config)
    assert metrics["BLEU-1"] > 0.5 and "CIDEr" in metrics and metrics["diversity"]["vocabulary"] >= 6


@pytest.mark.django_db
def test_too_few_captions_and_bad_strategy_are_refused():
    release, _, _ = tiny_release(n=1, captions_per_image=1)
    trainer = get_trainer("captioner-lstm")
    with pytest.raises(TrainingError) as info:
        trainer.prepare(make_run(release))
    assert info.value.code == "too_few_labels" and "has 1 usable caption(s), at least 2" in info.value.message
    with pytest.raises(TrainingError) as info:
        trainer.prepare(make_run(release, strategy="shouting"))
    assert info.value.code == "bad_config" and "shouting" in info.value.message


@pytest.mark.django_db
def test_missing_images_fail_clearly_or_are_skipped_by_config():
    release, _, images = tiny_release(n=3)
    default_storage.delete(images[1].file.name)
    trainer = get_trainer("captioner-lstm")
    with pytest.raises(TrainingError) as info:
        trainer.prepare(make_run(release))
    assert info.value.code == "missing_images"
    assert "1 image(s)" in info.value.message and images[1].file.name in info.value.message
    prepared = trainer.prepare(make_run(release, missing_images="skip"))
    assert prepared.summary["train"] == {"captions": 4, "images": 2}
    assert any("skipped 1 missing image" in n for n in prepared.summary["notes"])


@pytest.mark.django_db
def test_strategies_need_fluency_scores():
    release, _, _ = tiny_release(n=2)
    with pytest.raises(TrainingError) as info:
        get_trainer("captioner-lstm").prepare(make_run(release, strategy="weighted_loss"))
    assert "needs a fluency score for every caption" in info.value.message


# --- beam search ---------------------------------------------------------------------------------

class ScriptedModel:
    """A 'model' whose next-word log-probabilities depend only on the previous token."""

    def __init__(self, table):
        self.table = torch.log(torch.tensor(table, dtype=torch.float32))

    def start(self, images):
        return torch.zeros(images.shape[0], dtype=torch.long)

    def step(self, tokens, state):
        return self.table[tokens], state

    def select(self, state, index):
        return state[index]


def test_beam_search_returns_k_candidates_in_score_order():
    torch.manual_seed(0)
    model = Captioner(20, "lstm", feature_dim=16, width=4, embed=16, hidden=16, dropout=0.0)
    model.eval()
    cands = beam_search(model, torch.zeros(3, 16, 16), start_id=1, end_id=2, beam_size=4, max_len=8)
    assert len(cands) == 4
    scores = [s for _, s in cands]
    assert scores == sorted(scores, reverse=True)
    assert len({tuple(ids) for ids, _ in cands}) == 4
    # scores are the summed log-probabilities of the words and END, as the model gives them
    with torch.no_grad():
        ids, score = cands[0]
        tokens = torch.tensor([[1] + ids + [2]])
        nll = sentence_nll(model(torch.zeros(1, 3, 16, 16), tokens), tokens)
    assert float(-nll) == pytest.approx(score, abs=1e-4)


def test_beam_search_finds_the_best_sentence_greedy_misses():
    # tokens: 0 pad, 1 start, 2 end, 3 "x", 4 "y". Greedy takes x (0.6) then must end badly;
    # y (0.4) then end (1.0) has probability 0.4 > 0.6 * 0.5.
    table = [[.2] * 5,
             [1e-9, 1e-9, 1e-9, 0.6, 0.4],
             [.2] * 5,
             [1e-9, 1e-9, 0.5, 0.25, 0.25],
             [1e-9, 1e-9, 1.0, 1e-9, 1e-9]]
    cands = beam_search(ScriptedModel(table), torch.zeros(1, 1, 1, 1), start_id=1, end_id=2, beam_size=3, max_len=5)
    assert [ids for ids, _ in cands][:2] == [[4], [3]]
    assert cands[0][1] == pytest.approx(float(torch.log(torch.tensor(0.4))), abs=1e-5)
    assert cands[1][1] == pytest.approx(float(torch.log(torch.tensor(0.3))), abs=1e-5)
    assert len(cands) == 3 and cands[2][1] < cands[1][1]


# --- encoder weight files --------------------------------------------------------------------------

def test_encoder_state_dict_files(tmp_path):
    source = ImageEncoder(32, 8)
    good = tmp_path / "enc.pt"
    torch.save(source.state_dict(), good)
    target = ImageEncoder(32, 8)
    load_encoder_weights(target, str(good))
    assert all(torch.equal(a, b) for a, b in zip(source.state_dict().values(), target.state_dict().values()))

    # a topic CNN / captioner state dict works too: the encoder.* entries are used
    wrapped = tmp_path / "captioner.pt"
    torch.save({f"encoder.{k}": v for k, v in source.state_dict().items()} | {"head.weight": torch.zeros(2, 32)},
               wrapped)
    load_encoder_weights(ImageEncoder(32, 8), str(wrapped))

    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(good.read_bytes()[:200])
    with pytest.raises(TrainingError) as info:
        load_encoder_weights(ImageEncoder(32, 8), str(corrupt))
    assert info.value.code == "bad_weights" and "not a readable PyTorch state dict" in info.value.message

    with pytest.raises(TrainingError) as info:
        load_encoder_weights(ImageEncoder(64, 8), str(good))
    assert info.value.code == "bad_weights" and "shape mismatch" in info.value.message
    assert "do not match this encoder (dim 64)" in info.value.message

    with pytest.raises(TrainingError) as info:
        load_encoder_weights(ImageEncoder(32, 8), str(tmp_path / "absent.pt"))
    assert "does not exist" in info.value.message


class Boom:
    def __reduce__(self):
        return (exec, ("import pathlib; pathlib.Path('PWNED').write_text('x')",))


def test_a_pickle_with_an_arbitrary_object_is_refused_and_not_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    evil = tmp_path / "evil.pt"
    torch.save({"body.0.weight": Boom()}, evil)
    with pytest.raises(TrainingError) as info:
        load_encoder_weights(ImageEncoder(32, 8), str(evil))
    assert info.value.code == "bad_weights" and "weights_only=True" in info.value.message
    assert not (tmp_path / "PWNED").exists()
    plain = tmp_path / "plain.pkl"
    plain.write_bytes(pickle.dumps({"x": 1}))
    with pytest.raises(TrainingError):
        load_encoder_weights(ImageEncoder(32, 8), str(plain))


@pytest.mark.django_db
def test_a_run_with_a_mismatched_encoder_file_fails_before_reading_images(tmp_path):
    release, _, _ = tiny_release(n=2)
    path = tmp_path / "wrong.pt"
    torch.save(ImageEncoder(16, 8).state_dict(), path)
    with pytest.raises(TrainingError) as info:
        get_trainer("captioner-lstm").prepare(make_run(release, encoder_weights=str(path)))
    assert info.value.code == "bad_weights"
    good = tmp_path / "good.pt"
    torch.save(ImageEncoder(32, 8).state_dict(), good)
    run = make_run(release, encoder_weights=str(good), freeze_encoder=True)
    trainer = get_trainer("captioner-lstm")
    prepared = trainer.prepare(run)
    model = trainer.build(trainer.config(run.config), prepared.info)
    assert torch.equal(model.encoder.state_dict()["body.0.weight"], torch.load(good)["body.0.weight"])
    assert not any(p.requires_grad for p in model.encoder.parameters())


def test_with_an_image_text_model_registered_the_metrics_include_clipscore(tiny_clip):
    release, _, _ = tiny_release("clipscored")
    trainer = get_trainer("captioner-lstm")
    _, model, prepared, config = train_losses(trainer, make_run(release), epochs=30)  # long enough to say something
    metrics = trainer.evaluate(model, prepared, torch.device("cpu"), config)
    assert 0.0 <= metrics["CLIP-S"] <= 2.5 and 0.0 <= metrics["RefCLIP-S"] <= 2.5
    without = trainer.evaluate(model, prepared, torch.device("cpu"), {**config, "clip_score": False})
    assert "CLIP-S" not in without


@pytest.mark.django_db
def test_without_an_image_text_model_the_ngram_metrics_stand_alone(models_dir):
    release, _, _ = tiny_release("unscored")
    trainer = get_trainer("captioner-lstm")
    _, model, prepared, config = train_losses(trainer, make_run(release), epochs=2)
    metrics = trainer.evaluate(model, prepared, torch.device("cpu"), config)
    assert "CLIP-S" not in metrics and "BLEU-4" in metrics
