"""Errors a user can fix: the stage scripts print these as one ``error: ...`` line (exit 2);
any other exception is a bug and shows its full traceback."""


class UserError(Exception):
    """Base of the problems a user can fix (bad params, missing or corrupt inputs, a diverged run)."""


class DataError(UserError, ValueError):
    """An input file or data set that is corrupt, of the wrong format, or too small for the params;
    the message names the file or data set and the fix."""
