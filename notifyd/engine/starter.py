"""What `notifyd init` writes: a config whose sample kind, payment_failed, sends at once through
the starter templates on the log channel, and those templates (en and de, every medium) with
the names a person reads for the kind and its category (names/en.toml, names/de.toml), so a
first notification needs no hand work. notifyd.example.toml stays the reference: every key at
its default, no kind of its own.
"""

from __future__ import annotations

import json
from pathlib import Path

from notifyd.config import render_example
from notifyd.engine.names import FOLDER as NAMES
from notifyd.engine.templates import LAYOUT, MEDIA, SUFFIX

KIND = "payment_failed"
CATEGORY = "billing"
STARTER_PARAMS = '{"amount": "9.90 EUR", "invoice": "1009", "url": "https://example.com/i/1009"}'
# The starter's tables, after the reference's commented keys: every key says what it does. The
# email channel is written commented out: until a real server is filled in, each send to it
# would only fail.
STARTER_CONFIG = """\
# --- A first kind, ready to send ------------------------------------------------------------
#
# payment_failed, in the words of the starter templates that notifyd init wrote in the
# templates folder beside this file (payment_failed/en and payment_failed/de). Its params
# are amount, invoice and url. With a key from notifyd keys create, post one:
#
#   curl -X POST http://127.0.0.1:7726/v1/notifications -H "Authorization: Bearer $KEY" \\
#     -d '{"user_id": "u_42", "kind": "payment_failed", "dedup_key": "invoice-1009",
#          "params": {"amount": "9.90 EUR", "invoice": "1009",
#                     "url": "https://example.com/i/1009"}}'
#
# and end it once the invoice is paid: POST /v1/resolutions with the same user_id and
# dedup_key, or notifyd resolve u_42:invoice-1009. notifyd templates check lists each kind
# with the templates it is sent by.

# The kind: its ladder and policy (a kind's other keys are listed above, under [kinds.NAME]).
[kinds.payment_failed]
# At once on the log channel, then a reminder an hour later unless the notification is
# resolved first. Once the email channel below is set up, write channel = "email" in both
# steps: the same templates, sent to the person's email address.
ladder = [
  { channel = "log", timeout_sec = 3600 },
  { channel = "log" },
]
# How long notifyd keeps trying: a step not sent within three days (a mail server down that
# long) ends expired.
ttl_sec = 259200
# What ends the ladder: a resolution, written from outside (the API, notifyd resolve).
stop = "resolved"
# Its preference category: what a person turns off per medium in the preference centre, which
# shows it by the name in templates/names/<locale>.toml ("Billing", "Rechnungen").
category = "billing"

# The log channel, standing in for email until a mail server is set up: it renders each step
# through the kind's email templates and writes the subject and text to notifyd's log.
[channels.log]
# Channel type: writes each message to the log.
type = "log"
# The templates it renders: email, sms, push or chat. Empty: ids and param names only.
medium = "email"

# Email through your SMTP server, once you have one: remove the "# " before each line below,
# fill in the server and the sender, and write channel = "email" in the ladder above. Each
# person needs an email address: PUT /v1/users/u_42 with {"email": "ada@example.com"}.
#
# [channels.email]
# # Channel type: an SMTP server or relay (or "resend": a provider's HTTP API, with an api_key).
# type = "smtp"
# # The server's name.
# host = "smtp.example.com"
# # Its port: 587 for STARTTLS submission, 465 with tls = "tls".
# port = 587
# # The From header of every message.
# from_address = "Billing <billing@example.com>"
# # The login, if the server asks for one.
# username = "billing@example.com"
# # Its password, a secret: the file that holds it (relative to this file's folder; let only
# # notifyd read it).
# password_file = "smtp-password"
"""


def render_starter() -> str:
    """The config `notifyd init` writes: the reference (every key, commented, at its default),
    then the starter's kind and channels."""
    return render_example() + "\n" + STARTER_CONFIG


