"""Tag filters (``*`` or ``a || b``) and the tag hash stored in ConsumeQueue units.

The tag hash is Java's ``String.hashCode`` of the tag (what RocketMQ stores), so a queue unit can be
filtered without reading the CommitLog; the tag itself is re-checked on the record because hashes collide.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from txmq.common import errors


@functools.lru_cache(maxsize=4096)  # a topic's producers repeat a handful of tags
def tag_hash(tag: str | None) -> int:
    """Java String.hashCode over UTF-16 code units, as a signed 32-bit value (cached: a topic's
    messages carry few distinct tags, and this loop runs for every message sent)."""
    if not tag:
        return 0
    return _tag_hash(tag)


@functools.lru_cache(maxsize=4096)
def _tag_hash(tag: str) -> int:
    value = 0
    data = tag.encode("utf-16-be")
    for i in range(0, len(data), 2):
        value = (31 * value + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


@dataclass(frozen=True, slots=True)
class TagFilter:
    """A parsed tag expression. ``tags`` empty means every message matches."""

    expression: str
    tags: frozenset[str]
    hashes: frozenset[int]

    @property
    def match_all(self) -> bool:
        return not self.tags

    def matches_hash(self, tags_code: int) -> bool:
        return self.match_all or tags_code in self.hashes

    def matches(self, tag: str | None) -> bool:
        return self.match_all or (tag is not None and tag in self.tags)


MATCH_ALL = TagFilter("*", frozenset(), frozenset())


def parse_tag_filter(expression: str | None) -> TagFilter:
    text = (expression or "").strip()
    if text in ("", "*"):
        return MATCH_ALL
    # as RocketMQ's FilterAPI.buildSubscriptionData: split on '||', trim, skip empty alternatives
    # ('A ||' means A). Stricter where Apache's answer surprises: an expression of nothing but bars
    # and blanks (Apache: an error for '||', a filter matching no message for ' || ') and '*' as one
    # alternative (Apache: a literal tag '*', not "everything") are refused.
    tags = frozenset(tag for part in text.split("||") if (tag := part.strip()))
    if not tags or "*" in tags:
        raise errors.InvalidFilter(f"invalid tag expression {expression!r}: use '*' or 'a || b'")
    return TagFilter(text, tags, frozenset(tag_hash(t) for t in tags))
