"""The topic registry: queues per topic, accepted message type, permissions; persisted, auto-creating."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass

from txmq.broker.persist import MetaFiles
from txmq.common import errors, limits, names
from txmq.common.message import MessageType, TopicMessageType


class Perm(enum.IntFlag):
    """RocketMQ PermName bits."""

    WRITE = 2
    READ = 4
    READ_WRITE = 6


_READ = int(Perm.READ)
_WRITE = int(Perm.WRITE)


@dataclass(frozen=True, slots=True)
class TopicConfig:
    name: str
    queues: int = limits.queues_per_topic_default
    message_type: TopicMessageType = TopicMessageType.MIXED
    perm: int = Perm.READ_WRITE
    system: bool = False

    # Checked on every request: plain int arithmetic, not IntFlag's Python-level ``__and__``.
    @property
    def readable(self) -> bool:
        return bool(int(self.perm) & _READ)

    @property
    def writable(self) -> bool:
        return bool(int(self.perm) & _WRITE)

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["message_type"] = self.message_type.name
        data["perm"] = int(self.perm)
        return data

    @staticmethod
    def from_json(data: dict[str, object]) -> TopicConfig:
        return TopicConfig(
            name=str(data["name"]),
            queues=int(str(data["queues"])),
            message_type=TopicMessageType[str(data["message_type"])],
            perm=int(str(data["perm"])),
            system=bool(data.get("system", False)),
        )


_FILE = "topics.json"


class TopicRegistry:
    def __init__(self, meta: MetaFiles, *, default_queues: int, auto_create: bool) -> None:
        self._meta = meta
        self._default_queues = default_queues
        self._auto_create = auto_create
        self._topics: dict[str, TopicConfig] = {}
        loaded = meta.load_json(_FILE) or []
        for item in loaded:
            config = TopicConfig.from_json(item)
            self._topics[config.name] = config

    def _save(self) -> None:
        self._meta.save_json(
            _FILE, [t.to_json() for t in sorted(self._topics.values(), key=lambda t: t.name)]
        )

    def get(self, name: str) -> TopicConfig | None:
        return self._topics.get(name)

    def configs(self) -> dict[str, TopicConfig]:
        """The live map of topic configs by name (never replaced, only changed in place here; callers
        only read it): for a compiled caller's lookup per message, a dict read instead of an
        interpreted :meth:`get`."""
        return self._topics

    def list(self, *, include_system: bool = False) -> list[TopicConfig]:
        return sorted(
            (t for t in self._topics.values() if include_system or not t.system), key=lambda t: t.name
        )

    def create(
        self,
        name: str,
        *,
        queues: int | None = None,
        message_type: TopicMessageType = TopicMessageType.MIXED,
        perm: int = Perm.READ_WRITE,
        system: bool = False,
    ) -> TopicConfig:
        """Create or update a topic. Queues can grow but never shrink (offsets would be orphaned)."""
        names.validate_topic(name, allow_system=system or names.is_retry_or_dlq(name))
        count = self._default_queues if queues is None else queues
        if count < 1 or (count > limits.queues_per_topic_max and not system):
            raise errors.InvalidArgument(f"queues must be 1..{limits.queues_per_topic_max}, got {count}")
        existing = self._topics.get(name)
        if existing is not None and count < existing.queues:
            raise errors.InvalidArgument(
                f"topic {name} has {existing.queues} queues; shrinking to {count} would orphan messages"
            )
        config = TopicConfig(name=name, queues=count, message_type=message_type, perm=perm, system=system)
        if existing != config:
            self._topics[name] = config
            self._save_or_undo(name, existing)
        return config

    def _save_or_undo(self, name: str, before: TopicConfig | None) -> None:
        """Persist the registry after ``name`` changed; if that fails, put ``name`` back as it was
        (``before``; None: absent), so memory never holds a topic the file lacks. A retry topic that
        lived only in memory after a failed save got messages no restart could find again."""
        try:
            self._save()
        except BaseException:
            if before is None:
                self._topics.pop(name, None)
            else:
                self._topics[name] = before
            raise

    def delete(self, name: str) -> None:
        config = self._topics.get(name)
        if config is None:
            raise errors.TopicNotFound(f"topic {name} does not exist")
        if config.system or names.is_system_topic(name):
            raise errors.Forbidden(f"{name} is a system topic and cannot be deleted")
        del self._topics[name]
        self._save_or_undo(name, config)

    def resolve(self, name: str, *, for_write: bool, message_type: MessageType | None = None) -> TopicConfig:
        """The topic a client addresses, auto-created if allowed; checks permission and message type."""
        config = self._topics.get(name)
        if config is None:
            names.validate_topic(name, allow_system=names.is_retry_or_dlq(name))
            if not self._auto_create and not names.is_retry_or_dlq(name):
                raise errors.TopicNotFound(f"topic {name} does not exist and auto-creation is off")
            queues = 1 if names.is_retry_or_dlq(name) else None
            config = self.create(name, queues=queues)
        if for_write and not config.writable:
            raise errors.Forbidden(f"topic {name} is not writable")
        if not for_write and not config.readable:
            raise errors.Forbidden(f"topic {name} is not readable")
        if message_type is not None and not config.message_type.accepts(message_type):
            raise errors.MessageTypeConflict(
                f"topic {name} accepts {config.message_type.name} messages, not {message_type.name}"
            )
        return config

    def ensure_system(self, name: str, queues: int) -> TopicConfig:
        existing = self._topics.get(name)
        if existing is not None and existing.queues >= queues:
            return existing
        return self.create(name, queues=queues, system=True)
