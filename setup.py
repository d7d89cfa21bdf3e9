"""The compiled parts of uidx: the RangeIndexer's hot paths (core/_fastindex.pyx)
and its parse of a new file's subject (core/_fastsubject.pyx),
a fragment's checks at batch intake and its unpacking in the catalog build
(wire/_fastfragments.pyx), and a merged file's figures in the build
(core/_fastmerge.pyx).

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
            "usenet_indexer.core._fastsubject",
            ["usenet_indexer/core/_fastsubject.pyx"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "usenet_indexer.core._fastmerge",
            ["usenet_indexer/core/_fastmerge.pyx"],
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
