"""A split's counts in data/stats.json as every summary shows them (binarize's line and table, `mt
info`, the report), so that they add up: pairs read = pairs kept + the pairs dropped for each
reason. Rows written are told apart, since a weight (*2) or subword segmentations write a kept pair
more than once, and "kept" in stats.json counts rows (what the arrays hold).
"""

from __future__ import annotations

BASIC_REASONS = ("empty", "too_long")  # every split counts them: shown even at 0


def segmentations(split_stats: dict) -> int:
    """How many segmentations of each pair binarize wrote (tokenizer.train_segmentations; 1 = the best)."""
    return split_stats.get("segmentations", {}).get("copies", 1)


def pairs_kept(split_stats: dict) -> int:
    """Pairs read that were kept. Stats from before "pairs_kept" count rows only; weights aside,
    rows over segmentations are the pairs."""
    return split_stats["pairs_kept"] if "pairs_kept" in split_stats else weighted_rows(split_stats)


def weighted_rows(split_stats: dict) -> int:
    """Rows written per segmentation: the kept pairs as often as their weights say."""
    return split_stats["kept"] // segmentations(split_stats)


def reason_name(reason: str) -> str:
    return reason.replace("_", " ")


def shown_drops(split_stats: dict) -> dict[str, int]:
    """The drop counts worth a column or a mention: empty and too long always, others unless 0
    (which leaves the sum as it is)."""
    return {reason: count for reason, count in split_stats["dropped"].items() if count or reason in BASIC_REASONS}


def summary(split_stats: dict) -> str:
    """'kept 200 of 400 pairs (empty 0, too long 0, subsampled 103, duplicate 97)', and the rows
    written when weights or segmentations repeat pairs: '…; 400×2 rows written (weights, segmentations)'."""
    drops = ", ".join(f"{reason_name(reason)} {count:,}" for reason, count in shown_drops(split_stats).items())
    kept = pairs_kept(split_stats)
    text = f"kept {kept:,} of {split_stats['pairs_in']:,} pairs ({drops})"
    why = [
        why
        for why, repeats in (
            ("data.train weights", weighted_rows(split_stats) != kept),
            ("segmentations", segmentations(split_stats) > 1),
        )
        if repeats
    ]
    if why:
        text += f"; {rows_text(split_stats)} rows written ({', '.join(why)})"
    return text


def rows_text(split_stats: dict) -> str:
    """Rows written: '800', or '207×3' with 3 segmentations of each."""
    copies = segmentations(split_stats)
    return f"{weighted_rows(split_stats):,}" + (f"×{copies}" if copies > 1 else "")
