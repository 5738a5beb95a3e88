"""Errors that gbx reports to the user as one line.

Every error raised for bad input (config, plugin selection, device) derives
from :class:`GbxError`; the CLI prints ``gbx: error: <message>`` and exits with
:attr:`GbxError.exit_code` instead of showing a traceback.
"""

from __future__ import annotations


class GbxError(Exception):
    """A user-facing error: the message names the problem and the fix."""

    exit_code: int = 2


class ConfigError(GbxError):
    """The configuration is invalid (unknown key, wrong type, out of range)."""


class PluginError(GbxError):
    """A plugin could not be loaded or two plugins clash."""


class PluginNotInstalledError(PluginError):
    """A run asked for an env/algorithm/observer no installed plugin provides."""


class DuplicateRegistrationError(PluginError):
    """Two plugins registered the same name for the same kind of object."""


class DeviceError(GbxError):
    """The requested device is not available on this machine."""


class RunFailedError(GbxError):
    """The trainer raised; a failure bundle was written under ``failures/``."""

    exit_code = 1

    def __init__(self, message: str, trace_id: str) -> None:
        super().__init__(message)
        self.trace_id = trace_id
