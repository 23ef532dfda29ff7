"""The one exception type users see, and the CLI's rule for reporting it.

Every user mistake (config, capture, argument) surfaces as a ``PathtwinError`` whose message
is a single line naming what is wrong and where. The CLI prints it as
``pathtwin: error: <message>`` and exits with status 2; it never shows a traceback for one.
"""


class PathtwinError(Exception):
    """A user's mistake or an environment problem, with a one-line explanation."""

    exit_code = 2
