"""The checks the Apache proxy makes of a v2 message's tag, keys, message group and user properties
before it reaches the broker (``SendMessageActivity`` / ``GrpcValidator``), with the proxy's codes.

They belong to the gRPC door only: a 4.x client's message over remoting reaches an Apache broker
without them, and the broker's own checks (``common.message.check_content``) apply to both doors.
Pure functions; each raises the first failure in message order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from txmq.common import errors, limits
from txmq.common.message import LeanMessage

# Java's Character.isISOControl: U+0000..U+001F and U+007F..U+009F
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def has_control(text: str) -> bool:
    # printable ASCII (the common case) is answered by two C-level scans, without the regex
    return not (text.isascii() and text.isprintable()) and _CONTROL.search(text) is not None


def check_group(group: str) -> None:
    """ILLEGAL_MESSAGE_GROUP for a group of whitespace only, of 64 UTF-8 bytes or more, or holding a
    control character (an empty group means none)."""
    if not group:
        return
    if group.isspace():
        raise errors.InvalidMessageGroup("the message group cannot be whitespace only")
    size = len(group.encode())
    if size >= limits.grpc_message_group_bytes_max:
        raise errors.InvalidMessageGroup(
            f"the message group is {size} bytes; it must be shorter than "
            f"{limits.grpc_message_group_bytes_max} bytes"
        )
    if has_control(group):
        raise errors.InvalidMessageGroup("the message group cannot contain a control character")


def check_tag(tag: str) -> None:
    """ILLEGAL_MESSAGE_TAG for a tag of whitespace only, with a '|' or a control character."""
    if not tag:
        return
    if tag.isspace():
        raise errors.InvalidTag("the tag cannot be whitespace only")
    if "|" in tag:
        raise errors.InvalidTag(f"tag {tag[:64]!r} contains '|' (it separates tags in a filter)")
    if has_control(tag):
        raise errors.InvalidTag("the tag cannot contain a control character")


def check_keys(keys: Iterable[str]) -> None:
    """ILLEGAL_MESSAGE_KEY for a key of whitespace only or holding a control character (the broker
    words the rest)."""
    for key in keys:
        if key.isspace():
            raise errors.InvalidKey("a message key cannot be whitespace only")
        if has_control(key):
            raise errors.InvalidKey("a message key cannot contain a control character")


def split_keys(keys: Sequence[str]) -> tuple[str, ...] | None:
    """The keys as the Apache proxy stores them, or None when they need no change: it joins a message's
    keys with a space into its KEYS property and the broker indexes each space-separated part, so a
    key ``"a b"`` becomes the two keys ``a`` and ``b`` (queried and delivered as two); an empty key
    adds nothing."""
    for key in keys:
        if not key or " " in key:
            return tuple(part for whole in keys for part in whole.split(" ") if part)
    return None


def check_user_properties(user: Mapping[str, str]) -> None:
    """ILLEGAL_MESSAGE_PROPERTY_KEY for a user property whose name or value holds a control character."""
    for name, value in user.items():
        if has_control(name):
            raise errors.InvalidProperty("the name of a user property cannot contain a control character")
        if has_control(value):
            raise errors.InvalidProperty(f"the value of user property {name!r} contains a control character")


def check_message_id(message_id: str | None) -> None:
    """ILLEGAL_MESSAGE_ID for a message without a client message id (every v2 client sets one, and the
    send result must echo it)."""
    if not message_id or message_id.isspace():
        raise errors.InvalidMessageId("the message id cannot be empty")


def check_fields(tag: str, keys: Sequence[str], group: str, user: Mapping[str, str], message_id: str) -> None:
    """Every check above, in the proxy's order (properties, tag, keys, message id, group)."""
    if user:
        check_user_properties(user)
    check_tag(tag)
    if keys:
        check_keys(keys)
    check_message_id(message_id)
    check_group(group)


def check_lean(messages: list[LeanMessage]) -> list[LeanMessage]:
    """:func:`check_fields` of each of the send lane's messages, in order; returns them with their keys
    as the proxy stores them (:func:`split_keys`; ``messages`` itself when no key changes).

    This runs per message sent, so the common request is judged in one compiled pass (each distinct
    tag and group checked once, the rest by a few tests per message, :func:`_common`); only a request
    that may fail (or has a key to split) is walked message by message, which raises the first failure
    in message order."""
    if _common(messages):
        return messages
    result = messages
    for i, message in enumerate(messages):
        keys = message.keys
        tag, group, message_id = message.tags or "", message.message_group or "", message.message_id or ""
        check_fields(tag, keys, group, message.properties, message_id)
        if keys and (" " in "".join(keys) or not all(keys)):  # split_keys's test, inline (per message)
            if result is messages:
                result = list(messages)
            result[i] = message._replace(keys=split_keys(keys) or keys)
    return result


def _common(messages: list[LeanMessage]) -> bool:
    """True when no message can fail and no key needs splitting (False: maybe one does, look one by
    one): no user property, a message id not empty nor whitespace only, keys not empty, without a space
    and printable ASCII, and every distinct tag and group passing its check.

    Fields by index (body 0, properties 1, tags 2, keys 3, message id 4, group 5): compiled, a tuple
    index is a C array read where a NamedTuple attribute is a generic attribute lookup."""
    checked_tag = ""
    checked_group = ""
    for message in messages:
        if message[1]:
            return False
        message_id = message[4]
        if not message_id or message_id.isspace():
            return False
        keys = message[3]
        for key in keys:
            if not key or " " in key or not (key.isascii() and key.isprintable()):
                return False
        tag = message[2]
        if tag is not None and tag != checked_tag:
            try:
                check_tag(tag)
            except errors.InvalidArgument:
                return False
            checked_tag = tag
        group = message[5]
        if group is not None and group != checked_group:
            try:
                check_group(group)
            except errors.InvalidArgument:
                return False
            checked_group = group
    return True
