"""A generator of photo-critique comment corpora in the style of a photography site (seed 000's AVA):
many short, safe comments ("Great shot!", "Photo quality: awesome. Originality: great.") and fewer
critiques that name what is in the picture and how it was taken. Same seed, same corpus; corpora of any
size with different seeds have the same distribution.
"""
import random

SUBJECTS = [
    "the old lighthouse", "the red kayak", "the grey heron", "the rusty tractor", "the lone cyclist",
    "the fishing boat", "the stone bridge", "the sleeping cat", "the street musician", "the wooden pier",
    "the snowy peak", "the market stall", "the steam train", "the barn owl", "the cathedral tower",
    "the little girl", "the bride", "the dancer", "the fox", "the sunflower field", "the tram",
    "the waterfall", "the abandoned factory", "the glass building", "the horse", "the surfer",
]
ASPECTS = [
    "depth of field", "leading lines", "white balance", "exposure on the sky", "focus on the eyes",
    "colour palette", "shutter speed", "framing", "rule of thirds", "contrast in the shadows",
    "texture of the stone", "reflection in the water", "backlight", "tonal range", "perspective",
    "negative space", "foreground interest", "motion blur", "grain", "vignette", "highlights",
]
JUDGEMENTS = [
    "works really well", "is a bit too strong", "feels slightly off", "is handled nicely", "draws the eye",
    "could be softer", "adds a lot of mood", "is distracting", "gives a sense of depth", "is spot on",
]
SUGGESTIONS = [
    "I would crop a little tighter on the left", "a lower angle might have helped",
    "try a longer exposure next time", "the horizon looks tilted to me", "the sky is blown out in the corner",
    "a touch more sharpening would help", "the shadows are blocked up near the bottom",
    "maybe desaturate the background", "the border is too heavy for this image", "the noise is visible in the sky",
]
GENERIC = [
    "Great shot!", "Nice shot, well done.", "Love it!", "Very nice.", "Great colors!", "Nice colors, nice shot.",
    "Photo quality: awesome. Originality: great.", "Wow, beautiful!", "Great job, I like it a lot.",
    "Nice composition.", "Good luck!", "Lovely image, great work.", "Beautiful photo.", "Well done, nice one.",
    "I like this one.", "Very nice shot, great colors.", "Cool!", "Amazing shot!", "Nice work, great job!",
    "Love the colors here.", "Great composition, nice shot.", "Nice image, good work.",
]


def critique(rng: random.Random) -> str:
    subject, aspect = rng.choice(SUBJECTS), rng.choice(ASPECTS)
    shape = rng.randrange(4)
    if shape == 0:
        return f"The {aspect} on {subject} {rng.choice(JUDGEMENTS)}, but {rng.choice(SUGGESTIONS)}."
    if shape == 1:
        return f"I like how {subject} stands out. The {aspect} {rng.choice(JUDGEMENTS)}."
    if shape == 2:
        return f"{subject.capitalize()} is nicely placed, and the {aspect} {rng.choice(JUDGEMENTS)}; {rng.choice(SUGGESTIONS)}."
    other = rng.choice(ASPECTS)
    return f"Good {aspect} and {other} on {subject}. {rng.choice(SUGGESTIONS).capitalize()}."


def corpus(size: int, seed: int, informative_share: float = 0.4) -> list[str]:
    """``size`` comments, about ``informative_share`` of them critiques, the rest safe comments."""
    rng = random.Random(seed)
    return [critique(rng) if rng.random() < informative_share else rng.choice(GENERIC) for _ in range(size)]


# Probes written apart from the generator, in the same style: critiques and safe comments.
INFORMATIVE_PROBES = [
    "The depth of field on the grey heron is spot on, but the horizon looks tilted to me.",
    "I like how the steam train stands out. The motion blur adds a lot of mood.",
    "The reflection in the water under the stone bridge gives a sense of depth.",
    "Good backlight and framing on the dancer. Try a longer exposure next time.",
    "The white balance on the snowy peak feels slightly off; maybe desaturate the background.",
    "The fox is nicely placed, and the negative space draws the eye.",
    "The tonal range on the abandoned factory is handled nicely, but the shadows are blocked up.",
    "Leading lines of the wooden pier pull the eye to the fishing boat.",
    "The colour palette of the sunflower field works really well with the blue sky.",
    "I like how the street musician stands out. The focus on the eyes is spot on.",
    "The exposure on the sky is a bit too strong behind the cathedral tower.",
    "Good texture of the stone and perspective on the old lighthouse. A lower angle might have helped.",
    "The vignette on the sleeping cat is distracting, and the grain is visible in the corner.",
    "The surfer is nicely placed, and the shutter speed freezes the spray.",
    "The contrast in the shadows on the rusty tractor adds a lot of mood.",
    "Foreground interest from the market stall gives a sense of depth to the street.",
    "The highlights on the glass building are blown out; a touch more sharpening would help the tram.",
    "I like how the barn owl stands out against the dark barn. The backlight works really well.",
    "The framing of the red kayak and the rule of thirds are handled nicely.",
    "Good perspective on the horse. The border is too heavy for this image.",
]
GENERIC_PROBES = [
    "Great shot!", "Photo quality: awesome. Originality: great.", "Love it, well done!", "Very nice shot.",
    "Wow, great job!", "Nice one, I like it.", "Beautiful, great colors.", "Nice work!", "Great image, love it.",
    "Nice shot!", "Amazing colors!", "Lovely, well done.", "I love this.", "Nice composition!", "Great photo!",
    "Very beautiful photo.", "Awesome, great shot!", "Nice colors here.", "Good work, I like it a lot.",
    "Nice colors.",
]
