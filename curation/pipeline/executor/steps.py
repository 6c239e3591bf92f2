"""The chunk-level steps applied to what is still alive: step by step, or once per distinct text (a
group of text-only steps, a text-keyed step), with the per-worker caches of decisions by text."""
from __future__ import annotations

from contextlib import contextmanager

from ...models import FilterRun
from .. import nlp
from ..base import DROP, KEEP, Decision, Filter, Item
from .decisions import decision_tail
from .planning import PipelineError


class ChunkState:
    """What the steps of one chunk accumulate: decision rows, transforms, seeds, parses."""

    def __init__(self, run: FilterRun, filters: list[Filter]):
        self.run = run
        self.filters = filters
        self.rows: list[tuple] = []  # decision rows (decisions.DECISION_COLUMNS)
        self.transforms: dict[int, list[tuple[int, str]]] = {}  # caption id -> [(step, new text)]
        self.seeds: dict[int, list] = {}
        self.parsed_needs: frozenset[str] = frozenset()
        self.docs: dict[str, object] = {}  # text -> its parse with ``parsed_needs``
        snapshot = run.snapshot
        # The spaCy needs of the caption steps from each position on (parse once with all of them).
        self.remaining_needs = [frozenset().union(*(
            f.needs for s, f in zip(snapshot[position:], filters[position:])
            if s["target"] != "image" and not s["run_level"])) for position in range(len(snapshot))]
        # Curators' overrides to honour ({step: {(image, caption or None): outcome}}), when a finished run's
        # chunk steps run again over some images (``reconcile``); None in a run's own chunks.
        self.overrides: dict[int, dict[tuple, str]] | None = None
        # Texts people set at transform steps ({step: {(image, caption): text}}), which go on in place of
        # the filters' when a finished run's chunk steps run again (``reconcile``); None in a run's own chunks.
        self.texts: dict[int, dict[tuple, str]] | None = None

    def ensure_docs(self, items: list[Item], flt: Filter, position: int) -> None:
        """Give each item the parse of its current text with (at least) the filter's components."""
        if not flt.needs:
            return
        if not flt.needs <= self.parsed_needs:
            self.parsed_needs = self.parsed_needs | self.remaining_needs[position] | flt.needs
            self.docs = {}
        docs = self.docs
        missing = [it.text for it in items if it.text not in docs]
        if missing:
            docs.update(nlp.parse_unique(missing, self.parsed_needs))
        for it in items:
            it.doc = docs[it.text]


def memoisable(step: dict, flt: Filter) -> bool:
    """A caption step decided per distinct text (see ``_apply_group``)."""
    return step["target"] != "image" and not step["run_level"] and (flt.text_only or flt.text_determined)


def run_steps(state: ChunkState, steps, alive_images: dict[int, Item], alive_captions: list[Item],
               memo: bool = True):
    """Run ``steps`` (chunk-level, in order) on what is still alive; returns what survives them.
    Consecutive steps decided by the text alone run as one group, once per distinct text."""
    index = 0
    memo = memo and not state.overrides and not state.texts  # what goes on is not the filters' alone: step by step
    while index < len(steps):
        if memo and memoisable(steps[index][1], steps[index][2]):
            end = index
            while end < len(steps) and memoisable(steps[end][1], steps[end][2]):
                end += 1
            if alive_captions:
                alive_captions = _apply_group(state, steps[index:end], alive_captions)
            index = end
            continue
        alive_images, alive_captions = _run_step(state, steps[index], alive_images, alive_captions)
        index += 1
    return alive_images, alive_captions


