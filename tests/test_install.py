"""testing.install: a package several tools want at once is installed once."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from usenet_indexer.testing.install import install_once

DEADLINE_SECONDS = 10.0


class FakePackage:
    """A package whose first install lasts until a second caller came and chose."""

    def __init__(self) -> None:
        self.installed = False
        self.installs = 0
        self.installing = threading.Event()
        # The second caller waits for the first's install, or installs too.
        self.second_chose = threading.Event()

    def present(self) -> bool:
        return self.installed

    def install(self) -> None:
        self.installs += 1
        if self.installing.is_set():
            self.second_chose.set()
            return
        self.installing.set()
        # The second caller comes while this install runs (as the prefetch
        # part's INN2 and the several-machines one's did in scripts/chaos).
        assert self.second_chose.wait(DEADLINE_SECONDS)
        self.installed = True


def test_two_callers_at_once_install_once(tmp_path: Path) -> None:
    package = FakePackage()
    lock = tmp_path / "install.lock"
    waited: list[str] = []

    def call(name: str) -> None:
        def waiting() -> None:
            waited.append(name)
            package.second_chose.set()

        install_once(package.present, package.install, lock, waiting=waiting)

    first = threading.Thread(target=call, args=("first",))
    first.start()
    assert package.installing.wait(DEADLINE_SECONDS)
    second = threading.Thread(target=call, args=("second",))
    second.start()
    for thread in (first, second):
        thread.join(DEADLINE_SECONDS)
        assert not thread.is_alive()
    # The second waited for the lock, found the package there and did nothing.
    assert waited == ["second"]
    assert package.installs == 1
    assert package.installed


def test_a_present_package_is_not_installed(tmp_path: Path) -> None:
    installs: list[str] = []
    install_once(lambda: True, lambda: installs.append("x"), tmp_path / "install.lock")
    assert installs == []


def test_a_failed_install_lets_the_next_caller_try(tmp_path: Path) -> None:
    lock = tmp_path / "install.lock"

    def fail() -> None:
        raise RuntimeError("apt-get failed")

    with pytest.raises(RuntimeError, match="apt-get failed"):
        install_once(lambda: False, fail, lock)
    installs: list[str] = []
    install_once(lambda: False, lambda: installs.append("x"), lock)
    assert installs == ["x"]
