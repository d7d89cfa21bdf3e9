"""A user's daily use, counted where a request spends it.

The newznab API counts each request and NZB download of a key here, and the
status page each search of a user who is not an operator: the same count
(store/users.py's `take`, one upsert that never counts past the limit,
whichever coordinator process asks), against the same limits (the user's
own, else the settings'), in the same UTC day.
"""

from __future__ import annotations

import attrs

from usenet_indexer.core.newznab import Usage, usage_day
from usenet_indexer.store.users import DailyLimits, UserStore


@attrs.frozen
class DailyUse:
    """The users' use of the UTC day and its limits (called in a worker thread).

    Attributes:
        users: the users and their counts.
        limits: the limits of a user without its own (the settings'; 0: none).
    """

    users: UserStore
    limits: DailyLimits = attrs.field(factory=DailyLimits)

    def take(self, user_id: int, *, grab: bool, now: float) -> Usage | None:
        """Count one request (`grab`: one NZB download) of a user at unix time `now`.

        Returns:
            The day's use with this one counted; None when the limit was reached
            (nothing counted).
        """
        return self.users.take(user_id, grab=grab, defaults=self.limits, day=usage_day(now))

    def limits_of(self, user_id: int) -> DailyLimits:
        """The limits a user's use is counted against (its own, else `limits`)."""
        return self.users.limits_of(user_id, self.limits)