def _run_step(state: ChunkState, entry, alive_images: dict[int, Item], alive_captions: list[Item]):
    """One step on what is still alive; returns what survives it."""
    position, step, flt = entry
    if step["target"] == "image":
        targets = list(alive_images.values())
    else:
        targets = alive_captions
    if not targets:
        return alive_images, alive_captions
    found = state.overrides.get(position) if state.overrides else None
    set_texts = state.texts.get(position) if state.texts and step["target"] != "image" else None
    texts_before = [item.text for item in targets] if (found or set_texts) and step["transform"] else None
    with _step_errors(position, step):
        if flt.text_keyed and step["target"] != "image":
            survivors = _apply_text_keyed(state, position, step, flt, targets)
        elif flt.text_only and step["target"] != "image":
            survivors = _apply_text_only(state, position, step, flt, targets)
        else:
            survivors, dropped_images = _apply_each(state, position, step, flt, targets)
    if set_texts and texts_before is not None:
        _set_texts(state, position, targets, texts_before, set_texts)
    if found and step["target"] == "image":
        for item in targets:
            outcome = found.get((item.image_id, None))
            if outcome == DROP:
                dropped_images.add(item.image_id)
            elif outcome:
                dropped_images.discard(item.image_id)
    elif found:
        alive = {id(item) for item in survivors}
        survivors = [item for item in targets
                     if found.get((item.image_id, item.caption_id), KEEP if id(item) in alive else DROP) != DROP]
        if texts_before is not None:  # a transform's drop kept by a curator: its new text is saved too
            for item, before in zip(targets, texts_before):
                if (id(item) not in alive and found.get((item.image_id, item.caption_id), DROP) != DROP
                        and item.text != before and item.caption_id is not None
                        and not (set_texts and (item.image_id, item.caption_id) in set_texts)):
                    state.transforms.setdefault(item.caption_id, []).append((position, item.text))
    if step["target"] == "image":
        if dropped_images:
            for image_id in dropped_images:
                alive_images.pop(image_id, None)
            alive_captions = [it for it in alive_captions if it.image_id not in dropped_images]
    else:
        alive_captions = survivors
    return alive_images, alive_captions


def _set_texts(state: ChunkState, position: int, targets: list[Item], texts_before: list[str],
               set_texts: dict[tuple, str]) -> None:
    """A text a person set at this transform step (a verified rewrite's fix) goes on in place of the
    filter's, and is the one the run's transformed caption of this step holds."""
    for item, before in zip(targets, texts_before):
        text = set_texts.get((item.image_id, item.caption_id))
        if not text or item.caption_id is None:
            continue
        item.text = text
        changes = [change for change in state.transforms.get(item.caption_id, ()) if change[0] != position]
        if text != before:
            changes.append((position, text))
        state.transforms[item.caption_id] = changes


@contextmanager
def _step_errors(position: int, step: dict):
    """One filter's bug must not lose the chunk: it fails with a reason that names the step."""
    try:
        yield
    except PipelineError:
        raise
    except Exception as exc:
        raise PipelineError(f"step {position + 1} ({step['filter']}) failed: {type(exc).__name__}: {exc}") from exc


# A group of consecutive steps that each decide by the text alone is decided once per distinct text,
# for every caption that still has its raw text (nothing noted on it yet): the whole group's outcome
# for that text (the decision values of each step it reached, whether it survived, its new text, what
# transforms noted) is one entry, computed once per run and worker process, and each caption with that
# text costs one dictionary lookup and one tuple per decision. Identical alt-texts are common on the web, and
# a run's distinct texts come back in later chunks. Captions that earlier steps changed go step by step.
#
# An entry: (the decision rows' values after the item's own columns, one tuple per step reached;
# survived; final text; [(step, new text)] of transforms that kept it; removed spans; entity types;
# seeds or None; plain: no text change, spans, types or seeds to pass on). Tuples of strings and
# numbers, which the garbage collector stops tracking.

