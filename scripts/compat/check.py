#!/usr/bin/env python3
"""The verdict on one client library, from the simulator's own records.

Whatever the client says about itself, this asks the simulator's control
API what actually happened: an Identify that got READY, at least N
heartbeats on the session's live connection with none past the 4009
deadline, the expected reply POSTed over REST (and stored as the bot's
message in that channel), and with --resume a Resume (after the op 7 the
bot asked for) on READY's `resume_gateway_url` that got RESUMED, and with
--rate-limited N at least N 429s, each retried with success. Prints one
verdict line; exit 0 on pass, 1 on fail. Standard
library only, so it runs before any venv exists.
"""

import argparse
import json
import sys
import urllib.parse
import urllib.request


def get(url):
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.load(resp)


def rest_summary(rest_log):
    """`GET /users/@me 200, POST /channels/{id}/messages 200`: ids elided."""
    calls = []
    for r in rest_log:
        path = "/".join("{id}" if part.isdigit() else part
                        for part in r["path"].removeprefix("/api/v10").split("/"))
        calls.append(f"{r['method']} {path} {r['status']}")
    return ", ".join(calls) or "none"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True)
    ap.add_argument("--control", required=True, help="http://127.0.0.1:P/control")
    ap.add_argument("--beats", type=int, default=4)
    ap.add_argument("--reply", required=True, help="the content the bot must have posted")
    ap.add_argument("--channel", required=True, help="the DM channel it must have posted in")
    ap.add_argument("--resume", action="store_true",
                    help="require a resumed connection on READY's resume_gateway_url")
    ap.add_argument("--resume-path-prefix", default="/resume",
                    help="where the resume must happen (serenity 0.12 resumes on the gateway URL: '/')")
    ap.add_argument("--rate-limited", type=int, default=0,
                    help="require at least N 429s, each followed by a successful retry of the same request")
    ap.add_argument("--compression", default=None,
                    help="expected compression on the identified connection (zlib-stream, payload, none)")
    args = ap.parse_args()

    problems = []
    try:
        stats = get(args.control + "/stats")
        rest_log = get(args.control + "/rest-log")
        query = urllib.parse.urlencode({"channel_id": args.channel})
        messages = get(args.control + "/messages?" + query)
    except Exception as err:  # noqa: BLE001 — any failure here is the verdict
        print(f"compat {args.name}: FAIL — control API unreachable: {err}")
        return 1

    totals = stats["totals"]
    if totals["identifies"] < 1:
        problems.append("no Identify")
    if totals["sessions_started"] < 1:
        problems.append("no session started (READY)")
    # The session's connections: the identified one, and any resumed one.
    session = [c for c in stats["connections"] if c["identifies"] > 0 or c["resumes"] > 0]
    best = max(session, key=lambda c: c["heartbeats"], default=None)
    if args.resume:
        resumed = [c for c in session if c["resumes"] > 0]
        if totals["resumes"] < 1 or not resumed:
            problems.append("no Resume got RESUMED")
        elif not all(c["path"].startswith(args.resume_path_prefix) for c in resumed):
            problems.append(f"resumed on {[c['path'] for c in resumed]}, not {args.resume_path_prefix}...")
        else:
            best = max(resumed, key=lambda c: c["heartbeats"])
    if best is None:
        problems.append("no identified connection")
    else:
        if best["heartbeats"] < args.beats:
            problems.append(f"{best['heartbeats']} heartbeats on the session's connection, want >= {args.beats}")
        if best["missed_deadlines"] > 0:
            problems.append(f"{best['missed_deadlines']} heartbeat gaps past the 4009 deadline")
        if best["server_close_code"] is not None:
            problems.append(f"simulator closed it with {best['server_close_code']}")
    identified = [c for c in session if c["identifies"] > 0]
    if args.compression is not None and identified:
        # On the identified connection: payload compression is an Identify
        # field, so a resumed connection has none.
        got = identified[0]["compression"] or "none"
        if got != args.compression:
            problems.append(f"compression {got}, expected {args.compression}")
    refused = [c["server_close_code"] for c in stats["connections"] if c["server_close_code"] is not None]
    if refused:
        problems.append(f"simulator close codes {refused}")
    if totals["heartbeat_timeouts"] > 0:
        problems.append(f"{totals['heartbeat_timeouts']} connections closed with 4009")

    path = f"/api/v10/channels/{args.channel}/messages"
    posts = [r for r in rest_log if r["method"] == "POST" and r["path"] == path]
    good = [r for r in posts if 200 <= r["status"] < 300
            and isinstance(r["body"], dict) and r["body"].get("content") == args.reply]
    if not good:
        answered = [r["status"] for r in posts]
        problems.append(f"no successful POST {path} with the reply (POSTs there answered {answered})")
    if not any(m.get("content") == args.reply for m in messages):
        problems.append("the reply is not among the bot's messages in the DM channel")

    limited = [i for i, r in enumerate(rest_log) if r["status"] == 429]
    if len(limited) < args.rate_limited:
        problems.append(f"{len(limited)} 429s answered, want >= {args.rate_limited}")
    for i in limited:
        r = rest_log[i]
        if not any(later["method"] == r["method"] and later["path"] == r["path"]
                   and 200 <= later["status"] < 300 for later in rest_log[i + 1:]):
            problems.append(f"the 429 on {r['method']} {r['path']} was never retried with success")

    if problems:
        print(f"compat {args.name}: FAIL — " + "; ".join(problems))
        return 1
    print(
        f"compat {args.name}: PASS — identify {totals['identifies']}, READY {totals['sessions_started']}, "
        f"{best['heartbeats']} heartbeats (worst gap {best['worst_gap_ms']:.0f} ms of "
        f"{stats['heartbeat_interval_ms']} ms, late {best['late']}), "
        f"compression {identified[0]['compression'] or 'none'}, REST {rest_summary(rest_log)}"
        + (f", resumed on {best['path']}" if args.resume else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
