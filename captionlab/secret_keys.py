"""Which SECRET_KEY values the production profile refuses, and why (read by config/settings.py)."""

# Keys people leave from tutorials and templates; a production key is at least 50 random characters.
WEAK_SECRET_KEYS = {"changeme", "change-me", "secret", "secret-key", "secretkey", "password", "dev", "development",
                    "insecure", "django", "captionlab"}


def weak_key_reason(key: str) -> str | None:
    """Why ``key`` is too weak for production, or None."""
    if key.strip().lower() in WEAK_SECRET_KEYS:
        return "a well-known placeholder"
    if key.startswith("django-insecure-"):
        return "the development key startproject writes (django-insecure-...)"
    if len(key) < 50 or len(set(key)) < 5:
        return "shorter than 50 characters or made of too few different characters"
    return None
