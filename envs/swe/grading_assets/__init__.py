"""Files the grader copies into the grading sandbox and runs there (never imported by the host).

They run under the image's own interpreter, which may be older than ours, so they keep to
Python 3.7 syntax and the standard library plus pytest.
"""
