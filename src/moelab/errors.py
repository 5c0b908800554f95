"""The one exception type for user mistakes: the CLI prints its message as one line and exits 2."""


class UserError(ValueError):
    """Bad input from the user (a file, a name, a flag). The message names the thing that is wrong."""
