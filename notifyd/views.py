"""What a notification looks like to people: the API's status shape and `inspect`'s timeline.

Both are derived from the rows alone, so support can answer "why did this person get this, or
not?" without logs. Pure functions over the dicts the store returns.
"""

from __future__ import annotations

from typing import Any

from notifyd.models import OPEN_STEP_STATES, iso

FINAL_ORDER = ("delivered", "sent", "expired")


def current_state(n: dict[str, Any]) -> str:
    """resolved, <channel>_<state> of the first open step, or how the ladder ended."""
    if n.get("resolved_at") is not None:
        return "resolved"
    steps = n["steps"]
    for s in steps:
        if s["state"] in OPEN_STEP_STATES:
            return f"{s['channel']}_{s['state']}"
    states = {s["state"] for s in steps}
    for final in FINAL_ORDER:
        if final in states:
            return final
    return "undeliverable"


def delivered_via(n: dict[str, Any]) -> str | None:
    for wanted in ("delivered", "sent"):
        for s in n["steps"]:
            if s["state"] == wanted:
                return str(s["channel"])
    return None


def total_time_ms(n: dict[str, Any]) -> int | None:
    """From accept to resolution, or to the last step's end; None while the ladder is open."""
    if n.get("resolved_at") is not None:
        return int(n["resolved_at"] - n["created_at"])
    if any(s["state"] in OPEN_STEP_STATES for s in n["steps"]):
        return None
    return int(max(s["updated_at"] for s in n["steps"]) - n["created_at"])


def status_view(n: dict[str, Any]) -> dict[str, Any]:
    """The API's status shape (seed 001), with every step and its attempts."""
    resolution = None
    if n["resolved_at"] is not None:
        resolution = {"resolution": n["resolution"], "resolved_at": iso(n["resolved_at"]),
                      "resolved_by": n["resolved_by"]}
    return {
        "notification_id": n["id"],
        "user_id": n["user_id"],
        "kind": n["kind"],
        "dedup_key": n["dedup_key"],
        "created_at": iso(n["created_at"]),
        "expires_at": iso(n["expires_at"]),
        "current_state": current_state(n),
        "delivered_via": delivered_via(n),
        "resolution": resolution,
        "steps": [_step_view(s) for s in n["steps"]],
        "total_time_ms": total_time_ms(n),
    }


def _step_view(s: dict[str, Any]) -> dict[str, Any]:
    return {
        "step_no": s["step_no"],
        "channel": s["channel"],
        "status": s["state"],
        "send_after": iso(s["send_after"]),
        "attempts": s["attempts"],
        "reason": s["reason"],
        "note": s["note"],
        "provider_ref": s["provider_ref"],
        "updated_at": iso(s["updated_at"]),
        "attempt_log": [{
            "attempt": a["attempt_no"], "started_at": iso(a["started_at"]),
            "ended_at": iso(a["ended_at"]), "outcome": a["outcome"], "reason": a["reason"],
            "provider_ref": a["provider_ref"]} for a in s.get("attempt_log", [])],
    }


def timeline(n: dict[str, Any]) -> list[str]:
    """Every decision on the notification, in time order, with its reason."""
    events: list[tuple[int, int, str]] = [(n["created_at"], 0, (
        f"accepted from key {n['key_name']!r}: kind {n['kind']}, {len(n['steps'])} steps, "
        f"expires {iso(n['expires_at'])}"))]
    for s in n["steps"]:
        tag = f"step {s['step_no']} {s['channel']}"
        planned = f"{tag}: due {iso(s['send_after'])}"
        if s["note"]:
            planned += f" ({s['note']})"
        events.append((n["created_at"], 1, planned))
        for a in s.get("attempt_log", []):
            events.append((a["started_at"], 2, f"{tag}: attempt {a['attempt_no']} started"))
            if a["ended_at"] is not None:
                ref = f" ref={a['provider_ref']}" if a["provider_ref"] else ""
                why = f": {a['reason']}" if a["reason"] else ""
                events.append((a["ended_at"], 3, f"{tag}: attempt {a['attempt_no']} "
                               f"{a['outcome']}{why}{ref}"))
        why = f": {s['reason']}" if s["reason"] else ""
        if s["state"] not in OPEN_STEP_STATES:
            events.append((s["updated_at"], 4, f"{tag}: {s['state']}{why}"))
        elif s["reason"]:  # still open, and something decided why it waits (a retry, quiet
            events.append((s["updated_at"], 4, f"{tag}: {s['state']}{why}, due "  # hours, ...)
                           f"{iso(s['send_after'])}"))
    if n["resolved_at"] is not None:
        events.append((n["resolved_at"], 3, f"resolved {n['resolution']!r} by {n['resolved_by']}"))
    events.sort(key=lambda e: (e[0], e[1]))
    head = (f"{n['id']}  tenant={n['tenant']} user={n['user_id']} kind={n['kind']} "
            f"dedup_key={n['dedup_key']}")
    lines = [head] + [f"  {iso(at)}  {text}" for at, _, text in events]
    lines.append(f"  state now: {current_state(n)}")
    return lines
