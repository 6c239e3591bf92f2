"""Dataset releases from the terminal.

    manage.py release create --name cc-v1 --collections demo --vote-rule 3:good_2plus \\
        --splits 0.8,0.1,0.1 --seed 7 --test-human-verified --freeze
    manage.py release freeze 4
    manage.py release export 4 --format webdataset --shard-size 500MB --out /data/cc-v1
    manage.py release export 4 --format coco --image-archive zip --verify    # images/ in zip shards
    manage.py release export 4 --format jsonl --images none                  # paths into storage
    manage.py release verify 12        # re-export export #12 and compare every sha256
    manage.py release delete-export 12
    manage.py release list
    manage.py release show 4

Freezing and exporting run in this process with a progress line (no worker needed).
"""
import json
import re
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.models import Campaign
from curation.models import Collection, FilterRun
from releases.models import Release, ReleaseExport

RULES = ("good_1plus", "good_2plus", "good_3plus", "fluent", "label")
UNITS = {"": 1, "B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3}


def parse_size(text: str) -> int:
    """``500MB`` -> 500,000,000 bytes; a plain number is bytes."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text or "")
    if not match or match.group(2).upper() not in UNITS:
        raise CommandError(f"--shard-size {text!r}: write bytes, or a number with KB, MB, GB (or KiB, MiB, GiB)")
    return int(float(match.group(1)) * UNITS[match.group(2).upper()])


class Command(BaseCommand):
    help = "Create, freeze, export, list and show dataset releases."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="create a release (and freeze it with --freeze)")
        create.add_argument("--name", required=True)
        create.add_argument("--description", default="")
        create.add_argument("--collections", required=True, help="comma-separated collection names or ids")
        create.add_argument("--run", type=int, help="filter run id: only captions it kept (overrides applied)")
        create.add_argument("--vote-rule", action="append", default=[], metavar="CAMPAIGN:RULE[:LABEL[:METHOD]]",
                            help=f"keep only captions passing: campaign name or id and a rule of "
                                 f"{', '.join(RULES)}; repeatable")
        create.add_argument("--verified-by", action="append", default=[], metavar="CAMPAIGN:RULE[:LABEL[:METHOD]]",
                            help="mark captions passing this rule human-verified (without filtering); repeatable")
        create.add_argument("--origins", default="", help="comma-separated caption origins (default: all)")
        create.add_argument("--include-model-captions", action="store_true",
                            help="keep model-generated captions (left out by default; never in the test split)")
        create.add_argument("--languages", default="", help="comma-separated language codes (default: all)")
        create.add_argument("--max-per-image", type=int, help="cap of captions per image")
        create.add_argument("--dedup", choices=("sha256", "phash", "none"), default="sha256")
        create.add_argument("--splits", default="0.8,0.1,0.1", help="train,val,test shares")
        create.add_argument("--seed", type=int, default=0)
        create.add_argument("--test-human-verified", action="store_true",
                            help="the test split holds only human-verified captions")
        create.add_argument("--missing", choices=("skip", "fail"), default="skip",
                            help="an image file missing from storage: skip it (recorded) or fail")
        create.add_argument("--freeze", action="store_true", help="freeze right away, in this process")
        freeze = sub.add_parser("freeze", help="freeze a queued (or failed) release, in this process")
        freeze.add_argument("id", type=int)
        export = sub.add_parser("export", help="export a frozen release in one format, in this process")
        export.add_argument("id", type=int)
        export.add_argument("--format", required=True, choices=ReleaseExport.Format.values)
        export.add_argument("--images", choices=("include", "none"), default="include",
                            help="include: the images ship with the export (WebDataset samples, or images/ shards "
                                 "the annotations reference); none: the annotations give storage paths and the "
                                 "manifest names the storage")
        export.add_argument("--missing-images", choices=("skip", "fail"),
                            help="an image missing from storage: leave its captions out (counted) or fail with the "
                                 "list (default: the release's setting)")
        export.add_argument("--image-archive", choices=("tar", "zip"),
                            help="the images shards of a non-WebDataset export (default tar)")
        export.add_argument("--shard-size", help="most bytes per shard (WebDataset, or images shards), e.g. 500MB, "
                                                 "1GB or 1048576")
        export.add_argument("--samples-per-shard", type=int, help="WebDataset: most samples (images) per shard")
        export.add_argument("--out", help="also copy the files into this local folder")
        export.add_argument("--verify", action="store_true",
                            help="then re-export and verify that every sha256 matches")
        verify = sub.add_parser("verify", help="re-export a done export and show that every sha256 matches")
        verify.add_argument("export_id", type=int)
        delete = sub.add_parser("delete-export", help="delete an export and its files")
        delete.add_argument("export_id", type=int)
        sub.add_parser("list", help="list releases")
        show = sub.add_parser("show", help="show a release: config, counts, exports, the card")
        show.add_argument("id", type=int)

    def handle(self, *args, **options):
        getattr(self, f"do_{options['action'].replace('-', '_')}")(options)

    # --- helpers -----------------------------------------------------------------------------------

    def _progress(self, label: str):
        tty = sys.stdout.isatty()
        state = {"last": None}

        def echo(done, total):
            pct = int(100 * done / total) if total else 0
            line = f"{label}: {pct:3d}%  {done:,}/{total or 0:,}"
            if line != state["last"]:
                self.stdout.write(("\r" + line) if tty else line, ending="" if tty else "\n")
                state["last"] = line

        def finish():
            if tty and state["last"] is not None:
                self.stdout.write("")

        return echo, finish

    def _release(self, pk: int) -> Release:
        release = Release.objects.filter(pk=pk).first()
        if release is None:
            raise CommandError(f"no release #{pk}")
        return release

    @staticmethod
    def _lookup(model, text: str, what: str):
        text = text.strip()
        obj = model.objects.filter(name=text).first()
        if obj is None and text.isdigit():
            obj = model.objects.filter(pk=int(text)).first()
        if obj is None:
            raise CommandError(f"no {what} named {text!r}")
        return obj

    def _rule(self, spec: str, option: str) -> dict:
        """CAMPAIGN:RULE[:LABEL[:METHOD]]; a campaign name may hold colons: the rule is the first
        known rule name after the first colon."""
        bits = spec.split(":")
        index = next((i for i in range(1, len(bits)) if bits[i] in RULES), None)
        if index is None:
            raise CommandError(f"{option} {spec!r}: write CAMPAIGN:RULE with a rule of {', '.join(RULES)}")
        campaign = self._lookup(Campaign, ":".join(bits[:index]), "campaign")
        rule = {"campaign": campaign.pk, "rule": bits[index]}
        rest = bits[index + 1:]
        if rest and rest[0]:
            rule["label"] = rest[0]
        if len(rest) > 1 and rest[1]:
            rule["method"] = rest[1]
        return rule

    # --- actions -----------------------------------------------------------------------------------

    def do_create(self, o):
        from releases import ReleaseError, services

        collections = [self._lookup(Collection, c, "collection").pk for c in o["collections"].split(",") if c.strip()]
        if o["run"] is not None and not FilterRun.objects.filter(pk=o["run"]).exists():
            raise CommandError(f"no filter run #{o['run']}")
        rules = [self._rule(spec, "--vote-rule") for spec in o["vote_rule"]]
        verified_by = [self._rule(spec, "--verified-by") for spec in o["verified_by"]]
        try:
            shares = [float(x) for x in o["splits"].split(",")]
        except ValueError:
            raise CommandError("--splits: three numbers, e.g. 0.8,0.1,0.1") from None
        if len(shares) != 3:
            raise CommandError("--splits: three numbers, e.g. 0.8,0.1,0.1")
        config = {
            "collections": collections, "run": o["run"], "vote_rules": rules, "verified_by": verified_by,
            "origins": [x.strip() for x in o["origins"].split(",") if x.strip()],
            "languages": [x.strip() for x in o["languages"].split(",") if x.strip()],
            "max_captions_per_image": o["max_per_image"], "dedup": o["dedup"],
            "splits": dict(zip(("train", "val", "test"), shares)), "seed": o["seed"],
            "test_human_verified": o["test_human_verified"], "missing_image": o["missing"],
            "include_model_captions": o["include_model_captions"],
        }
        try:
            release = services.release_create(o["name"], config, None, description=o["description"])
        except ReleaseError as exc:
            raise CommandError(f"{exc.field}: {exc.message}" if exc.field else exc.message) from None
        self.stdout.write(f"Release #{release.pk} {release.name!r} created (queued).")
        if o["freeze"]:
            self._freeze(release)

    def _freeze(self, release: Release):
        from releases import services

        if release.status == Release.Status.FROZEN:
            raise CommandError(f"release #{release.pk} is frozen already: it never changes")
        echo, finish = self._progress(f"Freezing #{release.pk}")
        release = services.run_freeze(release.pk, echo=echo)
        finish()
        if release.status != Release.Status.FROZEN:
            raise CommandError(f"release #{release.pk} failed: {release.error}")
        self.stdout.write(self.style.SUCCESS(
            f"Release #{release.pk} frozen: {release.items_total:,} captions, content hash {release.content_hash}"))
        self._counts(release)

    def do_freeze(self, o):
        self._freeze(self._release(o["id"]))

    def do_export(self, o):
        from releases import ReleaseError, publish, services

        release = self._release(o["id"])
        options = {"images": o["images"]}
        if o["missing_images"]:
            options["missing_images"] = o["missing_images"]
        if o["image_archive"]:
            options["image_archive"] = o["image_archive"]
        if o["samples_per_shard"]:
            options["samples_per_shard"] = o["samples_per_shard"]
        if o["shard_size"]:
            options["shard_size"] = parse_size(o["shard_size"])
        try:
            export = services.export_create(release, o["format"], options, None, enqueue=False)
        except ReleaseError as exc:
            raise CommandError(exc.message) from None
        if export.status == ReleaseExport.Status.DONE:
            self.stdout.write(f"Export #{export.pk} ({export.format}) is done already: reusing it.")
        else:
            echo, finish = self._progress(f"Export #{export.pk} {export.format}")
            export = publish.run_export(export.pk, echo=echo)
            finish()
            if export is None:
                raise CommandError("the export was deleted while it ran")
        if export.status != ReleaseExport.Status.DONE:
            raise CommandError(f"export #{export.pk} failed: {export.error}")
        for f in export.files:
            self.stdout.write(f"  {f['name']}  {f['size']:,} bytes  sha256 {f['sha256']}")
        self.stdout.write(self.style.SUCCESS(
            f"Export #{export.pk}: {len(export.files)} file(s), {export.size:,} bytes, sha256 {export.sha256}"))
        summary = next((e for e in export.report or [] if e.get("code") == "missing_images"), None)
        if summary:
            self.stdout.write(self.style.WARNING(summary["message"]))
        elif export.report:
            self.stdout.write(self.style.WARNING(f"{len(export.report)} note(s) in the export's report; see "
                                                 f"`release show {release.pk}`"))
        if o["out"]:
            written = publish.copy_out(export, Path(o["out"]))
            self.stdout.write(f"Copied {len(written)} file(s) to {o['out']}")
        if o["verify"]:
            self._verify(export)

    def _export(self, pk: int) -> ReleaseExport:
        export = ReleaseExport.objects.select_related("release").filter(pk=pk).first()
        if export is None:
            raise CommandError(f"no export #{pk}")
        return export

    def _verify(self, export: ReleaseExport):
        from releases import ReleaseError, services
        from releases.verify import run_verify

        try:
            services.export_verify(export, enqueue=False)
        except ReleaseError as exc:
            raise CommandError(exc.message) from None
        echo, finish = self._progress(f"Verifying #{export.pk}")
        export = run_verify(export.pk, progress=echo)
        finish()
        v = export.verification
        if v.get("status") != "done":
            raise CommandError(f"verification of export #{export.pk} failed: {v.get('error')}")
        for f in v["files"]:
            mark = "ok      " if f["match"] else "MISMATCH"
            self.stdout.write(f"  {mark} {f['name']}  recorded {f['recorded'] or '-'}  rewritten {f['rewritten'] or '-'}"
                              f"  stored {f['stored'] or 'missing'}")
        if not v["ok"]:
            raise CommandError(f"export #{export.pk}: {v['matched']} of {len(v['files'])} file(s) match")
        self.stdout.write(self.style.SUCCESS(f"Export #{export.pk} verified: all {v['matched']} sha256 match."))

    def do_verify(self, o):
        self._verify(self._export(o["export_id"]))

    def do_delete_export(self, o):
        from releases import ReleaseError, services

        export = self._export(o["export_id"])
        try:
            removed = services.export_delete(export)
        except ReleaseError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"Export #{o['export_id']} deleted with its {removed} file(s).")

    def do_list(self, o):
        rows = Release.objects.order_by("-created_at")
        if not rows:
            self.stdout.write("No releases.")
            return
        self.stdout.write(f"{'id':>5}  {'status':<9} {'captions':>9}  {'hash':<12}  name")
        for r in rows:
            self.stdout.write(f"{r.pk:>5}  {r.status:<9} {r.items_total:>9,}  {r.content_hash[:12]:<12}  {r.name}")

    def _counts(self, release: Release):
        from releases.views import split_counts

        for row in split_counts(release):
            self.stdout.write(f"  {row['split']:<6} {row['images']:>8,} images {row['captions']:>9,} captions")

    def do_show(self, o):
        release = self._release(o["id"])
        self.stdout.write(f"Release #{release.pk} {release.name!r}: {release.get_status_display()}")
        if release.error:
            self.stdout.write(self.style.WARNING(f"error: {release.error}"))
        self.stdout.write("config: " + json.dumps(release.config, sort_keys=True))
        if release.content_hash:
            self.stdout.write(f"content hash: {release.content_hash}")
        if release.frozen:
            self._counts(release)
        if release.report:
            self.stdout.write(f"left out: {len(release.report)} record(s)")
        for e in release.exports.order_by("format", "-created_at"):
            v = e.verification or {}
            verified = ("" if not v else "  verified" if v.get("ok") else f"  verification: {v.get('status')}"
                        + ("" if v.get("status") != "done" else f" ({v.get('matched')}/{len(v.get('files') or [])})"))
            self.stdout.write(f"export #{e.pk} {e.format:<10} {e.status:<7} {e.size:>12,} bytes  {e.sha256[:16]}"
                              f"  images {(e.options or {}).get('images', 'include')}  attempts {e.attempts}"
                              + verified + (f"  error: {e.error}" if e.error else ""))
        if release.card:
            self.stdout.write("")
            self.stdout.write(release.card)
