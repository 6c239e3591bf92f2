"""Conceptual Captions text filters (seed 002, Section 3, "Text-based Filtering").

The paper annotates alt-text with the Google Cloud Natural Language APIs (part of speech, polarity,
profanity) and applies heuristics on top; here the same heuristics run on spaCy part-of-speech tags
(parsed once per distinct text by the executor), wordfreq (the vocabulary of known words),
vaderSentiment (polarity), better_profanity's word list (profanity) and lingua (language).

One module per responsibility:

``common``          the word pattern, per-word memos, the token table of a parse, ``TextFilter``
``boilerplate``     ``boilerplate_crop`` (a transform) and ``boilerplate_drop``
``emoji``           ``emoji``: emoji and pictographs dropped or stripped (a transform)
``markup``          ``markup``: HTML tags and entities stripped (or the caption dropped; a transform)
``language``        ``language``: a vocabulary-share check, then lingua
``pos``             ``pos_presence`` and ``noun_ratio``
``words``           ``unique_word_ratio`` and ``token_repetition``
``capitalisation``  ``capitalisation``
``vocabulary``      ``unknown_tokens`` (emoji and pictographs are not words of the vocabulary)
``polarity``        ``polarity`` (VADER, thresholds calibrated on stock and news captions)
``profanity``       ``profanity``
``length``          ``caption_length``

Every filter gives every string a decision with a reason: empty text, emoji-only text, markup (the
``markup`` step strips tags and entities first; to the other filters "<script>" is just characters that
fail them), other languages and a 1 MB caption.
Each decides once per distinct text of a batch (web alt-text repeats itself). Heavy resources (the
language detector, the VADER lexicon, the profanity index, the stop words) are imported lazily and
built once per process: web processes that only list filters never load them.
"""
from __future__ import annotations

# Imported in the order the filters were registered before the split (the registry lists them so).
from .boilerplate import BoilerplateCrop, BoilerplateDrop
from .capitalisation import Capitalisation
from .common import HASHTAG_RE, LETTER_RE, MAX_LISTED, WORD_RE, TextFilter
from .emoji import EmojiFilter, pictographs, strip_pictographs
from .language import LanguageFilter
from .length import CaptionLength
from .markup import MarkupFilter, strip_markup
from .polarity import Polarity
from .pos import NounRatio, PosPresence
from .profanity import ProfanityFilter
from .vocabulary import UnknownTokens
from .words import TokenRepetition, UniqueWordRatio

__all__ = ["BoilerplateCrop", "BoilerplateDrop", "LanguageFilter", "PosPresence", "NounRatio", "UniqueWordRatio",
           "TokenRepetition", "Capitalisation", "UnknownTokens", "Polarity", "ProfanityFilter", "CaptionLength",
           "EmojiFilter", "pictographs", "strip_pictographs", "MarkupFilter", "strip_markup", "TextFilter", "WORD_RE",
           "LETTER_RE", "HASHTAG_RE", "MAX_LISTED"]