def _apply_group(state: ChunkState, group, targets: list[Item]) -> list[Item]:  # noqa: PLR0915
    first = group[0][0]
    run_id = state.run.pk
    start_texts = [item.text for item in targets]
    found: dict[str, tuple | None] = {}
    representatives: list[Item] = []
    others: list[Item] = []
    for item in targets:
        text = item.text
        if item.removed_spans or item.entity_types or text != item.raw_text:
            others.append(item)
            continue
        if text in found:
            continue
        entry = _cache_get((run_id, first, text, "group")) if len(text) <= CACHE_MAX_CHARS else None
        found[text] = entry
        if entry is None:
            representatives.append(Item(caption_id=None, image_id=0, raw_text=text, text=text))
    if representatives:
        for rep, entry in zip(representatives, _group_entries(state, group, representatives)):
            found[rep.raw_text] = entry
            if len(rep.raw_text) <= CACHE_MAX_CHARS:
                _cache_put((run_id, first, rep.raw_text, "group"), entry)
    others_alive: set[int] = set()
    if others:
        stepwise = {id(it) for it in others}
        _, alive = run_steps(state, group, {}, others, memo=False)
        others_alive = {id(it) for it in alive}
    rows, transforms, seeds = state.rows, state.transforms, state.seeds
    survivors = []
    for item in targets:
        if others and id(item) in stepwise:
            if id(item) in others_alive:
                survivors.append(item)
            continue
        entry = found[item.text]
        head = (run_id, item.image_id, item.caption_id)
        rows.extend([head + tail for tail in entry[0]])
        if not entry[7]:
            _, alive, text, changed, spans, types, found_seeds, _ = entry
            if changed:
                transforms.setdefault(item.caption_id, []).extend(changed)
            if found_seeds:
                seeds[item.caption_id] = found_seeds
            if not alive:
                continue
            item.text = text
            if spans:
                item.removed_spans = list(spans)
            if types:
                item.entity_types = list(types)
        elif not entry[1]:
            continue
        survivors.append(item)
    last = group[-1][0]
    if last + 1 >= len(state.remaining_needs) or not state.remaining_needs[last + 1]:
        # No later step parses: this batch's parses are done with. Holding a chunk's worth of them (each
        # Doc with its arrays) grows the process's heap as the chunk goes on. Only this batch's: a later
        # sub-batch of the same segment may still need parses an earlier segment made for it.
        docs = state.docs
        for text in start_texts:
            docs.pop(text, None)
        for rep in representatives:
            docs.pop(found[rep.raw_text][2], None)  # the text it was parsed with (after the group's crop)
    return survivors


def _group_entries(state: ChunkState, group, representatives: list[Item]) -> list[tuple]:
    """Run the group's steps on one item per distinct text; the entry of each (see above)."""
    count = len(representatives)
    tails: list[list[tuple]] = [[] for _ in range(count)]
    changed: list[list] = [[] for _ in range(count)]
    found_seeds: list = [None] * count
    alive = list(range(count))
    for position, step, flt in group:
        if not alive:
            break
        items = [representatives[k] for k in alive]
        with _step_errors(position, step):
            state.ensure_docs(items, flt, position)
            results = flt.apply_distinct(items) if hasattr(flt, "apply_distinct") else flt.apply(items)
        if len(results) != len(items):
            raise PipelineError(f"step {position + 1} ({step['filter']}) returned {len(results)} decisions for "
                                f"{len(items)} items")
        is_seeds = step["filter"] == "caption_seeds"
        still = []
        if not step["transform"] and not is_seeds:  # most steps: a decision is its row, nothing else
            if all(decision.text is None and "entity_types" not in decision.details for decision in results):
                for k, decision in zip(alive, results):
                    tails[k].append(decision_tail(position, step, decision, "", ()))
                    if decision.outcome != DROP:
                        still.append(k)
                alive = still
                continue
        for k, item, decision in zip(alive, items, results):
            before = item.text
            details = decision.details
            if details.get("entity_types") is not None:
                item.entity_types = list(details["entity_types"])
            if decision.text is not None and decision.text != before:
                item.text = decision.text
                if decision.outcome != DROP:
                    changed[k].append((position, decision.text))
            if is_seeds and details.get("seeds"):
                found_seeds[k] = details["seeds"]
            tails[k].append(decision_tail(position, step, decision, before, item.removed_spans))
            if decision.outcome != DROP:
                still.append(k)
        alive = still
    survived = set(alive)
    entries = []
    for k, rep in enumerate(representatives):
        rep.doc = None
        spans, types = tuple(rep.removed_spans), tuple(rep.entity_types)
        plain = rep.text == rep.raw_text and not changed[k] and not spans and not types and not found_seeds[k]
        entries.append((tuple(tails[k]), k in survived, rep.text, tuple(changed[k]), spans, types, found_seeds[k],
                        plain))
    return entries