def write_starter(folder: Path) -> list[Path]:
    """The templates of the sample kind, payment_failed (params amount, invoice, url), in en
    and de for every medium, and a README.txt; returns the paths written. Overwrites nothing:
    when one file is there already it raises FileExistsError naming it and writes none."""
    files = {folder / "README.txt": _starter_readme()}
    for locale, texts in _STARTER.items():
        for name, text in texts.items():
            files[folder / KIND / locale / f"{name}{SUFFIX}"] = text
    for locale, said in _NAMES.items():
        files[folder / NAMES / f"{locale}.toml"] = _names_file(*said)
    for path in files:
        if path.exists():
            raise FileExistsError(f"{path} is there already; the starter overwrites nothing")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("x", encoding="utf-8") as f:  # "x": a file that appeared since is kept
            f.write(text)
    return list(files)


def _starter_readme() -> str:
    media = "\n".join(f"  {m:<6} {', '.join(p.required)}"
                      + (f" (optional: {', '.join(p.optional)})" if p.optional else "")
                      for m, p in MEDIA.items())
    return f"""Message templates for notifyd (jinja2)

Layout: {LAYOUT}, e.g. payment_failed/en/email.subject.j2
Parts by medium (a channel type sends one medium):
{media}

Locale: a recipient with locale de-AT (de_AT works too) gets the first folder of de-AT, de and
the default locale that holds every required part of the medium. Parts never mix across
folders: a folder missing one of them is skipped whole, and the daemon will not start.

Variables: the notification's params, plus kind, notification_id, user_id, locale (the folder
rendered), unsubscribe_url (may be empty: guard it with {{% if unsubscribe_url %}}),
preferences_url (the person's preference centre; empty without server.public_url), and
kind_title, kind_description, category_title, category_description: the names a person reads
(a description may be empty). These names win over a param of the same name. An undefined
variable is an error, not an empty string.

Names: {NAMES}/<locale>.toml gives each kind and preference category the title (and
description) a person reads in that language, in the emails' footers, the preference centre,
the unsubscribe page and the inbox widget:

  [kinds.payment_failed]
  title = "Failed payment"
  description = "When we could not collect a payment for an invoice."

The locale is chosen as for templates (de-AT, de, then the default); a kind or category no file
names shows as its name made readable ("payment_failed" as "Payment failed").

Only .html.j2 files are HTML-escaped. One trailing newline is dropped from each part, and a line
holding only a {{% %}} tag leaves no blank line. Each file stands alone (no include, extends or
import). An email subject must render to one line. Files are read at start and at a reload
(SIGHUP): reload or restart notifyd after an edit. Try one, from the folder that holds this
one, with the params it needs:

  notifyd templates render payment_failed --channel email --locale de --params '{STARTER_PARAMS}'
"""


