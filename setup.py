"""The compiled parts of uidx: the RangeIndexer's hot paths (core/_fastindex.pyx),
a batch fragment's checks at the coordinator (wire/_fastwire.pyx) and the catalog
build's fragment unpacking (wire/_fastfragments.pyx).

Everything else is in pyproject.toml. The extensions are optional: where they
cannot be built (no C compiler, no Python headers) the install goes on
without them and their pure-Python twins run (core/indexer.py says which, once).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "usenet_indexer.core._fastindex",
            ["usenet_indexer/core/_fastindex.pyx"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "usenet_indexer.wire._fastwire",
            ["usenet_indexer/wire/_fastwire.pyx"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "usenet_indexer.wire._fastfragments",
            ["usenet_indexer/wire/_fastfragments.pyx"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
    ]
)