def _apply_each(state: ChunkState, position: int, step: dict, flt: Filter, targets: list[Item]):
    """A step whose decisions are per item: ``apply`` on every target."""
    results = _apply_checked(state, position, step, flt, targets)
    run_id, rows, transforms = state.run.pk, state.rows, state.transforms
    is_seeds = step["filter"] == "caption_seeds"
    survivors, dropped_images = [], set()
    for item, decision in zip(targets, results):
        before = item.text
        if decision.text is not None and decision.text != item.text:
            item.text = decision.text
            if item.caption_id is not None and decision.outcome != DROP:
                transforms.setdefault(item.caption_id, []).append((position, decision.text))
        if is_seeds and decision.details.get("seeds") and item.caption_id:
            state.seeds[item.caption_id] = decision.details["seeds"]
        if decision.details.get("entity_types") is not None:
            item.entity_types = list(decision.details["entity_types"])
        rows.append((run_id, item.image_id, item.caption_id,
                     *decision_tail(position, step, decision, before, item.removed_spans)))
        if decision.outcome == DROP:
            if item.caption_id is None:
                dropped_images.add(item.image_id)
        else:
            survivors.append(item)
    return survivors, dropped_images


# Decisions of text-only steps by (run, step, text), and of groups of them by (run, first step, text,
# "group"), per worker process: a text seen in an earlier
# chunk of the same run gets the same decision without parsing it or asking the filter again.
# Two generations of at most DECISION_CACHE_SIZE / 2 entries each: a full young generation becomes
# the old one (entries found there move back to the young one), the old one is dropped.
DECISION_CACHE_SIZE = 200_000
CACHE_MAX_CHARS = 2000  # longer texts are decided every time (rare; they would bloat the cache)
_DECISION_CACHE: list[dict] = [{}, {}]  # [young, old]: (run, step, text) -> entry


# An entry: (outcome, new text of a transform or None, the decision's values after the item's own
# columns, the removed spans and entity types the filter noted on the item, seeds or None, and whether
# it is plain: none of those to pass on). Plain tuples: the garbage collector stops tracking them.


def clear_decision_cache() -> None:
    """Forget every decision this worker process keeps by text (tests start from a cold cache)."""
    _DECISION_CACHE[:] = [{}, {}]


def _cache_get(key):
    """The entry for ``key``, or None; an entry found in the old generation moves to the young one."""
    young, old = _DECISION_CACHE
    found = young.get(key)
    if found is None:
        found = old.get(key)
        if found is not None:
            _cache_put(key, found)
    return found


def _cache_put(key, value) -> None:
    young = _DECISION_CACHE[0]
    if len(young) >= DECISION_CACHE_SIZE // 2:
        _DECISION_CACHE[1] = young
        _DECISION_CACHE[0] = young = {}
    young[key] = value


def _undecided(run_id: int, position: int, targets: list[Item], tag: tuple, stand_in):
    """{text: its cached entry, or None} for the targets' distinct texts, and a representative (``stand_in(item)``)
    of each text not decided before at this step in this run and worker."""
    decided: dict[str, tuple | None] = {}
    representatives: list[Item] = []
    for item in targets:
        text = item.text
        if text in decided:
            continue
        found = _cache_get((run_id, position, text, *tag)) if len(text) <= CACHE_MAX_CHARS else None
        decided[text] = found
        if found is None:
            representatives.append(stand_in(item))
    return decided, representatives


def _apply_checked(state: ChunkState, position: int, step: dict, flt: Filter, items: list[Item]) -> list[Decision]:
    """``flt.apply`` on items given the parses they need; one decision per item, or a PipelineError."""
    if step["target"] != "image":
        state.ensure_docs([it for it in items if flt.wants_doc(it)], flt, position)
    results = flt.apply(items)
    if len(results) != len(items):
        raise PipelineError(f"step {position + 1} ({step['filter']}) returned {len(results)} decisions for "
                            f"{len(items)} items")
    return results


