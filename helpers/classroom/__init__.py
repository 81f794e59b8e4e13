"""The classroom: the grading engine and the exercises it grades.

A student notebook calls ``grading.check(1, my_function)``; instructors read
``docs/teaching.md``.
"""
