"""Errors of the remoting layer, named after the side that broke the rules (as in h11).

* ``RemoteProtocolError``: the peer sent bytes that are not a remoting frame (bad length, bad header,
  bad JSON). The connection cannot continue; the driver logs the reason and closes it.
* ``LocalProtocolError``: our own code misused the connection (sending after close, a duplicate
  opaque, using a connection that already failed). A bug on this side, never the peer's fault.
* ``InvalidHeader`` / ``InvalidBody``: a well-framed request whose custom header fields or body are
  wrong (a required field missing, a number that is not a number). The frame boundary is intact, so
  the broker answers with an error response and keeps the connection.
"""

from __future__ import annotations

from txmq.common import errors


class RemoteProtocolError(errors.ProtocolError):
    """The peer violated the remoting framing; close the connection."""


class LocalProtocolError(errors.ProtocolError):
    """This side misused the remoting connection (a bug in the caller)."""


class InvalidHeader(errors.InvalidArgument):
    """A request's extFields lack a required field or hold a malformed value."""


class InvalidBody(errors.InvalidArgument):
    """A request or response body (JSON or binary messages) cannot be decoded."""
