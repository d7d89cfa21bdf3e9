"""The compiled part of uidx: the RangeIndexer's hot paths (core/_fastindex.pyx).

Everything else is in pyproject.toml. The extension is optional: where it
cannot be built (no C compiler, no Python headers) the install goes on
without it and the pure-Python code runs (core/indexer.py says which, once).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "usenet_indexer.core._fastindex",
            ["usenet_indexer/core/_fastindex.pyx"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