_EN_TEXT = """Hello,

we could not collect {{ amount }} for invoice {{ invoice }}.
Please update your payment details:
{{ url }}

Reference: {{ notification_id }} ({{ kind_title }})
{% if unsubscribe_url %}
Unsubscribe from "{{ category_title }}": {{ unsubscribe_url }}
{% endif %}
{% if preferences_url %}
Choose what we send you: {{ preferences_url }}
{% endif %}
"""
_DE_TEXT = """Guten Tag,

wir konnten {{ amount }} für die Rechnung {{ invoice }} nicht einziehen.
Bitte aktualisieren Sie Ihre Zahlungsdaten:
{{ url }}

Referenz: {{ notification_id }} ({{ kind_title }})
{% if unsubscribe_url %}
Von „{{ category_title }}“ abmelden: {{ unsubscribe_url }}
{% endif %}
{% if preferences_url %}
Benachrichtigungen einstellen: {{ preferences_url }}
{% endif %}
"""
_HTML = """<!doctype html>
<html lang="{{{{ locale }}}}">
<body>
<p>{hello}</p>
<p>{body}</p>
<p><a href="{{{{ url }}}}">{link}</a></p>
<p style="color:#666">{ref}: {{{{ notification_id }}}} ({{{{ kind_title }}}})
{{% if unsubscribe_url %}}
  &middot; <a href="{{{{ unsubscribe_url }}}}">{unsubscribe}</a>
{{% endif %}}
{{% if preferences_url %}}
  &middot; <a href="{{{{ preferences_url }}}}">{preferences}</a>
{{% endif %}}
</p>
</body>
</html>
"""
_STARTER: dict[str, dict[str, str]] = {
    "en": {
        "email.subject": "Payment failed: invoice {{ invoice }}\n",
        "email.text": _EN_TEXT,
        "email.html": _HTML.format(
            hello="Hello,", link="Update your payment details", ref="Reference",
            body="we could not collect <strong>{{ amount }}</strong> for invoice {{ invoice }}.",
            unsubscribe="Unsubscribe from “{{ category_title }}”",
            preferences="Choose what we send you"),
        "sms.text": "Payment of {{ amount }} for invoice {{ invoice }} failed. "
                    "Update your details: {{ url }}\n",
        "push.title": "Payment failed\n",
        "push.body": "We could not collect {{ amount }} for invoice {{ invoice }}.\n",
        "chat.text": "Payment failed: we could not collect {{ amount }} for invoice "
                     "{{ invoice }}. Update your payment details: {{ url }}\n",
        "inbox.title": "Payment failed\n",
        "inbox.body": "We could not collect {{ amount }} for invoice {{ invoice }}. "
                      "Update your payment details: {{ url }}\n",
    },
    "de": {
        "email.subject": "Zahlung fehlgeschlagen: Rechnung {{ invoice }}\n",
        "email.text": _DE_TEXT,
        "email.html": _HTML.format(
            hello="Guten Tag,", link="Zahlungsdaten aktualisieren", ref="Referenz",
            body="wir konnten <strong>{{ amount }}</strong> für die Rechnung {{ invoice }} "
                 "nicht einziehen.", unsubscribe="Von „{{ category_title }}“ abmelden",
            preferences="Benachrichtigungen einstellen"),
        "sms.text": "Die Zahlung von {{ amount }} für Rechnung {{ invoice }} ist fehlgeschlagen. "
                    "Zahlungsdaten aktualisieren: {{ url }}\n",
        "push.title": "Zahlung fehlgeschlagen\n",
        "push.body": "Wir konnten {{ amount }} für Rechnung {{ invoice }} nicht einziehen.\n",
        "chat.text": "Zahlung fehlgeschlagen: wir konnten {{ amount }} für Rechnung {{ invoice }} "
                     "nicht einziehen. Zahlungsdaten aktualisieren: {{ url }}\n",
        "inbox.title": "Zahlung fehlgeschlagen\n",
        "inbox.body": "Wir konnten {{ amount }} für Rechnung {{ invoice }} nicht einziehen. "
                      "Zahlungsdaten aktualisieren: {{ url }}\n",
    },
}
# The names a person reads for the kind and its category, per locale: (the file's opening
# comment, the kind's title and description, the category's).
_NAMES: dict[str, tuple[str, tuple[str, str], tuple[str, str]]] = {
    "en": ("The names a person reads for kinds and preference categories, in English.",
           ("Failed payment", "When we could not collect a payment for an invoice."),
           ("Billing", "Invoices, payments and what goes wrong with them.")),
    "de": ("Die Namen der Benachrichtigungen und Kategorien, wie eine Person sie liest, auf "
           "Deutsch.",
           ("Fehlgeschlagene Zahlung",
            "Wenn wir eine Zahlung für eine Rechnung nicht einziehen konnten."),
           ("Rechnungen", "Rechnungen, Zahlungen und was dabei schiefgeht.")),
}


def _names_file(comment: str, kind: tuple[str, str], category: tuple[str, str]) -> str:
    """A names file for the starter's kind and category (a JSON string is a TOML one)."""
    def entry(table: str, name: str, said: tuple[str, str]) -> str:
        title, description = (json.dumps(text, ensure_ascii=False) for text in said)
        return f"[{table}.{name}]\ntitle = {title}\ndescription = {description}\n"

    return f"# {comment}\n\n{entry('kinds', KIND, kind)}\n{entry('categories', CATEGORY, category)}"
