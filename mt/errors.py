"""The one exception type for failures a user caused: the CLI prints its message as one line."""


class MtError(Exception):
    """Bad input, a missing file or a refused action. The message names the file/line or flag."""

    exit_code = 1


class ConfigError(MtError):
    """A bad flag, recipe or config value (exit code 2, like ruff)."""

    exit_code = 2
