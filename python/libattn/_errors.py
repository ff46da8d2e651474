"""Exceptions: every failure of the C library arrives as :class:`Error`."""

from __future__ import annotations

from typing import TYPE_CHECKING


if TYPE_CHECKING:
    from ._select import Candidate, Selection


class Error(Exception):
    """A libattn call failed.

    ``status`` is the C status name (``"INVALID_ARGUMENT"``,
    ``"BAD_METADATA"``, ...), ``message`` the library's detail text.
    """

    def __init__(self, status: str, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class SelectionError(Error):
    """No backend could be selected.

    ``message`` is vLLM's text (for an explicit request: "Selected backend
    ... is not valid for this configuration. Reason: [...]"); ``kind`` is
    libattn's error kind (``"explicit-invalid"``, ``"no-valid"``,
    ``"unknown-name"``...); ``candidates`` lists every backend considered
    with its reasons; ``selection`` is the full result.
    """

    def __init__(self, selection: "Selection") -> None:
        super().__init__(selection.status, selection.message or "selection failed")
        self.kind: str | None = selection.error
        self.candidates: list["Candidate"] = selection.candidates
        self.selection = selection
