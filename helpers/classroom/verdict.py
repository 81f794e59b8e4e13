"""What a check raises: the grader's sentence, shown alone in a notebook.

IPython (Jupyter, and the autograder nbgrader, whose feedback is the kernel's error
output) shows an exception that has a ``_render_traceback_()`` method by calling it
instead of printing the frames.  The frames of a failed check are the grader's own,
not the student's code, so a check's verdict renders as one line: its class and its
sentence.  An error raised by the student's own code keeps its full traceback.
"""

from __future__ import annotations

from .. import checks


class _Sentence:
    """Rendered by IPython as ``Name: sentence``, without the grader's frames."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


class CheckFailed(_Sentence, checks.CheckFailed):
    """A check's verdict: what is wrong with the function it was given, and what to do."""


class BadArgument(_Sentence, TypeError, ValueError):
    """A check called the wrong way: what was passed, and what to pass instead."""
