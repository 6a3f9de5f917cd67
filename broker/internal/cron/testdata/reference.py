"""The second implementation of a schedule's runs, for croniter_test.go.

Reads one JSON object per line on stdin: {"spec": a croniter expression
(seconds, when given, last), "zone": an IANA name, "start": Unix seconds,
"n": how many runs}. Writes one per line: {"runs": [Unix seconds, ...]},
the first n runs strictly after start, or {"error": "..."}.

Which wall-clock times match is croniter's (Debian's python3-croniter) on
naive datetimes, where no clock jumps. Which instants they run at is
written here again, independently of the Go code, with the standard
library's zoneinfo, by the rule of package cron (ISC cron's): a spec whose
hour field names hours keeps wall-clock time (a time in a gap runs at the
jump, a repeated time runs the first time only); one whose hour field is
every hour keeps real time (a time in a gap has no run, a repeated time
runs twice).
"""

import json
import signal
import sys
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from croniter import croniter

UTC = timezone.utc
# How far before a start (in wall-clock time) a matching time may still run
# after it: the longest repeated stretch of wall-clock time in the zones the
# test uses (an hour; three for margin).
BACK = timedelta(hours=3)


def keeps_wall_time(spec):
    hours = croniter(spec).expanded[1]
    return not (hours == ["*"] or set(hours) >= set(range(24)))


def jump(zone, lo, hi):
    """The first whole second in (lo, hi] whose offset is hi's."""
    target = hi.astimezone(zone).utcoffset()
    while hi - lo > timedelta(seconds=1):
        mid = (lo + (hi - lo) / 2).replace(microsecond=0)
        if mid.astimezone(zone).utcoffset() == target:
            hi = mid
        else:
            lo = mid
    return hi


def instants(zone, wall, w):
    """The instants at which the matching wall-clock time w runs."""
    first = w.replace(tzinfo=zone, fold=0)
    second = w.replace(tzinfo=zone, fold=1)
    u0, u1 = first.astimezone(UTC), second.astimezone(UTC)
    if u0.astimezone(zone).replace(tzinfo=None) != w:
        # w does not exist. fold=0 reads it with the offset before the
        # jump (an instant after it), fold=1 with the one after.
        return [jump(zone, min(u0, u1), max(u0, u1))] if wall else []
    if u0 != u1:
        # w happens twice: fold=0 is the first time.
        return [min(u0, u1)] if wall else sorted([u0, u1])
    return [u0]


def runs(spec, zone_name, start, n):
    zone = ZoneInfo(zone_name)
    wall = keeps_wall_time(spec)
    begin = datetime.fromtimestamp(start, UTC).astimezone(zone).replace(tzinfo=None) - BACK
    it = croniter(spec, begin - timedelta(seconds=1))
    found = set()
    while True:
        w = it.get_next(datetime)
        for r in instants(zone, wall, w):
            ts = int(r.timestamp())
            if ts > start:
                found.add(ts)
        if len(found) >= n:
            last = sorted(found)[n - 1]
            last_wall = datetime.fromtimestamp(last, UTC).astimezone(zone).replace(tzinfo=None)
            if w > last_wall + BACK:
                return sorted(found)[:n]


class Timeout(Exception):
    pass


def alarm(signum, frame):
    raise Timeout("no answer within 5 seconds")


def main():
    signal.signal(signal.SIGALRM, alarm)
    for line in sys.stdin:
        case = json.loads(line)
        signal.alarm(5)
        try:
            out = {"runs": runs(case["spec"], case["zone"], case["start"], case["n"])}
        except Exception as e:  # reported to the Go test
            out = {"error": "%s: %s" % (type(e).__name__, e)}
        signal.alarm(0)
        print(json.dumps(out), flush=True)


main()
