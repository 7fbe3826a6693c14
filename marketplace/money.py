"""Money as the site shows it: the market stores cents."""

__all__ = ["format_cents"]


def format_cents(cents: int) -> str:
    """12345 -> "123.45" (money is stored in cents)."""
    return f"{cents // 100:,}.{cents % 100:02d}"
