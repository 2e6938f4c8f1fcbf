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
    """ILLEGAL_MESSAGE_KEY for a key holding a control character (the broker words the rest)."""
    for key in keys:
        if has_control(key):
            raise errors.InvalidKey("a message key cannot contain a control character")


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


def check_lean(messages: Sequence[LeanMessage]) -> None:
    """:func:`check_fields` of each of the send lane's messages, in order (this runs per message sent:
    a tag or group already checked in the request is not checked again, and a message of plain
    printable ASCII fields costs a few C-level scans)."""
    tags: set[str] = set()
    groups: set[str] = set()
    for message in messages:
        user = message.properties
        if user:
            check_user_properties(user)
        tag = message.tags
        if tag is not None and tag not in tags:
            check_tag(tag)
            tags.add(tag)
        for key in message.keys:
            if not (key.isascii() and key.isprintable()) and has_control(key):
                raise errors.InvalidKey("a message key cannot contain a control character")
        message_id = message.message_id
        if not message_id or message_id.isspace():
            check_message_id(message_id)
        group = message.message_group
        if group is not None and group not in groups:
            check_group(group)
            groups.add(group)