def _apply_text_only(state: ChunkState, position: int, step: dict, flt: Filter, targets: list[Item]) -> list[Item]:
    """``flt.apply`` once per distinct text not decided before (identical alt-texts are common on the
    web); what it noted on an item is shared too. Returns the survivors."""
    run_id = state.run.pk
    decided, representatives = _undecided(run_id, position, targets, (), lambda item: item)
    if representatives:
        results = _apply_checked(state, position, step, flt, representatives)
        is_seeds = step["filter"] == "caption_seeds"
        for rep, decision in zip(representatives, results):
            details = decision.details
            if details.get("entity_types") is not None:
                rep.entity_types = list(details["entity_types"])
            spans, types = tuple(rep.removed_spans), tuple(rep.entity_types)
            seeds = details.get("seeds") if is_seeds else None
            entry = (decision.outcome, decision.text,
                     decision_tail(position, step, decision, rep.text, rep.removed_spans), spans, types, seeds,
                     decision.text is None and not spans and not types and not seeds)
            text = rep.text
            decided[text] = entry
            if len(text) <= CACHE_MAX_CHARS:
                _cache_put((run_id, position, text), entry)
    rows = state.rows
    survivors = []
    for item in targets:
        before = item.text
        entry = decided[before]
        rows.append((run_id, item.image_id, item.caption_id) + entry[2])
        if not (entry[6] and not item.removed_spans and not item.entity_types):  # else nothing more to do
            outcome, new_text, _, spans, types, seeds, _ = entry
            if spans or item.removed_spans:
                item.removed_spans = list(spans)
            if types or item.entity_types:
                item.entity_types = list(types)
            if new_text is not None and new_text != before:
                item.text = new_text
                if outcome != DROP:
                    state.transforms.setdefault(item.caption_id, []).append((position, new_text))
            if seeds and item.caption_id:
                state.seeds[item.caption_id] = seeds
        if entry[0] != DROP:
            survivors.append(item)
    return survivors


def _apply_text_keyed(state: ChunkState, position: int, step: dict, flt: Filter, targets: list[Item]) -> list[Item]:
    """A ``text_keyed`` step: ``flt.apply`` once per distinct working text not decided before in this run and
    worker, on a stand-in whose raw text is that text (so its removed spans are relative to it); each item
    gets the decision, the entity types, and the spans placed where its text sits in its raw text. Returns
    the survivors."""
    run_id = state.run.pk
    decided, representatives = _undecided(run_id, position, targets, ("keyed",), lambda item: Item(
        caption_id=None, image_id=item.image_id, raw_text=item.text, text=item.text, language=item.language))
    if representatives:
        initial = [rep.removed_spans for rep in representatives]  # empty: a filter that sets spans replaces it
        results = _apply_checked(state, position, step, flt, representatives)
        for rep, decision, before_spans in zip(representatives, results, initial):
            rep.doc = None
            types = decision.details.get("entity_types")
            # None: the filter left the spans alone (e.g. a text too long to rewrite), and so do the items.
            spans = None if rep.removed_spans is before_spans and not before_spans else tuple(rep.removed_spans)
            entry = (decision, spans, None if types is None else tuple(types))
            decided[rep.raw_text] = entry
            if len(rep.raw_text) <= CACHE_MAX_CHARS:
                _cache_put((run_id, position, rep.raw_text, "keyed"), entry)
    rows = state.rows
    survivors = []
    for item in targets:
        before = item.text
        decision, spans, types = decided[before]
        offset = item.raw_text.find(before) if before and spans is not None else -1
        if offset >= 0:
            item.removed_spans = [(s + offset, e + offset) for s, e in spans]
        if types is not None:
            item.entity_types = list(types)
        if decision.text is not None and decision.text != before:
            item.text = decision.text
            if decision.outcome != DROP:
                state.transforms.setdefault(item.caption_id, []).append((position, decision.text))
        rows.append((run_id, item.image_id, item.caption_id,
                     *decision_tail(position, step, decision, before, item.removed_spans)))
        if decision.outcome != DROP:
            survivors.append(item)
    return survivors
