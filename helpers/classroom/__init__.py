"""The classroom: the grading engine, the exercises it grades, and what fusing them buys.

A student notebook calls ``grading.check(1, my_function)`` (or ``grading.check_exercise_1``)
and, at the end, ``speedups.show(1, my_function, the_given_unfused_function)``.
Each exercise is data in :mod:`helpers.classroom.exercises`; instructors read
``docs/teaching.md``.
"""
