"""Storage: one CommitLog, ConsumeQueues and a key index derived from it, crash recovery.

The broker talks to storage only through :class:`txmq.storage.store.MessageStore` and the types in
:mod:`txmq.storage.api`.
"""
