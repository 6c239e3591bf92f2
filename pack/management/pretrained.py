"""The model-pack actions of ``manage.py models``: pretrained (list), add-pretrained DIR, verify NAME."""
from django.core.management.base import CommandError

import pack
from pack.models import PretrainedModel

ACTIONS = ("pretrained", "add-pretrained", "verify")


def handle(command, opts) -> None:
    try:
        {"pretrained": _list, "add-pretrained": _add, "verify": _verify}[opts["action"]](command, opts)
    except pack.PackError as exc:
        raise CommandError(exc.message) from None


def _list(command, opts) -> None:
    pack.ensure_packaged()
    models = PretrainedModel.objects.all()
    if not models:
        command.stdout.write(f"No pretrained model registered (models directory: {pack.models_dir()}).")
    for m in models:
        command.stdout.write(f"{m.key:<40} {m.kind:<5} {m.architecture:<22} {m.parameters:>13,} params "
                             f"{m.embedding_dim:>5}-d  {m.licence}")


def _add(command, opts) -> None:
    if not opts["kind"]:
        raise CommandError("Usage: manage.py models add-pretrained DIR --name NAME --licence LICENCE [--source TEXT]")
    if not opts.get("name"):
        raise CommandError("Give the model a name: --name NAME.")
    if not opts.get("licence"):
        raise CommandError("Give the model's licence: --licence LICENCE (e.g. MIT, Apache-2.0).")
    command.stdout.write(f"Hashing the files of {pack.resolve(opts['kind'])}...")
    model = pack.model_add_pretrained(directory=opts["kind"], name=opts["name"], licence=opts["licence"],
                                      source=opts.get("source") or "")
    command.stdout.write(command.style.SUCCESS(
        f"Registered {model.key}: {model.architecture}, {model.parameters:,} parameters, {model.embedding_dim}-d, "
        f"{len(model.files)} files, licence {model.licence}."))


def _verify(command, opts) -> None:
    name = opts["kind"]
    model = PretrainedModel.objects.filter(name=name).first() if name else None
    if model is None:
        raise CommandError(f"No pretrained model named {name!r}; see `manage.py models pretrained`.")
    pack.verify(model)
    command.stdout.write(command.style.SUCCESS(f"{model.key}: all {len(model.files)} files match; no pickles."))
